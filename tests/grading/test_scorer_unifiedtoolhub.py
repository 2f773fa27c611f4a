"""FamilyTool's scorer: UnifiedToolHub's single-round metric, case by case.

Each expected value is what the metric bundled in FamilyTool's repository (the one its
pipeline runs) gives for that sample: (ExactMatch, ToolAccuracy, ParameterAccuracy).
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from grading.grades import grade
from grading.metrics import summarize
from grading.scorers.unifiedtoolhub import single_round

ALARM = ("cancel_alarm", {"label": "dinnertime_0002"})
RIDE = ("GetRide", {"destination": "d_1", "ride_type": "Pool"})

# (id, gold calls, predicted calls, (exact, tool_acc, param_acc), why upstream gives that)
CASES = [
    ("exact", [ALARM], [ALARM], (True, 1.0, 1.0), "every gold key's json.dumps is equal"),
    ("wrong_tool", [ALARM], [("set_alarm", ALARM[1])], (False, 0.0, 0.0),
     "the gold name is not among the predicted names; nothing compared, so 0"),
    ("name_case", [ALARM], [("Cancel_Alarm", ALARM[1])], (False, 0.0, 0.0), "names are not case-folded"),
    ("name_whitespace", [ALARM], [(" cancel_alarm\n", ALARM[1])], (True, 1.0, 1.0), "names are stripped"),
    ("key_whitespace", [ALARM], [("cancel_alarm", {" label ": "dinnertime_0002"})], (True, 1.0, 1.0),
     "top-level keys are stripped"),
    ("value_whitespace", [ALARM], [("cancel_alarm", {"label": " dinnertime_0002 "})], (False, 1.0, 0.0),
     "strict mode: values are not stripped"),
    ("key_case", [ALARM], [("cancel_alarm", {"Label": "dinnertime_0002"})], (False, 1.0, 0.0),
     "'label' is missing, reads as null"),
    ("extra_key", [ALARM], [("cancel_alarm", {"label": "dinnertime_0002", "time": "19:00"})], (True, 1.0, 1.0),
     "only gold keys are checked"),
    ("half_the_keys", [RIDE], [("GetRide", {"destination": "d_1"})], (False, 1.0, 0.5),
     "ParameterAccuracy is the matched share of gold keys"),
    ("gold_params_empty", [("get_weather", {})], [("get_weather", {"city": "x"})], (True, 1.0, 0.0),
     "nothing to compare: exact, but ParameterAccuracy is 0/0 -> 0"),
    ("gold_null_key_missing", [("cancel_alarm", {"label": None})], [("cancel_alarm", {})], (True, 1.0, 1.0),
     "a missing key reads as null, equal to a gold null"),
    ("gold_null_string_null", [("cancel_alarm", {"label": None})], [("cancel_alarm", {"label": "null"})],
     (False, 1.0, 0.0), '"null" the string is not null'),
    ("nested_same_order", [("f", {"o": {"a": 1, "b": 2}})], [("f", {"o": {"a": 1, "b": 2}})], (True, 1.0, 1.0),
     "json.dumps equal"),
    ("nested_other_order", [("f", {"o": {"a": 1, "b": 2}})], [("f", {"o": {"b": 2, "a": 1}})], (False, 1.0, 0.0),
     "json.dumps keeps key order: compared against the gold as written"),
    ("list_order", [("f", {"l": [1, 2]})], [("f", {"l": [2, 1]})], (False, 1.0, 0.0), "lists compare in order"),
    ("int_vs_float", [("pay", {"amount": 120})], [("pay", {"amount": 120.0})], (False, 1.0, 0.0), "'120' != '120.0'"),
    ("int_vs_string", [("pay", {"amount": 120})], [("pay", {"amount": "120"})], (False, 1.0, 0.0), "'120' != '\"120\"'"),
    ("string_vs_int", [("rent", {"beds": "3"})], [("rent", {"beds": 3})], (False, 1.0, 0.0), "'\"3\"' != '3'"),
    ("bool_vs_one", [("f", {"b": True})], [("f", {"b": 1})], (False, 1.0, 0.0), "'true' != '1' though True == 1"),
    ("non_ascii_same", [("f", {"city": "北京"})], [("f", {"city": "北京"})], (True, 1.0, 1.0), "same code points"),
    ("non_ascii_nfd", [("f", {"city": "caf\u00e9"})], [("f", {"city": "cafe\u0301"})], (False, 1.0, 0.0),
     "no Unicode normalisation"),
    ("other_call_first", [ALARM], [("set_alarm", {"x": 1}), ALARM], (True, 1.0, 1.0),
     "calls to other tools cost nothing"),
    ("same_name_sorted_first_right", [ALARM], [("cancel_alarm", {"label": "dinnertime_0009"}), ALARM],
     (True, 1.0, 1.0), "same-name calls sorted by key-sorted JSON: '..0002' sorts first and is compared"),
    ("same_name_sorted_first_wrong", [ALARM], [ALARM, ("cancel_alarm", {"label": "dinnertime_0001"})],
     (False, 1.0, 0.0), "'..0001' sorts first, so the wrong one is compared (the bundled metric)"),
    ("no_call", [ALARM], [], (False, 0.0, 0.0), "no calls: nothing matched"),
    ("args_not_object", [ALARM], [("cancel_alarm", "label=dinnertime_0002")], (False, 1.0, 0.0),
     "upstream crashes here; toolsweep compares it as {} (documented deviation)"),
    ("args_not_object_gold_empty", [("get_weather", {})], [("get_weather", "x")], (True, 1.0, 0.0),
     "gold {}: the arguments are never read, as upstream"),
    ("key_collision_after_strip", [ALARM], [("cancel_alarm", {"label": "dinnertime_0002", "label ": "zzz"})],
     (False, 1.0, 0.0), "after stripping, the later key wins"),
]


@pytest.mark.parametrize("gold,pred,expected,why", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_single_round_matches_upstream(gold, pred, expected, why):
    got = single_round(gold, pred)
    assert (got["exact"], got["tool_score"], got["param_score"]) == expected, why


def _row(output: str | None, calls: list | None, fmt: str = "native", failure: str | None = None) -> dict:
    return {"sample_id": "b-0", "setting": "b", "output": output, "failure": failure, "scorer": "unifiedtoolhub",
            "prompt_format": fmt, "calls": None if calls is None else json.dumps(calls),
            "gold_calls": json.dumps([{"name": ALARM[0], "parameters": ALARM[1]}]), "gold_in_schema": True}


HERMES = '<tool_call>\n{"name": "cancel_alarm", "arguments": {"label": "dinnertime_0002"}}\n</tool_call>'


@pytest.mark.parametrize("row,official,robust,why", [
    (_row(HERMES, [{"name": "cancel_alarm", "arguments": {"label": "dinnertime_0002"}}]), True, True,
     "the family parser's calls are the official reading"),
    (_row("Sure! " + HERMES.replace("</tool_call>", ""), []), False, True,
     "the parser found nothing (its verdict stands); the robust reading still finds the object"),
    (_row(HERMES, None, failure="length"), False, False, "a failed generation is wrong under both readings"),
    (_row('{"tool_name": "cancel_alarm", "parameters": {"label": "dinnertime_0002"}}', None, fmt="benchmark"),
     True, True, "benchmark format: the whole answer is the call"),
    (_row('Call: {"tool_name": "cancel_alarm", "parameters": {"label": "dinnertime_0002"}}', None, fmt="benchmark"),
     False, True, "benchmark format: prose around the call fails the strict reading only"),
], ids=["native_parsed", "native_unparsed", "failed", "benchmark_whole", "benchmark_prose"])
def test_readings(row, official, robust, why):
    graded = grade(pl.DataFrame([row]))
    assert (graded["official_exact"][0], graded["json_exact"][0]) == (official, robust), why


def test_every_metric_averages_over_all_samples():
    """Upstream sums per-sample scores and divides by the dataset size: unread answers stay in."""
    rows = [_row(HERMES, [{"name": "cancel_alarm", "arguments": {"label": "dinnertime_0002"}}]),
            _row("no call", []),
            {**_row("x", [{"name": "cancel_alarm", "arguments": {"label": "other"}}]), "sample_id": "b-2"}]
    rows[1]["sample_id"] = "b-1"
    pooled = summarize(grade(pl.DataFrame(rows))).filter(setting="all", parser="official").row(0, named=True)
    assert (pooled["call_acc"], pooled["tool_acc"], pooled["param_acc"], pooled["format_valid"]) == \
        (1 / 3, 2 / 3, 1 / 3, 2 / 3)
