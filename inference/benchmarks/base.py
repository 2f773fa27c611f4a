"""The benchmark contract: a loader, solvers over model roles, and a scorer.

A benchmark is one module in `inference/benchmarks/` (or a package, or any importable module
named by its dotted path) that defines `BENCHMARK`, a :class:`Benchmark`, plus one YAML under
`conf/dataset/`. Its `load` turns the benchmark's files into the canonical sample table
(`SAMPLE_TABLE_SCHEMA` plus the columns its scorer reads), every row built by `sample_row`;
its `options` class types its `dataset.*` options; its `solvers` run in order over the table,
each generating through one model role (`model`, the evaluated model, or a role it declares in
`roles`, such as a judge). The scorer (a module of `grading/scorers/`) is named on every row, so
grading needs no inference import.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import polars as pl

from grading.canonical import canonical_json
from grading.errors import GradingError
from grading.listing import list_first
from grading.metrics import POOLED
from grading.scoring import get_scorer
from inference.config import BENCHMARK_FORMAT, NATIVE_FORMAT, DatasetConfig  # noqa: F401 (loaders import them here)
from inference.errors import DatasetError
from inference.schemas import function_specs

# The canonical sample table every loader produces, and the prompt stage consumes; a scorer's
# own inputs (JSON text) follow these columns.
SAMPLE_TABLE_SCHEMA: dict[str, pl.DataType] = {
    "sample_id": pl.String,   # "{setting}-{entry_id}", e.g. "r-17666"
    "setting": pl.String,
    "entry_id": pl.Int64,     # the record's number in its benchmark
    "scorer": pl.String,      # the grading.scorers module that grades the row
    "system": pl.String,      # system turn in the benchmark's answer format (instructions, context, tools)
    "user": pl.String,        # user turn: the query
    "native_system": pl.String,  # system turn for the native format (tools go to the chat template); may be null
    "tools": pl.String,       # candidate tools, JSON list in the schema form (inference.schemas)
    "tool_specs": pl.String,  # the same tools as OpenAI-style function specs, for the chat template
    "allow_refusal": pl.Boolean,  # the answer may be {"tool_name": null, "parameters": null}
    "gold_tool": pl.String,   # null: the right answer is to refuse
    "gold_params": pl.String,  # canonical JSON ("null" for a refusal)
}
OPTIONAL_SAMPLE_COLUMNS: dict[str, pl.DataType] = {
    "prior_turns": pl.String,  # JSON [{"role", "content"}]: a chat's turns between the system turn and `user`
    "grammar": pl.String,      # a Lark grammar the benchmark-format answer must match (Benchmark.answer_grammar)
    "answer_regex": pl.String,  # a regex the benchmark-format answer must match, under any decoding.constraint
}
"""Columns a loader may add to any row (sample_row's `inputs`); the table has each that a row has."""
_MAX_LISTED = 40


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: its settings, how to load it, how to solve it and how to score it."""

    name: str
    settings: tuple[str, ...]
    """Setting codes in report order; dataset.settings picks a subset."""
    load: Callable[[Path, tuple[str, ...], int | None], pl.DataFrame]
    """(path, settings, limit) -> the canonical table (rows from `sample_row`, table from
    `sample_table`); raises DatasetError on bad files."""
    path_hint: str
    """What dataset.path should point at, for error messages."""
    scorer: str
    """The grading.scorers module (or dotted module path) that grades its samples."""
    solvers: tuple[str, ...] = ("single_call",)
    """The solvers (modules of inference.solvers, or dotted module paths defining SOLVER) that run
    in order over its sample table, each through its own model role."""
    options: type = DatasetConfig
    """Its `dataset.*` options: a DatasetConfig subclass (an option it lacks is refused)."""
    select: Callable[[pl.DataFrame, Any], pl.DataFrame] | None = None
    """(the loaded table, its options) -> the samples to run, for options beyond settings and
    limit (PEToolBench's history ablations, ETAPP's users and methods)."""
    check: Callable[[Any], list[str]] | None = None
    """(the run's typed config) -> every problem with its data files, the selection, and root
    options it does not read, reported with the config's problems before any model loads."""
    roles: tuple[str, ...] = ()
    """Model roles besides the evaluated model that its solvers use (ETAPP: `judge`); each is
    configured under `roles.<name>` by its YAML."""
    engine_answers: tuple[str, ...] = ("prompts", "samples")
    """The kinds of engine its solvers can use (`EngineConfig.answers`): a model, stored answers
    (replay), scripted agent turns (script)."""
    prompt_format: str = BENCHMARK_FORMAT
    """The format its authors prompted in: `benchmark` (their answer format) or `native`
    (the model's own tool-call format, tools given to the chat template)."""
    max_calls: int = 1
    """Calls one answer may hold in the native format (the grammar allows up to this many)."""
    shard_key: Callable[[pl.DataFrame, Any], pl.Series] | None = None
    """(records, options) -> what keeps samples in one shard under `dataset.shards` (ETAPP: a
    case, or a user's cases under state=sequential); None: the sample id."""
    answer_grammar: bool = False
    """Its benchmark-format answer is not one JSON object but text its `grammar` column describes
    (a Lark grammar per sample, applied under decoding.constraint=xgrammar or guidance)."""
    calls_optional: bool = False
    """Native format: an answer may hold no call (plain text) under a constraint too, where its
    authors' prompt lets the model decline (otherwise a constrained answer holds 1..max_calls)."""
    shorten: Callable[[str, int], str | None] | None = None
    """(system turn, count) -> the system turn with its `count` oldest history items dropped, or
    None where it holds fewer (decoding.drop_oldest_history: a prompt too long for the context is
    shortened this way before it becomes a too_long row). None: its prompts hold nothing to drop."""
    gold: Callable[[dict[str, Any], str, str], str | None] | None = None
    """(sample row, answer format, tool parser) -> the gold answer's text, for `toolsweep gold`,
    where the gold is not the one call of `gold_tool` / `gold_params` (it returns None, or the
    benchmark has no writer: that call)."""
    default_settings: tuple[str, ...] | None = None
    """The settings its config runs when none are named, where not all (BFCL: the AST categories,
    its multi-turn ones asked for by name); `toolsweep gold` takes the same."""
    script_turn: Callable[[dict[str, Any], str], str] | None = None
    """(an engine=script row without `text`, its sample id) -> the model output the row stands for:
    its shorthand rows (ETAPP: `calls` and `answer`, written as the sample's method writes them),
    raising DatasetError for one it cannot write; called with {} for a model call the script has no
    row for. None: every row holds `text`, and a call with no row gets empty text."""


def sample_row(*, setting: str, entry_id: int, system: str, user: str, tools: list[dict[str, Any]],
               gold_tool: str | None, gold_params: Any, scorer: str, allow_refusal: bool = False,
               native_system: str | None = None, tool_specs: list[dict[str, Any]] | None = None,
               inputs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One row of the canonical table; loaders build every row through here. `inputs` are the
    scorer's own columns (stored as JSON text unless already a string)."""
    return {
        "sample_id": f"{setting}-{entry_id}", "setting": setting, "entry_id": entry_id, "scorer": scorer,
        "system": system, "user": user, "native_system": native_system,
        "tools": json.dumps(tools, ensure_ascii=False),
        "tool_specs": json.dumps(tool_specs if tool_specs is not None else function_specs(tools), ensure_ascii=False),
        "allow_refusal": allow_refusal,
        "gold_tool": gold_tool, "gold_params": canonical_json(gold_params),
        **{k: v if isinstance(v, str) or v is None else json.dumps(v, ensure_ascii=False)
           for k, v in (inputs or {}).items()},
    }


def table_schema(scorer: str) -> dict[str, pl.DataType]:
    """The canonical table's columns for a scorer: the common ones, then the scorer's inputs.

    The scorer name is checked here, when the table is built, before any model loads."""
    try:
        found = get_scorer(scorer)
    except GradingError as exc:
        raise DatasetError(str(exc)) from None
    inputs = (*found.inputs, *getattr(found, "optional_inputs", ()))
    return {**SAMPLE_TABLE_SCHEMA, **{c: pl.String for c in inputs if c not in SAMPLE_TABLE_SCHEMA}}


def sample_table(rows: list[dict[str, Any]], settings: Iterable[str], limit: int | None,
                 scorer: str) -> pl.DataFrame:
    """The canonical table: the first `limit` rows of each setting, settings in the given order,
    with the columns `scorer` reads (an error names any its rows lack)."""
    settings = tuple(settings)
    if POOLED in settings:
        raise DatasetError(f"a setting may not be called {POOLED!r}: reports use that name for the pooled row; "
                           "rename the setting in the benchmark's loader")
    rank = {s: i for i, s in enumerate(settings)}
    schema = table_schema(scorer)
    schema.update({c: t for c, t in OPTIONAL_SAMPLE_COLUMNS.items() if c not in schema and any(c in r for r in rows)})
    optional = set(getattr(get_scorer(scorer), "optional_inputs", ())) | set(OPTIONAL_SAMPLE_COLUMNS)
    lacking = sorted({c for r in rows for c in schema if c not in r and c not in optional})
    if lacking:
        raise DatasetError(f"rows lack columns {lacking} that scorer {scorer!r} reads; build them with "
                           "sample_row(..., inputs={...})")
    frame = pl.DataFrame([r for r in rows if r["setting"] in rank], schema=schema)
    frame = frame.with_row_index("_i").sort(
        pl.col("setting").replace_strict(rank, return_dtype=pl.Int32), "_i").drop("_i")
    return frame.filter(pl.int_range(pl.len()).over("setting") < limit) if limit else frame


def raise_problems(problems: list[str], path: Path | str) -> None:
    """One DatasetError listing every bad record (the first 40), or nothing when there are none."""
    if not problems:
        return
    shown = list_first(problems, _MAX_LISTED, "\n  ")
    raise DatasetError(f"{len(problems)} bad record(s) in {path}:\n  {shown}\n"
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
