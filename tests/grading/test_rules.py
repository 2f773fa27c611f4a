"""The comparison rules benchmarks declare, case by case, and how grading applies them per row."""

from __future__ import annotations

import json

import polars as pl
import pytest

from grading.canonical import canonical_json
from grading.grades import grade, grade_one
from grading.metrics import summarize
from grading.parsers import parse_whole_json
from grading.rules import Rules, group_scores, params_grade, values_equal

PETOOLBENCH = Rules("tool_name_regex", "exact", "exact", "whole")
FAMILYTOOL = Rules("whole_json", "strip", "json_dumps", "gold_keys")
TOOLSPECTRUM = Rules("whole_json", "exact", "bool_strings", "whole")

VALUE_CASES = [
    # (pred, gold, rule, equal, reason)
    ("10", 10, "exact", False, "a string is not a number under Python =="),
    (1.0, 1, "exact", True, "Python == treats 1.0 and 1 as equal, as the paper's script does"),
    (True, 1, "exact", True, "Python == treats True as 1, as the paper's script does"),
    (1.0, 1, "json_dumps", False, "json.dumps gives '1.0' and '1'"),
    (True, 1, "json_dumps", False, "json.dumps gives 'true' and '1'"),
    (["a", "b"], ["a", "b"], "json_dumps", True, "equal lists dump equally"),
    ({"b": 1, "a": 2}, {"a": 2, "b": 1}, "json_dumps", False, "json.dumps keeps key order, as the official metric does"),
    ("True", True, "bool_strings", True, "the string 'True' stands for the boolean"),
    (False, "False", "bool_strings", True, "either side may carry the string"),
    ("true", True, "bool_strings", False, "only the exact strings True/False are booleans"),
    (True, 1, "bool_strings", False, "a boolean is not a number"),
    (5, 5.0, "bool_strings", True, "numbers compare by value"),
    ({"x": "True"}, {"x": True}, "bool_strings", True, "normalised inside objects too"),
    ("High", "high", "bool_strings", False, "string case is not normalised"),
]


@pytest.mark.parametrize("pred,gold,rule,equal,reason", VALUE_CASES, ids=[c[-1] for c in VALUE_CASES])
def test_values_equal(pred, gold, rule, equal, reason):
    assert values_equal(pred, gold, rule) is equal, reason


PARAM_CASES = [
    # (pred, gold, tool_ok, rules, (all right, score), reason)
    ({"a": 1}, {"a": 1}, False, PETOOLBENCH, (True, 1.0), "whole: judged even when the tool is wrong"),
    ({"a": 1, "b": 2}, {"a": 1}, True, PETOOLBENCH, (False, 0.0), "whole: an extra key makes it wrong"),
    ({"a": 1, "b": 2}, {"a": 1}, True, FAMILYTOOL, (True, 1.0), "gold_keys: extra keys are ignored"),
    ({"a": 1}, {"a": 1, "b": "x"}, True, FAMILYTOOL, (False, 0.5), "gold_keys: the matched share of gold keys"),
    ({"a": 1}, {"a": 1}, False, FAMILYTOOL, (False, 0.0), "gold_keys: 0 when the tool is wrong"),
    ({" a ": "v"}, {"a": "v"}, True, FAMILYTOOL, (True, 1.0), "strip: keys are whitespace-stripped"),
    ({" a ": "v"}, {"a": "v"}, True, PETOOLBENCH, (False, 0.0), "exact: a padded key is another key"),
    ("a=1", {"a": 1}, True, FAMILYTOOL, (False, 0.0), "parameters that are not an object are wrong"),
    ({"on": "True"}, {"on": True}, True, TOOLSPECTRUM, (True, 1.0), "bool_strings inside the whole object"),
]


@pytest.mark.parametrize("pred,gold,tool_ok,rules,expected,reason", PARAM_CASES, ids=[c[-1] for c in PARAM_CASES])
def test_params_grade(pred, gold, tool_ok, rules, expected, reason):
    assert params_grade(pred, gold, tool_ok, rules) == expected, reason


def test_group_scores_average_within_each_declared_group():
    gold = {"dest": "x", "class": "economy", "dark": True, "quiet": "True"}
    groups = {"dest": "required", "class": "personalized", "dark": "environmental", "quiet": "environmental"}
    pred = {"dest": "x", "class": "premium", "dark": "True", "quiet": False}
    assert group_scores(pred, gold, groups, True, TOOLSPECTRUM) == \
        {"required": 1.0, "personalized": 0.0, "environmental": 0.5}
    assert group_scores(pred, gold, groups, False, TOOLSPECTRUM) == \
        {"required": 0.0, "personalized": 0.0, "environmental": 0.0}
    assert group_scores(pred, {"dest": "x"}, {"dest": "required"}, True, TOOLSPECTRUM)["personalized"] is None


def test_whole_json_parser_needs_the_whole_answer_to_be_the_call():
    assert parse_whole_json(' {"tool_name": "a", "parameters": {}}\n').ok
    assert parse_whole_json('{"tool_name": null, "parameters": null}').tool_name is None
    for bad, reason in (('Sure: {"tool_name": "a", "parameters": {}}', "json_decode"),
                        ('[{"tool_name": "a"}]', "no_tool_name"), ("", "empty")):
        assert parse_whole_json(bad).error == reason


def _row(output, gold_tool, gold_params, rules, **extra):
    return {"sample_id": "s-0", "setting": "s", "output": output, "failure": None, "gold_tool": gold_tool,
            "gold_params": canonical_json(gold_params), "official_parser": rules.official_parser,
            "name_rule": rules.name_rule, "value_rule": rules.value_rule, "params_rule": rules.params_rule,
            "tool_apps": extra.get("tool_apps"), "param_groups": extra.get("param_groups")}


REFUSE = '{"tool_name": null, "parameters": null}'
CALL = '{"tool_name": "Bank.pay", "parameters": {"to": "Ana"}}'
APPS = canonical_json({"Bank.pay": "Bank", "Bank.save": "Bank", "Taxi.go": "Taxi"})

REFUSAL_CASES = [
    # (output, gold_tool, gold_params, expected subset, reason)
    (REFUSE, None, None, {"valid": True, "refused": True, "tool_ok": True, "call_ok": True, "app_ok": None},
     "refusing when the gold refuses is right"),
    (CALL, None, None, {"valid": True, "refused": False, "tool_ok": False, "call_ok": False, "param_score": 0.0},
     "calling when the gold refuses is wrong"),
    (REFUSE, "Bank.pay", {"to": "Ana"}, {"valid": True, "refused": True, "tool_ok": False, "app_ok": False},
     "refusing a legitimate request is wrong"),
    ('{"tool_name": "Bank.save", "parameters": {"to": "Ana"}}', "Bank.pay", {"to": "Ana"},
     {"tool_ok": False, "app_ok": True, "params_ok": True, "call_ok": False}, "right app, wrong API"),
    ('{"tool_name": "Taxi.go", "parameters": {}}', "Bank.pay", {"to": "Ana"},
     {"tool_ok": False, "app_ok": False}, "wrong app"),
]


@pytest.mark.parametrize("output,gold_tool,gold_params,expected,reason", REFUSAL_CASES,
                         ids=[c[-1] for c in REFUSAL_CASES])
def test_refusals_and_apps(output, gold_tool, gold_params, expected, reason):
    graded = grade_one("official", _row(output, gold_tool, gold_params, TOOLSPECTRUM, tool_apps=APPS))
    assert {k: graded[k] for k in expected} == expected, reason


def test_official_parser_follows_the_declared_rule():
    prose = 'Here you go: {"tool_name": "Bank.pay", "parameters": {"to": "Ana"}}'
    regex_row = _row(prose, "Bank.pay", {"to": "Ana"}, PETOOLBENCH)
    strict_row = _row(prose, "Bank.pay", {"to": "Ana"}, TOOLSPECTRUM)
    assert grade_one("official", regex_row)["call_ok"] is True      # the regex finds the call in prose
    assert grade_one("official", strict_row)["valid"] is False      # the whole answer must be the call
    assert grade_one("json", strict_row)["call_ok"] is True         # the robust parser finds it anyway


def test_refusal_precision_and_recall_are_ratios_over_refusals():
    rows = [_row(REFUSE, None, None, TOOLSPECTRUM), _row(CALL, None, None, TOOLSPECTRUM),
            _row(REFUSE, "Bank.pay", {"to": "Ana"}, TOOLSPECTRUM), _row(CALL, "Bank.pay", {"to": "Ana"}, TOOLSPECTRUM)]
    table = pl.DataFrame([{**r, "sample_id": f"s-{i}", "gold_in_schema": True} for i, r in enumerate(rows)])
    pooled = summarize(grade(table)).filter(setting="all", parser="official").row(0, named=True)
    # 2 refusals predicted, 1 right; 2 refusals in the gold, 1 found
    assert (pooled["refusal_precision"], pooled["refusal_recall"]) == (0.5, 0.5)
    assert pooled["tool_acc"] == 0.5 and pooled["app_acc"] is None  # no apps declared here


def test_tables_without_rule_columns_are_graded_as_before():
    """Sample tables written before the rules were columns re-grade with the PEToolBench rules."""
    row = _row('x {"tool_name": "t", "parameters": {"a": 1}}', "t", {"a": 1.0}, PETOOLBENCH)
    old = pl.DataFrame([{k: v for k, v in row.items() if k in ("sample_id", "setting", "output", "failure",
                                                                 "gold_tool", "gold_params")}])
    graded = grade(old.with_columns(pl.lit(True).alias("gold_in_schema")))
    assert graded["official_call_ok"].to_list() == [True]
    assert json.loads(graded["official_params"][0]) == {"a": 1}
