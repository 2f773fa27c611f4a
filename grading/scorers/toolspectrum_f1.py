"""ToolSpectrum's scoring, reconstructed from its paper's Table 3 ("different levels of F1").

The benchmark publishes no scoring code. Table 3's pattern fixes the definition: per setting,
F1 at each level, pooled over the setting's samples:

- `app_f1` (the app), `api_f1` (the API by name only: some models score API above APP, and 8
  API names repeat across apps) and `app_api_f1` (the full `APP.API`). A predicted call is a
  true positive when it matches the gold call at that level, else a false positive and (if the
  gold is a call) a false negative;
- `required_f1`, `personalized_f1`, `environmental_f1` over (argument, value) pairs of that
  group, not gated on the app being right (some models score an argument level above APP).

A correct refusal is neither a true nor a false positive; a call where the gold refuses is a
false positive; a refusal or an unparsable answer where the gold is a call is a missing
prediction (false negatives only). F1 is 0 when there is no true positive. Values compare
type-sensitively except that the strings "True"/"False" equal the booleans (606 gold values
of the environment set are such strings); string case is kept.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Mapping

import polars as pl

from grading.canonical import canonical_json
from grading.parsers import ParsedCall, parse_whole_json
from grading.readings import is_native, native_calls, read_one
from grading.scoring import RowScorer, Slice, f1, mean, ratio

CALL_LEVELS = ("app", "api", "app_api")
ARG_GROUPS = ("required", "personalized", "environmental")
LEVELS = (*CALL_LEVELS, *ARG_GROUPS)
FIELDS: dict[str, pl.DataType] = {
    "valid": pl.Boolean, "tool": pl.String, "params": pl.String, "refused": pl.Boolean,
    "should_refuse": pl.Boolean, "refusal_correct": pl.Boolean,
    **{f"{level}_{kind}": pl.Int64 for level in LEVELS for kind in ("tp", "fp", "fn")},
}


@lru_cache(maxsize=64)
def _toolset(text: str) -> dict[str, Any]:
    # One toolset JSON repeats on every row of a setting: decode it once.
    return json.loads(text)


def typed(value: Any) -> Any:
    """A type-sensitive form for `==`: booleans tagged (True != 1), numbers by value (5 == 5.0),
    the strings "True"/"False" as the booleans they stand for."""
    if isinstance(value, bool) or value in ("True", "False"):
        return ("bool", value is True or value == "True")
    if isinstance(value, (int, float)):
        return ("number", float(value))
    if isinstance(value, dict):
        return ("object", {k: typed(v) for k, v in value.items()})
    if isinstance(value, list):
        return ("array", [typed(v) for v in value])
    return ("other", value)


def split_tool(name: Any, toolset: Mapping[str, Any]) -> tuple[Any, Any]:
    """(app, api) of a tool name: from the toolset, else split at the first dot."""
    if not isinstance(name, str):
        return None, None
    if name in toolset:
        return toolset[name]["app"], toolset[name]["api"]
    app, _, api = name.partition(".")
    return app, api or None


def argument_pairs(tool: Any, params: Any, toolset: Mapping[str, Any], fallback: Any) -> dict[str, dict]:
    """{group: {argument: value}} of a call; an argument's group is its tool's (else the gold
    tool's, for a tool the toolset lacks); arguments of no known group are not scored."""
    pairs: dict[str, dict] = {g: {} for g in ARG_GROUPS}
    if not isinstance(params, dict):
        return pairs
    own = (toolset.get(tool) or {}).get("groups", {}) if isinstance(tool, str) else {}
    other = (toolset.get(fallback) or {}).get("groups", {}) if isinstance(fallback, str) else {}
    for key, value in params.items():
        group = own.get(key) or other.get(key)
        if group in pairs:
            pairs[group][key] = value
    return pairs


def _counts(pred: dict, gold: dict) -> tuple[int, int, int]:
    tp = sum(1 for k, v in pred.items() if k in gold and typed(v) == typed(gold[k]))
    return tp, len(pred) - tp, len(gold) - tp


def level_counts(call: ParsedCall | None, gold_tool: str | None, gold_params: Any,
                 toolset: Mapping[str, Any]) -> dict[str, int]:
    """TP/FP/FN of one sample at every level; `call` None means no call (refused or unparsable)."""
    out = {f"{level}_{kind}": 0 for level in LEVELS for kind in ("tp", "fp", "fn")}
    gold_app, gold_api = split_tool(gold_tool, toolset)
    if call is not None:
        app, api = split_tool(call.tool_name, toolset)
        for level, hit in (("app", app == gold_app), ("api", api == gold_api),
                           ("app_api", call.tool_name == gold_tool)):
            right = gold_tool is not None and hit
            out[f"{level}_tp"], out[f"{level}_fp"] = int(right), int(not right)
            out[f"{level}_fn"] = int(gold_tool is not None and not right)
    elif gold_tool is not None:
        for level in CALL_LEVELS:
            out[f"{level}_fn"] = 1
    pred_pairs = argument_pairs(call.tool_name, call.parameters, toolset, gold_tool) if call else {}
    gold_pairs = argument_pairs(gold_tool, gold_params, toolset, None)
    for group in ARG_GROUPS:
        tp, fp, fn = _counts(pred_pairs.get(group, {}), gold_pairs[group])
        out.update({f"{group}_tp": tp, f"{group}_fp": fp, f"{group}_fn": fn})
    return out


def _reading(reading: str, row: dict[str, Any]) -> tuple[bool, ParsedCall | None, bool]:
    """(answer read, the call or None, refused)."""
    if row["failure"] is not None:
        return False, None, False
    if is_native(row) and reading == "official" and not native_calls(row):
        return True, None, True  # a native answer without a tool call declines to call
    parsed = read_one(reading, row, parse_whole_json)
    if not parsed.ok:
        return False, None, False
    if parsed.tool_name is None:
        return True, None, True
    return True, parsed, False


def grade(reading: str, row: dict[str, Any]) -> dict[str, Any]:
    """The grade fields of one ToolSpectrum sample under one reading."""
    toolset = _toolset(row["toolset"])
    gold_tool, gold_params = row["gold_tool"], json.loads(row["gold_params"])
    valid, call, refused = _reading(reading, row)
    should = gold_tool is None
    tool = None if call is None else (call.tool_name if isinstance(call.tool_name, str)
                                      else canonical_json(call.tool_name))
    return {"valid": valid, "tool": tool, "params": None if call is None else canonical_json(call.parameters),
            "refused": refused, "should_refuse": should, "refusal_correct": refused and should,
            **level_counts(call, gold_tool, gold_params, toolset)}


SLICES = (
    Slice("gold", lambda row: "refusal" if row.get("gold_tool") is None else "call", ("call", "refusal")),
    Slice("app", lambda row: row["gold_tool"].split(".", 1)[0] if row.get("gold_tool") else None),
)

SCORER = RowScorer(
    slices=SLICES,
    name="toolspectrum_f1",
    readings=("official", "json"),
    inputs=("gold_tool", "gold_params", "toolset"),
    fields=FIELDS,
    metrics=(
        f1("app_f1", "app", headline=True, description="the app"),
        f1("api_f1", "api", headline=True, description="the API, by name only (as Table 3)"),
        f1("app_api_f1", "app_api", headline=True, description="the full APP.API"),
        f1("required_f1", "required", description="required (argument, value) pairs"),
        f1("personalized_f1", "personalized", description="personalized (argument, value) pairs"),
        f1("environmental_f1", "environmental", description="environmental (argument, value) pairs"),
        mean("format_valid", "valid", higher_is_better=True, ci=False, description="answers the reading could read"),
        ratio("refusal_precision", "refusal_correct", "refused", higher_is_better=True,
              description="refusals that were right"),
        ratio("refusal_recall", "refusal_correct", "should_refuse", higher_is_better=True,
              description="gold refusals found"),
    ),
    grade=grade,
    description="ToolSpectrum Table 3 F1 levels (toolsweep's reconstruction; no upstream code)",
)
