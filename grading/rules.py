"""How a predicted call is compared with the gold: the rules a benchmark adapter declares.

Every sample row carries its benchmark's rules as plain columns (`official_parser`,
`name_rule`, `value_rule`, `params_rule`, and optionally `tool_apps` and `param_groups`).
Grading reads them from the row; it knows rule names, never benchmark names. Each rule is
named by what it does, so a new benchmark picks from these or adds one here with a test.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

# official_parser: how the benchmark's own scoring reads an answer (see grading.parsers).
OFFICIAL_PARSERS = ("tool_name_regex", "whole_json")
# name_rule: how tool names and parameter keys compare.
NAME_RULES = ("exact", "strip")
# value_rule: how one parameter value compares with the gold value.
#   exact        decoded values with Python `==` ("10" != 10, but 1 == 1.0 == True)
#   json_dumps   `json.dumps(pred) == json.dumps(gold)`: type-sensitive (1 != 1.0 != True)
#   bool_strings the strings "True"/"False" equal the booleans; otherwise type-sensitive
VALUE_RULES = ("exact", "json_dumps", "bool_strings")
# params_rule: what "the parameters are right" means.
#   whole      the parameter object equals the gold object (same keys), judged even when the
#              tool is wrong; the sample's parameter score is 1 or 0
#   gold_keys  every gold key is matched, extra keys ignored; the score is the matched
#              fraction of gold keys, and 0 when the tool is wrong
PARAMS_RULES = ("whole", "gold_keys")
# param_groups names: the argument groups a benchmark may declare for per-group accuracy.
ARG_GROUPS = ("required", "personalized", "environmental")

RULE_COLUMNS = ("official_parser", "name_rule", "value_rule", "params_rule")


@dataclass(frozen=True)
class Rules:
    """The comparison rules of one sample."""

    official_parser: str = "tool_name_regex"
    name_rule: str = "exact"
    value_rule: str = "exact"
    params_rule: str = "whole"


# Sample tables written before the rules became columns were PEToolBench runs, whose rules
# are the defaults: re-grading them gives the same numbers as before.
DEFAULT_RULES = Rules()


def name_of(value: Any, rule: str) -> Any:
    """A tool name or parameter key as the rule compares it."""
    return value.strip() if rule == "strip" and isinstance(value, str) else value


def values_equal(pred: Any, gold: Any, rule: str) -> bool:
    """Whether one predicted value equals the gold value under `rule`."""
    if rule == "json_dumps":
        return json.dumps(pred) == json.dumps(gold)
    if rule == "bool_strings":
        return _typed(pred) == _typed(gold)
    return pred == gold


def _typed(value: Any) -> Any:
    # Type-sensitive form for `==`: bools are tagged so True != 1, numbers compare by value
    # (5 == 5.0), and the strings "True"/"False" become the booleans they stand for.
    if isinstance(value, bool) or value in ("True", "False"):
        return ("bool", value is True or value == "True")
    if isinstance(value, (int, float)):
        return ("number", float(value))
    if isinstance(value, dict):
        return ("object", {k: _typed(v) for k, v in value.items()})
    if isinstance(value, list):
        return ("array", [_typed(v) for v in value])
    return ("other", value)


def keyed(params: Any, rule: str) -> dict[str, Any] | None:
    """The parameter object with keys as `rule` compares them; None when it is not an object."""
    if not isinstance(params, dict):
        return None
    return {name_of(k, rule): v for k, v in params.items()}


def matched_keys(pred: Mapping[str, Any], gold: Mapping[str, Any], keys: list[str], rule: str) -> int:
    """How many of `keys` (gold keys) the prediction gives a value equal to the gold's."""
    return sum(1 for k in keys if k in pred and values_equal(pred[k], gold[k], rule))


def params_grade(pred: Any, gold: Mapping[str, Any], tool_ok: bool, rules: Rules) -> tuple[bool, float]:
    """(all parameters right, parameter score in [0, 1]) under the sample's params rule."""
    pred_keyed, gold_keyed = keyed(pred, rules.name_rule), keyed(gold, rules.name_rule) or {}
    if pred_keyed is None:
        return False, 0.0
    if rules.params_rule == "whole":
        ok = pred_keyed.keys() == gold_keyed.keys() and \
            matched_keys(pred_keyed, gold_keyed, list(gold_keyed), rules.value_rule) == len(gold_keyed)
        return ok, float(ok)
    if not tool_ok:
        return False, 0.0
    hits = matched_keys(pred_keyed, gold_keyed, list(gold_keyed), rules.value_rule)
    return hits == len(gold_keyed), hits / len(gold_keyed) if gold_keyed else 1.0


def group_scores(pred: Any, gold: Mapping[str, Any], groups: Mapping[str, str] | None, tool_ok: bool,
                 rules: Rules) -> dict[str, float | None]:
    """Per argument group: the matched share of the gold's arguments in it (None: none in it).

    0 when the tool is wrong, as for the parameter score under `gold_keys`.
    """
    gold_keyed, pred_keyed = keyed(gold, rules.name_rule) or {}, keyed(pred, rules.name_rule) or {}
    scores: dict[str, float | None] = {}
    for group in ARG_GROUPS:
        keys = [k for k in gold_keyed if (groups or {}).get(k) == group]
        if not keys:
            scores[group] = None
        elif not tool_ok:
            scores[group] = 0.0
        else:
            scores[group] = matched_keys(pred_keyed, gold_keyed, keys, rules.value_rule) / len(keys)
    return scores
