"""PEToolBench adapter: benchmark files -> the canonical sample table.

Reads the combined test file (one record holds all three settings) or the published
per-setting layout `dataset_test/user_entries_test_{p,r,c}.json`. Every bad record is
collected and reported in one DatasetError before any model loads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import polars as pl

from inference.benchmarks.base import Benchmark, raise_problems, read_json, sample_row, sample_table
from inference.config import DatasetConfig
from inference.errors import DatasetError

# setting code -> the record field holding that setting's complete system prompt
SETTINGS: dict[str, str] = {
    "p": "instruction_preferred",
    "r": "instruction_ratings",
    "c": "instruction_chronological",
}
_COMMON_FIELDS = ("entry_id", "query", "apis_candidate", "api_call_ground_truth")
# The paper's evaluation script, reproduced in grading/scorers/petoolbench.py.
SCORER = "petoolbench"
# Where the instruction's answer-format section starts: the native format cuts it (the chat
# template then shows the tools and the model answers in its own call format).
_FORMAT_SECTION = "\n\nGenerate your tool call in the following format:"
_NATIVE_CLOSING = "\n\nCall the one tool that fits the user's instruction and preferences."

@dataclass(frozen=True)
class _Source:
    path: Path
    settings: tuple[str, ...]  # the settings this file supplies


def resolve_sources(path: Path, settings: Iterable[str]) -> list[_Source]:
    """Which files supply which settings: one combined file, or one file per setting."""
    settings = tuple(settings)
    if path.is_file():
        return [_Source(path, settings)]
    if not path.is_dir():
        raise DatasetError(f"dataset.path {str(path)!r} does not exist. Point it at "
                           "user_entries_test.json or at a folder holding dataset_test/.")
    for folder in (path / "dataset_test", path):
        per_setting = {s: folder / f"user_entries_test_{s}.json" for s in settings}
        if all(f.is_file() for f in per_setting.values()):
            return [_Source(f, (s,)) for s, f in per_setting.items()]
    combined = sorted(path.glob("*.json"))
    if len(combined) == 1:
        return [_Source(combined[0], settings)]
    raise DatasetError(f"dataset.path {str(path)!r} is a folder without "
                       f"dataset_test/user_entries_test_{{{','.join(settings)}}}.json and with "
                       f"{len(combined)} *.json files instead of one combined file; "
                       "point dataset.path at the file itself.")


def read_records(path: Path) -> list[dict[str, Any]]:
    """The JSON array in `path`, or a DatasetError naming the file and what is wrong."""
    data = read_json(path)
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a JSON array of records, got {type(data).__name__}.")
    return data


def record_problems(record: Any, settings: tuple[str, ...]) -> list[str]:
    """Everything wrong with one record (empty when it is usable)."""
    if not isinstance(record, dict):
        return [f"record is a {type(record).__name__}, not an object"]
    fields = (*_COMMON_FIELDS, *(SETTINGS[s] for s in settings))
    missing = [f for f in fields if not isinstance(record.get(f), (str, int, dict)) or record.get(f) == ""]
    if missing:
        return [f"missing or empty fields {missing}"]
    if not isinstance(record["entry_id"], int) or isinstance(record["entry_id"], bool):
        return [f"entry_id must be an integer, got {record['entry_id']!r}"]
    gold = record["api_call_ground_truth"]
    if not isinstance(gold, dict) or not isinstance(gold.get("tool_name"), str) \
            or not isinstance(gold.get("parameters"), dict):
        return ["api_call_ground_truth must be {\"tool_name\": str, \"parameters\": {...}}"]
    try:
        tools = json.loads(record["apis_candidate"])
    except (TypeError, json.JSONDecodeError) as exc:
        return [f"apis_candidate is not decodable JSON ({exc})"]
    if not isinstance(tools, list) or not all(isinstance(t, dict) and "tool_name" in t for t in tools):
        return ["apis_candidate must be a JSON list of tools with a tool_name each"]
    if gold["tool_name"] not in {t["tool_name"] for t in tools}:
        return [f"gold tool {gold['tool_name']!r} is not among the {len(tools)} candidates"]
    return []


def _rows(source: _Source, records: list[Any]) -> tuple[list[dict], list[str]]:
    rows, problems, seen = [], [], set()
    for index, record in enumerate(records):
        entry = record.get("entry_id") if isinstance(record, dict) else None
        where = f"{source.path.name}: record {index} (entry_id={entry})"
        found = record_problems(record, source.settings)
        if entry in seen:
            found.append(f"duplicate entry_id {entry}")
        seen.add(entry)
        problems += [f"{where}: {p}" for p in found]
        if not found:
            rows += [_row(record, s) for s in source.settings]
    return rows, problems


def _row(record: dict[str, Any], setting: str) -> dict[str, Any]:
    gold, system = record["api_call_ground_truth"], record[SETTINGS[setting]]
    tools = json.loads(record["apis_candidate"])
    return sample_row(setting=setting, entry_id=record["entry_id"], system=system,
                      native_system=native_system(system), user=record["query"], tools=tools,
                      gold_tool=gold["tool_name"], gold_params=gold["parameters"], scorer=SCORER,
                      inputs={"same_func_tools": same_function_tools(record),
                              "candidate_tools": [t["tool_name"] for t in tools],
                              # as the record states them (strings in the file)
                              "history_length": _text(record.get("history_length")),
                              "num_tools_combined": _text(record.get("num_tools_combined"))})


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def same_function_tools(record: dict[str, Any]) -> list[str] | None:
    """The record's same-function tools as candidate names (`<Category>.<Tool>.<API>`); None
    where the record has no `apis_same_func` (the diagnosis then says nothing)."""
    same = record.get("apis_same_func")
    if not isinstance(same, list):
        return None
    return [f"<{a.get('category_name')}>.<{a.get('tool_name')}>.<{a.get('api_name')}>" for a in same
            if isinstance(a, dict)]


def native_system(system: str) -> str:
    """The instruction without its answer-format section, for the native tool-call format."""
    head, found, _ = system.partition(_FORMAT_SECTION)
    return head.rstrip() + _NATIVE_CLOSING if found else system


def load_petoolbench(path: str | Path, settings: Iterable[str], limit: int | None = None) -> pl.DataFrame:
    """The sample table for `settings`, the first `limit` records of each setting."""
    settings = tuple(settings)
    rows, problems = [], []
    for source in resolve_sources(Path(path).expanduser(), settings):
        source_rows, source_problems = _rows(source, read_records(source.path))
        rows += source_rows
        problems += source_problems
    raise_problems(problems, path)
    return sample_table(rows, settings, limit, SCORER)


@dataclass
class PEToolBenchOptions(DatasetConfig):
    """PEToolBench's `dataset.*` options: the history ablations (inference/benchmarks/petoolbench/history.py)."""

    settings: list[str] = field(default_factory=lambda: list(SETTINGS))
    history: str = "full"
    """History ablation: full, none, last_k, shuffled, swap (the counterfactual history)."""
    history_k: int = 5
    """dataset.history=last_k: how many of the most recent items to keep."""
    history_seed: int = 0
    """dataset.history=shuffled / swap: the seed of the orders / of the alternatives (one per record)."""
    drop_ratings: bool = False
    """Remove every history item's `rating` (the `r` setting's signal)."""

    def problems(self) -> list[str]:
        from inference.benchmarks.petoolbench.history import HISTORY_MODES

        found = []
        if self.history not in HISTORY_MODES:
            found.append(f"dataset.history must be one of {list(HISTORY_MODES)}, got {self.history!r}")
        if self.history_k < 0:
            found.append(f"dataset.history_k must be an integer >= 0, got {self.history_k}")
        return found


def ablate_history(table: pl.DataFrame, options: PEToolBenchOptions) -> pl.DataFrame:
    """The samples with their history ablated as `dataset.history` says."""
    from inference.benchmarks.petoolbench.history import ablate_table

    return ablate_table(table, options.history, options.history_k, options.drop_ratings, options.history_seed,
                        options.name)


def _drop_oldest(system: str, count: int) -> str | None:
    from inference.benchmarks.petoolbench.history import drop_oldest

    return drop_oldest(system, count)


BENCHMARK = Benchmark(name="petoolbench", settings=tuple(SETTINGS), load=load_petoolbench, scorer=SCORER,
                      options=PEToolBenchOptions, select=ablate_history, shorten=_drop_oldest,
                      path_hint="user_entries_test.json, or a folder with "
                                "dataset_test/user_entries_test_{p,r,c}.json")
