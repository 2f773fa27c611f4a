"""ETAPP cases: 16 users x 50 instructions, read and checked before any model loads.

A case is one (user, instruction) pair, id `"{user}-{instruction}"` (e.g. `John_Doe-7`,
instructions numbered from 0 in file order). A sample is a case under one setting and method,
id `"{setting}/{method}/{case}"`; its report row is the `setting` column `"{setting}/{method}"`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import polars as pl

from inference.benchmarks.base import raise_problems, read_json
from .apps import APPS, SUBSTITUTED_TOOLS
from inference.errors import DatasetError

INSTRUCTIONS = Path("data/instruction/instruction.json")
PROFILES = Path("profile/profiles.json")
_FIELDS = ("timestamp", "query", "keypoint for personal", "keypoint for proactive", "available_tools_name",
           "location")


@dataclass(frozen=True)
class Case:
    user: str
    """File stem: the profile name with spaces as underscores."""
    user_name: str
    instruction: int
    timestamp: str
    query: str
    location: str
    available_tools: tuple[str, ...]
    personal: tuple[str, ...]
    proactive: tuple[str, ...]

    @property
    def case_id(self) -> str:
        return f"{self.user}-{self.instruction}"

    @property
    def clean(self) -> bool:
        """Needs no data substitute (spec 1.12: 29 of the 50 instructions)."""
        return not SUBSTITUTED_TOOLS.intersection(self.available_tools)


def stem(name: str) -> str:
    return name.replace(" ", "_")


def read_toolkit(root: Path) -> dict[str, dict[str, Any]]:
    """Tool name -> its config entry, apps in sorted folder order, config order within an app."""
    tools: dict[str, dict[str, Any]] = {}
    for app in APPS:
        for entry in read_json(root / "toolkit" / app.folder / "config.json"):
            tools[entry["function"]["name"]] = entry
    return tools


def tool_domains(root: Path) -> dict[str, str | None]:
    """Tool name -> its app's profile domain (None: no preferences attach)."""
    return {entry["function"]["name"]: app.domain for app in APPS
            for entry in read_json(root / "toolkit" / app.folder / "config.json")}


def read_profiles(root: Path) -> dict[str, dict[str, Any]]:
    """User stem -> high-level profile, in profiles.json order (upstream's user order)."""
    return {stem(name): profile for name, profile in read_json(root / PROFILES).items()}


def concrete_profile(root: Path, user: str) -> dict[str, Any]:
    return read_json(root / "profile" / "concrete_profile" / f"profile_{user}.json")


def load_cases(root: Path, users: Iterable[str] | None, instructions: Iterable[int] | None) -> list[Case]:
    """The selected cases, users in profiles.json order, then instructions in file order; one
    DatasetError lists every problem (files, unknown users or tools, bad records)."""
    problems = case_problems(root, users, instructions)
    raise_problems(problems, root)
    records = read_json(root / INSTRUCTIONS)
    profiles = read_profiles(root)
    chosen_users = list(users) if users else list(profiles)
    chosen = sorted(set(instructions)) if instructions else range(len(records))
    return [_case(u, profiles[u], i, records[i]) for u in chosen_users for i in chosen]


def _case(user: str, profile: dict[str, Any], number: int, record: dict[str, Any]) -> Case:
    return Case(user=user, user_name=user.replace("_", " "), instruction=number,
                timestamp=record["timestamp"], query=record["query"], location=record["location"],
                available_tools=tuple(record["available_tools_name"]),
                personal=tuple(record["keypoint for personal"]), proactive=tuple(record["keypoint for proactive"]))


def case_problems(root: Path, users: Iterable[str] | None, instructions: Iterable[int] | None) -> list[str]:
    """Everything wrong with the files and the selection (empty when the cases can run)."""
    try:
        records = read_json(root / INSTRUCTIONS)
        profiles = read_profiles(root)
        tools = read_toolkit(root)
    except DatasetError as exc:
        return [str(exc)]
    problems = [p for i, r in enumerate(records) for p in record_problems(i, r, tools)]
    chosen_users = list(users) if users else list(profiles)
    problems += [f"dataset.users: unknown user {u!r}; users are {list(profiles)}" for u in chosen_users
                 if u not in profiles]
    problems += [f"dataset.instructions: {i} is not an instruction number (0..{len(records) - 1})"
                 for i in (instructions or []) if not isinstance(i, int) or not 0 <= i < len(records)]
    for user in chosen_users:
        if user in profiles and not (root / "profile" / "concrete_profile" / f"profile_{user}.json").is_file():
            problems.append(f"missing profile/concrete_profile/profile_{user}.json")
    return problems


def record_problems(number: int, record: Any, tools: dict[str, Any]) -> list[str]:
    """Everything wrong with instruction `number` (an unknown tool name is named)."""
    if not isinstance(record, dict):
        return [f"instruction {number}: a {type(record).__name__}, not an object"]
    missing = [f for f in _FIELDS if f not in record]
    if missing:
        return [f"instruction {number}: missing {missing}"]
    unknown = [t for t in record["available_tools_name"] if t not in tools]
    return [f"instruction {number}: available_tools_name names unknown tool {t!r} (not in any "
            f"toolkit/*/config.json)" for t in unknown]


def case_table(cases: list[Case], settings: Iterable[str], methods: Iterable[str]) -> pl.DataFrame:
    """One row per setting x method x case, in that order."""
    rows = [{"sample_id": f"{s}/{m}/{c.case_id}", "setting": f"{s}/{m}", "etapp_setting": s, "method": m,
             "case_id": c.case_id, "user": c.user, "instruction": c.instruction, "clean": c.clean,
             "listed_tools": json.dumps(list(c.available_tools))}
            for s in settings for m in methods for c in cases]
    return pl.DataFrame(rows, schema={"sample_id": pl.String, "setting": pl.String, "etapp_setting": pl.String,
                                      "method": pl.String, "case_id": pl.String, "user": pl.String,
                                      "instruction": pl.Int64, "clean": pl.Boolean, "listed_tools": pl.String})
