"""FamilyTool's scoring: UnifiedToolHub's single-round metric, as FamilyTool's pipeline runs it
(the copy bundled in FamilyTool's repository, `test_mode="single_last"`).

Per sample, with the gold calls and the predicted calls (each `name` + arguments):

- names and top-level argument keys are whitespace-stripped (values are not);
- ToolAccuracy (`tool_acc`): the share of distinct gold names found among the predicted names;
  calls to other tools cost nothing;
- each gold key compares as `json.dumps(pred.get(key)) == json.dumps(gold_value)` with Python's
  defaults: type-sensitive (`120 != 120.0 != "120"`, `true != 1`), nested key order as the gold
  is written, a missing key reads as null (so it matches a gold null), extra keys ignored;
- several predicted calls share the gold's name: they are sorted by their key-sorted JSON and
  only the first is compared (the bundled copy; later UnifiedToolHub versions pick the best);
- ExactMatch (`call_acc`): every gold call's name found and all its keys matched;
- ParameterAccuracy (`param_acc`): matched gold keys over compared gold keys, 0 when the tool is
  wrong and also 0 when the gold parameters are `{}` (0/0).

Every metric averages over all samples: no call or an unreadable answer scores 0. One
deviation: predicted arguments that are not an object crash upstream's evaluation; here they
compare as an empty object, so every gold key is unmatched (unless its gold value is null).
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from grading.canonical import canonical_json
from grading.parsers import ParsedCall, parse_json, parse_whole_json
from grading.readings import is_native, native_calls, robust_native_calls
from grading.scoring import RowScorer, Slice, mean

FIELDS: dict[str, pl.DataType] = {
    "valid": pl.Boolean, "tool": pl.String, "params": pl.String, "n_calls": pl.Int64,
    "tool_score": pl.Float64, "exact": pl.Boolean, "exact_per_tool": pl.Float64, "param_score": pl.Float64,
}


def _stripped_keys(arguments: Any) -> Any:
    # Strict mode: only top-level keys are stripped (a later key wins a collision); a string
    # argument is stripped whole; anything else is kept as it is.
    if isinstance(arguments, dict):
        return {str(k).strip(): v for k, v in arguments.items()}
    return arguments.strip() if isinstance(arguments, str) else arguments


def by_name(calls: list[tuple[Any, Any]]) -> dict[str, list[Any]]:
    """{stripped name: [arguments, ...]} of the calls whose name is a string."""
    grouped: dict[str, list[Any]] = {}
    for name, arguments in calls:
        if isinstance(name, str):
            grouped.setdefault(name.strip(), []).append(_stripped_keys(arguments))
    return grouped


def _sort_key(arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True)


def compare(gold: dict[str, Any], pred: Any) -> tuple[int, int, bool]:
    """(matched gold keys, gold keys, all matched) of one predicted argument object."""
    pred = pred if isinstance(pred, dict) else {}
    matched = sum(1 for k, v in gold.items() if json.dumps(pred.get(k)) == json.dumps(v))
    return matched, len(gold), matched == len(gold)


def single_round(gold_calls: list[tuple[str, dict]], pred_calls: list[tuple[Any, Any]]) -> dict[str, Any]:
    """ExactMatch (all tools and per tool), ToolAccuracy and ParameterAccuracy of one sample."""
    gold, pred = by_name(gold_calls), by_name(pred_calls)
    if not gold:
        hit = float(not pred)
        return {"exact": bool(hit), "exact_per_tool": hit, "tool_score": hit, "param_score": hit}
    names = matched = total = exact = 0
    for name, gold_args in gold.items():
        if name not in pred:
            continue
        names += 1
        ok = True
        for g, o in zip(sorted(gold_args, key=_sort_key), sorted(pred[name], key=_sort_key)):
            hit, count, ok = compare(g, o)
            matched, total = matched + hit, total + count
        exact += int(ok)  # upstream adds the last pair's flag, once per name
    per_tool = exact / len(gold_calls)
    return {"exact": per_tool == 1, "exact_per_tool": per_tool, "tool_score": names / len(gold),
            "param_score": matched / total if total else 0.0}


def predicted_calls(reading: str, row: dict[str, Any]) -> list[ParsedCall]:
    """The calls of an answer: `official` is the family parser (native) or the whole answer as
    one call (benchmark format); `json` the robust reading of either."""
    if row["failure"] is not None:
        return []
    if is_native(row):
        return native_calls(row) if reading == "official" else robust_native_calls(row["output"])
    parsed = (parse_whole_json if reading == "official" else parse_json)(row["output"])
    return [parsed] if parsed.ok else []


def grade(reading: str, row: dict[str, Any]) -> dict[str, Any]:
    """The grade fields of one FamilyTool sample under one reading."""
    calls = predicted_calls(reading, row)
    gold = [(c["name"], c["parameters"]) for c in json.loads(row["gold_calls"])]
    scores = single_round(gold, [(c.tool_name, c.parameters) for c in calls])
    first = calls[0] if calls else None
    return {"valid": bool(calls), "n_calls": len(calls),
            "tool": None if first is None else (first.tool_name if isinstance(first.tool_name, str)
                                                else canonical_json(first.tool_name)),
            "params": None if first is None else canonical_json(first.parameters), **scores}


SCORER = RowScorer(
    # FamilyTool's settings are a family set (b, e) with or without retrieval
    slices=(Slice("family_set", lambda row: str(row.get("setting", "")).split("_", 1)[0] or None, ("b", "e")),),
    name="unifiedtoolhub",
    readings=("official", "json"),
    inputs=("gold_calls",),
    fields=FIELDS,
    metrics=(
        mean("tool_acc", "tool_score", higher_is_better=True, headline=True,
             description="ToolAccuracy: the gold tool among the calls"),
        mean("param_acc", "param_score", higher_is_better=True, headline=True,
             description="ParameterAccuracy: matched share of gold keys (0 if the tool is wrong or gold is {})"),
        mean("call_acc", "exact", higher_is_better=True, headline=True,
             description="ExactMatch: tool and every gold key"),
        mean("format_valid", "valid", higher_is_better=True, ci=False,
             description="answers with at least one readable call"),
    ),
    grade=grade,
    description="UnifiedToolHub single-round metric as bundled with FamilyTool",
)
