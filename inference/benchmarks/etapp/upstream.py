"""Trajectories made elsewhere: upstream ETAPP's saved `<User>_instruction.json` files, replayed
into toolsweep's trajectories so its judge can score them (`dataset.upstream=FOLDER`).

A file is the instruction list of one user, each entry with `output` (the messages:
system, user, then the history in upstream's format) and `tools`. The files do not say which
setting and method made them, so an import run names exactly one of each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .agent import FINISH, Episode


def upstream_file(folder: Path, user: str) -> Path:
    return folder / f"{user}_instruction.json"


def read_upstream(folder: Path, users: list[str], instructions: list[int]) -> tuple[dict[str, list[Any]], list[str]]:
    """{user: its entries} and every problem (missing file, bad JSON, entries without `output`)."""
    found, problems = {}, []
    for user in users:
        path = upstream_file(folder, user)
        if not path.is_file():
            problems.append(f"dataset.upstream: missing {path}")
            continue
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            problems.append(f"dataset.upstream: {path} is not valid JSON ({exc}); re-export it from upstream")
            continue
        problems += entry_problems(path, entries, instructions)
        found[user] = entries
    return found, problems


def entry_problems(path: Path, entries: Any, instructions: list[int]) -> list[str]:
    if not isinstance(entries, list):
        return [f"dataset.upstream: {path} must hold a list of instruction entries, got {type(entries).__name__}"]
    problems = []
    for number in instructions:
        entry = entries[number] if number < len(entries) else None
        messages = entry.get("output") if isinstance(entry, dict) else None
        if not isinstance(messages, list) or len(messages) < 2 or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
            problems.append(f"dataset.upstream: {path} entry {number} has no `output` list of messages "
                            "({role, content, tool_calls?}) starting with system and user")
    return problems


def imported_episode(slot: Any, messages: list[dict[str, Any]]) -> Episode:
    """An episode rebuilt from upstream's record (`slot`: the sample's episodes.Slot): counts and
    end reason as the loop would give."""
    episode = Episode(sample_id=slot.sample_id, case=slot.case, setting=slot.setting, method=slot.method,
                      sandbox=None, chat=[], tools=None, sample_index=slot.sample_index)
    for message in messages:
        kept = {"role": message["role"], "content": str(message.get("content") or "")}
        if "tool_calls" in message and message["role"] == "assistant":
            kept["tool_calls"] = _calls(message["tool_calls"])
        _count(episode, kept)
        episode.add(kept, **_tool_row(kept))
    episode.end_reason = episode.end_reason or _end_of(messages)
    return episode


def _calls(value: Any) -> list[dict[str, Any]]:
    calls = value if isinstance(value, list) else [value] if isinstance(value, dict) else []
    return [{"name": str(c.get("name")), "arguments": c.get("arguments")} for c in calls if isinstance(c, dict)]


def _count(episode: Episode, message: dict[str, Any]) -> None:
    if message["role"] == "assistant":
        episode.turn += 1
        for call in message.get("tool_calls") or []:
            if call["name"] == "finish":
                episode.answer, episode.end_reason = str(call["arguments"]), FINISH
            else:
                episode.calls += 1
                episode.called.append(call["name"])
    elif message["role"] == "tool":
        episode.valid_calls += 1


def _tool_row(message: dict[str, Any]) -> dict[str, Any]:
    return {"observation": message["content"]} if message["role"] == "tool" else {}


def _end_of(messages: list[dict[str, Any]]) -> str:
    last = str(messages[-1].get("content") or "") if messages else ""
    if "too many times" in last:
        return "turn_cap"
    if "superabundant" in last:
        return "too_many_calls"
    if "specified token" in last:
        return "too_long"
    return "imported"
