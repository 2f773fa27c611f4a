"""Grade every sample under every parser: one row in, the same row out with grade columns.

Definitions follow the PEToolBench paper: `tool` is exact, case-sensitive equality of the
tool name; `params` is equality of the whole parameters object with the gold, compared as
decoded Python values (key order ignored, "10" != 10), counted whether or not the tool is
right. `call` (both right) is stricter and not in the paper. A sample whose generation
failed (too long, length, engine error) is wrong under every parser.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from grading.canonical import canonical_json
from grading.parsers import PARSER_FUNCS, PARSERS, ParsedCall

# Columns grading needs from the generation table; inference writes them.
INPUT_COLUMNS = ("sample_id", "setting", "output", "failure", "gold_tool", "gold_params")


_GRADE_FIELDS = {"valid": pl.Boolean, "tool": pl.String, "params": pl.String,
                 "tool_ok": pl.Boolean, "params_ok": pl.Boolean, "call_ok": pl.Boolean}


def grade_schema(parser: str) -> dict[str, pl.DataType]:
    """Names and types of the columns `grade` adds for one parser, in table order."""
    return {f"{parser}_{name}": dtype for name, dtype in _GRADE_FIELDS.items()}


def grade(samples: pl.DataFrame) -> pl.DataFrame:
    """Add, for each parser, the parsed call and its correctness to the sample table."""
    missing = [c for c in INPUT_COLUMNS if c not in samples.columns]
    if missing:
        raise ValueError(f"sample table lacks columns {missing}; it has {samples.columns}. "
                         "Was it written by toolsweep?")
    rows = samples.select(INPUT_COLUMNS).to_dicts()
    graded = {p: [_grade_one(p, r) for r in rows] for p in PARSERS}
    extra = [pl.Series(name, [g[i] for g in graded[p]], dtype=dtype)
             for p in PARSERS
             for i, (name, dtype) in enumerate(grade_schema(p).items())]
    # Re-grading a graded table replaces its grade columns.
    return samples.drop([s.name for s in extra], strict=False).with_columns(extra)



def _grade_one(parser: str, row: dict[str, Any]) -> tuple:
    if row["failure"] is not None:
        return (False, None, None, False, False, False)
    parsed: ParsedCall = PARSER_FUNCS[parser](row["output"])
    if not parsed.ok:
        return (False, None, None, False, False, False)
    tool_ok = parsed.tool_name == row["gold_tool"]
    params_ok = parsed.parameters == json.loads(row["gold_params"])
    tool = parsed.tool_name if isinstance(parsed.tool_name, str) else canonical_json(parsed.tool_name)
    return (True, tool, canonical_json(parsed.parameters), tool_ok, params_ok, tool_ok and params_ok)
