"""PEToolBench adapter: benchmark files -> the canonical sample table.

Reads the combined test file (one record holds all three settings) or the published
per-setting layout `dataset_test/user_entries_test_{p,r,c}.json`. Every bad record is
collected and reported in one DatasetError before any model loads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import polars as pl

from grading.canonical import canonical_json
from inference.errors import DatasetError

# setting code -> the record field holding that setting's complete system prompt
SETTINGS: dict[str, str] = {
    "p": "instruction_preferred",
    "r": "instruction_ratings",
    "c": "instruction_chronological",
}
_COMMON_FIELDS = ("entry_id", "query", "apis_candidate", "api_call_ground_truth")
_MAX_LISTED = 40

# The canonical sample table every adapter produces, and the prompt stage consumes.
SAMPLE_TABLE_SCHEMA: dict[str, pl.DataType] = {
    "sample_id": pl.String,   # "{setting}-{entry_id}", e.g. "r-17666"
    "setting": pl.String,
    "entry_id": pl.Int64,
    "system": pl.String,      # the setting's instruction: history + candidate tools + format
    "user": pl.String,        # the query
    "tools": pl.String,       # candidate tools as a JSON list (the record's apis_candidate)
    "gold_tool": pl.String,
    "gold_params": pl.String,  # canonical JSON
}


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
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 (byte {exc.start}: {exc.object[exc.start:exc.start + 4]!r}); "
                           "re-save the file as UTF-8.") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: malformed JSON at line {exc.lineno} column {exc.colno}: "
                           f"{exc.msg}.") from None
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a JSON array of records, got {type(data).__name__}.")
    if not data:
        raise DatasetError(f"{path}: the file holds no records.")
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


def _rows(source: _Source, records: list[Any], limit: int | None) -> tuple[list[dict], list[str]]:
    rows, problems, seen = [], [], set()
    for index, record in enumerate(records):
        entry = record.get("entry_id") if isinstance(record, dict) else None
        where = f"{source.path.name}: record {index} (entry_id={entry})"
        found = record_problems(record, source.settings)
        if entry in seen:
            found.append(f"duplicate entry_id {entry}")
        seen.add(entry)
        problems += [f"{where}: {p}" for p in found]
        if found:
            continue
        rows += [_row(record, s) for s in source.settings]
    if limit is not None:
        rows = [r for s in source.settings for r in [x for x in rows if x["setting"] == s][:limit]]
    return rows, problems


def _row(record: dict[str, Any], setting: str) -> dict[str, Any]:
    gold = record["api_call_ground_truth"]
    return {
        "sample_id": f"{setting}-{record['entry_id']}",
        "setting": setting,
        "entry_id": record["entry_id"],
        "system": record[SETTINGS[setting]],
        "user": record["query"],
        "tools": record["apis_candidate"],
        "gold_tool": gold["tool_name"],
        "gold_params": canonical_json(gold["parameters"]),
    }


def load_petoolbench(path: str | Path, settings: Iterable[str], limit: int | None = None) -> pl.DataFrame:
    """The sample table for `settings`, the first `limit` records of each setting."""
    rows, problems = [], []
    for source in resolve_sources(Path(path).expanduser(), settings):
        source_rows, source_problems = _rows(source, read_records(source.path), limit)
        rows += source_rows
        problems += source_problems
    if problems:
        shown = "\n  ".join(problems[:_MAX_LISTED])
        more = f"\n  ... and {len(problems) - _MAX_LISTED} more" if len(problems) > _MAX_LISTED else ""
        raise DatasetError(f"{len(problems)} bad record(s) in {path}:\n  {shown}{more}\n"
                           "Fix or remove these records; nothing was run.")
    return order_by_setting(pl.DataFrame(rows, schema=SAMPLE_TABLE_SCHEMA), settings)


def order_by_setting(frame: pl.DataFrame, settings: Iterable[str]) -> pl.DataFrame:
    """Rows grouped by setting in the configured order, file order kept within a setting."""
    rank = {s: i for i, s in enumerate(settings)}
    return frame.with_row_index("_i").sort(
        pl.col("setting").replace_strict(rank, return_dtype=pl.Int32), "_i").drop("_i")
