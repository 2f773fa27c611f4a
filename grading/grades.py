"""Grade every sample under every parser: one row in, the same row out with grade columns.

How a call compares with the gold is declared per sample by its benchmark's adapter, as
rule columns (see grading.rules); grading applies them and knows no benchmark by name.
PEToolBench's rules give the paper's definitions: `tool` is exact, case-sensitive equality
of the tool name; `params` is equality of the whole parameters object with the gold,
compared as decoded Python values, counted whether or not the tool is right. A gold tool of
null means the right answer is to refuse (`{"tool_name": null, ...}`). A sample whose
generation failed (too long, length, engine error) is wrong under every parser.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import polars as pl

from grading.canonical import canonical_json
from grading.parsers import PARSERS, parse
from grading.rules import ARG_GROUPS, DEFAULT_RULES, RULE_COLUMNS, Rules, group_scores, name_of, params_grade

# Columns grading needs from the generation table; inference writes them.
INPUT_COLUMNS = ("sample_id", "setting", "output", "failure", "gold_tool", "gold_params")
# Declared per sample by the adapter; a table without them is graded with DEFAULT_RULES.
OPTIONAL_COLUMNS = (*RULE_COLUMNS, "tool_apps", "param_groups")

_GRADE_FIELDS: dict[str, pl.DataType] = {
    "valid": pl.Boolean, "tool": pl.String, "params": pl.String,
    "tool_ok": pl.Boolean, "params_ok": pl.Boolean, "param_score": pl.Float64, "call_ok": pl.Boolean,
    "refused": pl.Boolean, "app_ok": pl.Boolean,
    **{f"{group}_arg": pl.Float64 for group in ARG_GROUPS},
}


def grade_schema(parser: str) -> dict[str, pl.DataType]:
    """Names and types of the columns `grade` adds for one parser, in table order."""
    return {f"{parser}_{name}": dtype for name, dtype in _GRADE_FIELDS.items()}


def grade(samples: pl.DataFrame) -> pl.DataFrame:
    """Add, for each parser, the parsed call and its correctness to the sample table."""
    missing = [c for c in INPUT_COLUMNS if c not in samples.columns]
    if missing:
        raise ValueError(f"sample table lacks columns {missing}; it has {samples.columns}. "
                         "Was it written by toolsweep?")
    samples = _with_declarations(samples)
    rows = samples.select(*INPUT_COLUMNS, *OPTIONAL_COLUMNS).to_dicts()
    extra = []
    for parser in PARSERS:
        graded = [grade_one(parser, r) for r in rows]
        extra += [pl.Series(name, [g[field] for g in graded], dtype=dtype)
                  for (name, dtype), field in zip(grade_schema(parser).items(), _GRADE_FIELDS)]
    # Re-grading a graded table replaces its grade columns.
    return samples.drop([s.name for s in extra], strict=False).with_columns(extra)


def _with_declarations(samples: pl.DataFrame) -> pl.DataFrame:
    defaults = {**{c: getattr(DEFAULT_RULES, c) for c in RULE_COLUMNS}, "tool_apps": None, "param_groups": None}
    absent = [pl.lit(v, dtype=pl.String).alias(c) for c, v in defaults.items() if c not in samples.columns]
    return samples.with_columns(absent) if absent else samples


@lru_cache(maxsize=256)
def _declared(text: str | None) -> Any:
    # tool_apps repeats one {tool: app} map on every row of a setting: decode it once.
    return json.loads(text) if text else None


def _wrong(gold_params: Any, groups: Any, rules: Rules, app_scored: bool) -> dict[str, Any]:
    """The grades of an answer that is no call: wrong on every metric the sample has."""
    return {"valid": False, "tool": None, "params": None, "tool_ok": False, "params_ok": False,
            "param_score": 0.0, "call_ok": False, "refused": False, "app_ok": False if app_scored else None,
            **{f"{g}_arg": s for g, s in group_scores({}, gold_params, groups, False, rules).items()}}


def grade_one(parser: str, row: dict[str, Any]) -> dict[str, Any]:
    """The grade fields of one sample row under one parser."""
    rules = Rules(*(row[c] or getattr(DEFAULT_RULES, c) for c in RULE_COLUMNS))
    gold_tool, gold_params = row["gold_tool"], json.loads(row["gold_params"])
    apps, groups = _declared(row["tool_apps"]), _declared(row["param_groups"])
    out = _wrong(gold_params, groups, rules, app_scored=gold_tool is not None and apps is not None)
    if row["failure"] is not None:
        return out
    parsed = parse(parser, rules.official_parser, row["output"])
    if not parsed.ok:
        return out
    refused = parsed.tool_name is None
    if gold_tool is None:
        return {**out, "valid": True, "refused": refused, "tool_ok": refused, "params_ok": refused,
                "param_score": float(refused), "call_ok": refused, "params": canonical_json(parsed.parameters)}
    tool_ok = not refused and name_of(parsed.tool_name, rules.name_rule) == name_of(gold_tool, rules.name_rule)
    params_ok, score = params_grade(parsed.parameters, gold_params, tool_ok, rules)
    tool = parsed.tool_name if isinstance(parsed.tool_name, str) else canonical_json(parsed.tool_name)
    out.update(valid=True, tool=tool, params=canonical_json(parsed.parameters), tool_ok=tool_ok,
               params_ok=params_ok, param_score=score, call_ok=tool_ok and params_ok, refused=refused)
    if apps is not None:
        out["app_ok"] = not refused and isinstance(parsed.tool_name, str) and \
            apps.get(parsed.tool_name) is not None and apps.get(parsed.tool_name) == apps.get(gold_tool)
    out.update({f"{g}_arg": s for g, s in group_scores(parsed.parameters, gold_params, groups,
                                                         tool_ok, rules).items()})
    return out
