"""The benchmark adapter contract, and the registry of adapters.

A benchmark is one module in `inference/` plus one YAML under `conf/dataset/`. The module
gives an :class:`Adapter`: its settings and a `load` function that turns the benchmark's
files into the canonical sample table (`SAMPLE_TABLE_SCHEMA`). Every row, built by
`sample_row`, carries the comparison rules the benchmark's official scoring uses
(`grading.rules.Rules`) as columns, so grading applies them without importing any adapter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import polars as pl

from grading.canonical import canonical_json
from grading.rules import RULE_COLUMNS, Rules
from inference.errors import DatasetError

# The canonical sample table every adapter produces, and the prompt stage consumes.
SAMPLE_TABLE_SCHEMA: dict[str, pl.DataType] = {
    "sample_id": pl.String,   # "{setting}-{entry_id}", e.g. "r-17666"
    "setting": pl.String,
    "entry_id": pl.Int64,     # the record's number in its benchmark
    "system": pl.String,      # system turn: instructions, context (history, profile, graph), tools
    "user": pl.String,        # user turn: the query
    "tools": pl.String,       # candidate tools, JSON list in the schema form (inference.schemas)
    "allow_refusal": pl.Boolean,  # the answer may be {"tool_name": null, "parameters": null}
    "gold_tool": pl.String,   # null: the right answer is to refuse
    "gold_params": pl.String,  # canonical JSON ("null" for a refusal)
    **{c: pl.String for c in RULE_COLUMNS},
    "tool_apps": pl.String,   # JSON {tool_name: app} where the benchmark scores the app; else null
    "param_groups": pl.String,  # JSON {gold parameter: argument group}; else null
}
_MAX_LISTED = 40


@dataclass(frozen=True)
class Adapter:
    """One benchmark: its settings and how to load it (the rows carry how calls are compared)."""

    name: str
    settings: tuple[str, ...]
    """Setting codes in report order; dataset.settings picks a subset."""
    load: Callable[[Path, tuple[str, ...], int | None], pl.DataFrame]
    """(path, settings, limit) -> the canonical table, its rows built by `sample_row` with the
    benchmark's comparison rules; raises DatasetError on bad files."""
    path_hint: str
    """What dataset.path should point at, for error messages."""


def sample_row(*, setting: str, entry_id: int, system: str, user: str, tools: list[dict[str, Any]],
               gold_tool: str | None, gold_params: Any, rules: Rules, allow_refusal: bool = False,
               tool_apps: Mapping[str, str] | None = None,
               param_groups: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One row of the canonical table; adapters build every row through here."""
    return {
        "sample_id": f"{setting}-{entry_id}", "setting": setting, "entry_id": entry_id,
        "system": system, "user": user,
        "tools": json.dumps(tools, ensure_ascii=False),
        "allow_refusal": allow_refusal,
        "gold_tool": gold_tool, "gold_params": canonical_json(gold_params),
        **{c: getattr(rules, c) for c in RULE_COLUMNS},
        "tool_apps": canonical_json(dict(tool_apps)) if tool_apps else None,
        "param_groups": canonical_json(dict(param_groups)) if param_groups else None,
    }


def sample_table(rows: list[dict[str, Any]], settings: Iterable[str], limit: int | None) -> pl.DataFrame:
    """The canonical table: the first `limit` rows of each setting, settings in the given order."""
    settings = tuple(settings)
    rank = {s: i for i, s in enumerate(settings)}
    frame = pl.DataFrame([r for r in rows if r["setting"] in rank], schema=SAMPLE_TABLE_SCHEMA)
    frame = frame.with_row_index("_i").sort(
        pl.col("setting").replace_strict(rank, return_dtype=pl.Int32), "_i").drop("_i")
    return frame.filter(pl.int_range(pl.len()).over("setting") < limit) if limit else frame


def raise_problems(problems: list[str], path: Path | str) -> None:
    """One DatasetError listing every bad record (the first 40), or nothing when there are none."""
    if not problems:
        return
    shown = "\n  ".join(problems[:_MAX_LISTED])
    more = f"\n  ... and {len(problems) - _MAX_LISTED} more" if len(problems) > _MAX_LISTED else ""
    raise DatasetError(f"{len(problems)} bad record(s) in {path}:\n  {shown}{more}\n"
                       "Fix or remove these records; nothing was run.")


def read_json(path: Path) -> Any:
    """The JSON value in `path`, or a DatasetError naming the file and what is wrong."""
    return _decode(path, json.loads)


def read_jsonl(path: Path) -> list[Any]:
    """One JSON value per non-empty line of `path`, or a DatasetError naming the line."""
    def lines(text: str) -> list[Any]:
        values = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    values.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"{path}: malformed JSON on line {number} column {exc.colno}: "
                                       f"{exc.msg}.") from None
        return values
    return _decode(path, lines)


def _decode(path: Path, parse: Callable[[str], Any]) -> Any:
    if not path.is_file():
        raise DatasetError(f"{path} does not exist or is not a file.")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 (byte {exc.start}: {exc.object[exc.start:exc.start + 4]!r}); "
                           "re-save the file as UTF-8.") from None
    try:
        value = parse(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: malformed JSON at line {exc.lineno} column {exc.colno}: "
                           f"{exc.msg}.") from None
    if value in ([], {}, None):
        raise DatasetError(f"{path}: the file holds no records.")
    return value


def adapters() -> dict[str, Adapter]:
    """Every registered benchmark by name (dataset.name)."""
    from inference.familytool import ADAPTER as familytool
    from inference.petoolbench import ADAPTER as petoolbench
    from inference.toolspectrum import ADAPTER as toolspectrum

    return {a.name: a for a in (petoolbench, familytool, toolspectrum)}


def get_adapter(name: str) -> Adapter:
    """The adapter called `name`, or a DatasetError listing the known ones."""
    known = adapters()
    if name not in known:
        raise DatasetError(f"dataset.name must be one of {sorted(known)}, got {name!r}")
    return known[name]


def load_dataset(name: str, path: str | Path, settings: Iterable[str], limit: int | None = None) -> pl.DataFrame:
    """The canonical sample table of benchmark `name` for `settings`, `limit` records each."""
    adapter = get_adapter(name)
    return adapter.load(Path(path).expanduser(), tuple(settings), limit)
