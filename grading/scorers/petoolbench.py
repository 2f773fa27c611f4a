"""PEToolBench's scoring, as the paper's evaluation script does it.

`official`: the script's regex finds the call in the answer, `json.loads` decodes it; the tool
is right when its name equals the gold's exactly (case-sensitive); the parameters are right when
the whole object equals the gold object as decoded Python values (`"10" != 10`, `1 == 1.0`),
counted whether or not the tool is right. `json` reads the answer with the robust parser and
compares the same way. A failed generation (too long, cut off, engine error) is wrong.

Each answer also gets a diagnosis (grading/diagnosis.py): `tool_outcome` (correct,
preference_miss, function_miss, not_a_candidate, unparsed, failed) from the record's
same-function and candidate sets, and for a right tool `param_outcome` (correct, missing_key,
extra_key, wrong_value, type_only) with the keys involved.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from grading.canonical import canonical_json
from grading.diagnosis import FAILED, OUTCOME_COLOURS, TOOL_OUTCOMES, UNPARSED, param_outcome, tool_outcome
from grading.parsers import parse_official
from grading.readings import read_one
from grading.scoring import RowScorer, Slice, bands, mean
from grading.views import AblationAxis, OutcomeView

FIELDS: dict[str, pl.DataType] = {
    "valid": pl.Boolean, "tool": pl.String, "params": pl.String, "tool_ok": pl.Boolean,
    "params_ok": pl.Boolean, "param_score": pl.Float64, "call_ok": pl.Boolean,
    "tool_outcome": pl.String, "param_outcome": pl.String, "param_keys": pl.String,
}
WRONG = {"valid": False, "tool": None, "params": None, "tool_ok": False, "params_ok": False,
         "param_score": 0.0, "call_ok": False, "param_outcome": None, "param_keys": None}
# Written by the loader (inference/benchmarks/petoolbench/); older tables lack them.
LOADER_INPUTS = ("same_func_tools", "candidate_tools", "history_length", "num_tools_combined", "prior_gold_tool")


def gold_category(row: dict[str, Any]) -> str | None:
    """`<Category>.<Tool>.<API>` -> Category."""
    name = row.get("gold_tool")
    return name.split(">.<", 1)[0].lstrip("<") if isinstance(name, str) and name.startswith("<") else None


def gold_position(row: dict[str, Any]) -> str | None:
    """The gold's 1-based position among the candidates as the prompt lists them."""
    candidates = _names(row, "candidate_tools")
    return str(candidates.index(row["gold_tool"]) + 1) if candidates and row["gold_tool"] in candidates else None


HISTORY = ((20, "<=20"), (40, "21-40"), (70, "41-70"))
COMBINED = ((10, "<=10"), (20, "11-20"), (30, "21-30"))
SLICES = (
    Slice("category", gold_category),
    Slice("history_length", lambda row: bands(row.get("history_length"), HISTORY, ">70"),
          ("<=20", "21-40", "41-70", ">70")),
    Slice("num_tools_combined", lambda row: bands(row.get("num_tools_combined"), COMBINED, ">30"),
          ("<=10", "11-20", "21-30", ">30")),
    Slice("gold_position", gold_position, tuple(str(i) for i in range(1, 31))),
)


def grade(reading: str, row: dict[str, Any]) -> dict[str, Any]:
    """The grade fields of one PEToolBench sample under one reading."""
    if row["failure"] is not None:
        return {**WRONG, "tool_outcome": FAILED}
    parsed = read_one(reading, row, parse_official)
    if not parsed.ok:
        return {**WRONG, "tool_outcome": UNPARSED}
    gold = json.loads(row["gold_params"])
    tool_ok = parsed.tool_name == row["gold_tool"]
    params_ok = isinstance(parsed.parameters, dict) and parsed.parameters == gold
    tool = parsed.tool_name if isinstance(parsed.tool_name, str) else canonical_json(parsed.tool_name)
    outcome, keys = param_outcome(parsed.parameters, gold) if tool_ok else (None, None)
    return {"valid": True, "tool": tool, "params": canonical_json(parsed.parameters), "tool_ok": tool_ok,
            "params_ok": params_ok, "param_score": float(params_ok), "call_ok": tool_ok and params_ok,
            "tool_outcome": tool_outcome(parsed.tool_name, row["gold_tool"], _names(row, "same_func_tools"),
                                         _names(row, "candidate_tools"), row.get("prior_gold_tool")),
            "param_outcome": outcome, "param_keys": None if keys is None else json.dumps(keys)}


def _names(row: dict[str, Any], column: str) -> list[str] | None:
    text = row.get(column)
    return None if text is None else json.loads(text)


def history_label(config: dict[str, Any]) -> str | None:
    """A run's history ablation (its resolved config's dataset.history) as a board shows it
    (`full`, `none`, `last_5`, `shuffled`, `swap`, `+no_ratings`); None for runs that predate the option."""
    dataset = config.get("dataset") or {}
    mode = dataset.get("history")
    if mode is None:
        return None
    label = f"last_{dataset.get('history_k')}" if mode == "last_k" else mode
    return label + ("+no_ratings" if dataset.get("drop_ratings") else "")


SCORER = RowScorer(
    name="petoolbench",
    readings=("official", "json"),
    inputs=("gold_tool", "gold_params"),
    fields=FIELDS,
    metrics=(
        mean("tool_acc", "tool_ok", higher_is_better=True, headline=True,
             description="the preferred tool, exact name"),
        mean("param_acc", "param_score", higher_is_better=True, headline=True,
             description="the whole parameter object"),
        mean("call_acc", "call_ok", higher_is_better=True, headline=True,
             description="tool and parameters both right"),
        mean("format_valid", "valid", higher_is_better=True, ci=False, description="answers the reading could parse"),
    ),
    grade=grade,
    optional_inputs=LOADER_INPUTS,
    slices=SLICES,
    outcome_view=OutcomeView("tool_outcome", TOOL_OUTCOMES, OUTCOME_COLOURS),
    # dataset.history=swap keeps the unswapped gold in prior_gold_tool (inference/benchmarks/petoolbench/history.py).
    ablation=AblationAxis("history", "dataset.history", history_label, baseline="full",
                          counterfactual="prior_gold_tool"),
    description="PEToolBench paper: regex reading, exact tool name, whole-object parameters",
)
