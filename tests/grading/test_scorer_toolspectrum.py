"""ToolSpectrum's F1 levels (toolsweep's reconstruction of the paper's Table 3), case by case,
and the two models that bound them: one that always refuses, one that is always right."""

from __future__ import annotations

import json

import polars as pl
import pytest

from grading.canonical import canonical_json
from grading.grades import grade
from grading.metrics import summarize
from grading.parsers import ParsedCall
from grading.scorers.toolspectrum_f1 import level_counts, typed

TOOLSET = {
    "Bank.pay": {"app": "Bank", "api": "pay", "groups": {"to": "required", "currency": "personalized",
                                                        "dark": "environmental"}},
    "Bank.search": {"app": "Bank", "api": "search", "groups": {"q": "required"}},
    "Shop.search": {"app": "Shop", "api": "search", "groups": {"q": "required", "size": "personalized"}},
}
GOLD = ("Bank.pay", {"to": "Ana", "currency": "EUR", "dark": "True"})


def call(name, params):
    return ParsedCall(ok=True, tool_name=name, parameters=params)


def counts(pred, gold=GOLD):
    got = level_counts(pred, gold[0], gold[1], TOOLSET)
    return {level: (got[f"{level}_tp"], got[f"{level}_fp"], got[f"{level}_fn"])
            for level in ("app", "api", "app_api", "required", "personalized", "environmental")}


# (id, prediction, gold, expected {level: (tp, fp, fn)} subset, why)
CASES = [
    ("perfect", call(*GOLD), GOLD,
     {"app": (1, 0, 0), "app_api": (1, 0, 0), "required": (1, 0, 0), "environmental": (1, 0, 0)},
     "every level a true positive"),
    ("bool_string", call("Bank.pay", {**GOLD[1], "dark": True}), GOLD, {"environmental": (1, 0, 0)},
     '"True" equals True (606 gold values are such strings)'),
    ("same_api_name_other_app", call("Shop.search", {"q": "x"}), ("Bank.search", {"q": "x"}),
     {"app": (0, 1, 1), "api": (1, 0, 0), "app_api": (0, 1, 1), "required": (1, 0, 0)},
     "API is scored by name (API > APP is possible), arguments are not gated on the app"),
    ("wrong_value", call("Bank.pay", {"to": "Bo", "currency": "EUR", "dark": "True"}), GOLD,
     {"required": (0, 1, 1), "personalized": (1, 0, 0)}, "a wrong value is a false positive and a miss"),
    ("missing_argument", call("Bank.pay", {"to": "Ana"}), GOLD, {"personalized": (0, 0, 1), "environmental": (0, 0, 1)},
     "an argument left out is a false negative only"),
    ("refused_a_call", None, GOLD,
     {"app": (0, 0, 1), "api": (0, 0, 1), "app_api": (0, 0, 1), "required": (0, 0, 1)},
     "a refusal (or unparsable answer) where the gold calls: misses only"),
    ("called_a_refusal", call("Bank.pay", {"to": "Ana"}), (None, None),
     {"app": (0, 1, 0), "app_api": (0, 1, 0), "required": (0, 1, 0)}, "a call where the gold refuses: false positives"),
    ("refused_a_refusal", None, (None, None),
     {"app": (0, 0, 0), "app_api": (0, 0, 0), "required": (0, 0, 0)}, "a correct refusal is neither TP nor FP"),
    ("unknown_tool", call("Bank.transfer", {"to": "Ana"}), GOLD,
     {"app": (1, 0, 0), "api": (0, 1, 1), "required": (1, 0, 0)},
     "a tool outside the toolset: app from its name, arguments grouped as the gold tool's"),
]


@pytest.mark.parametrize("pred,gold,expected,why", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_level_counts(pred, gold, expected, why):
    got = counts(pred, gold)
    assert {k: got[k] for k in expected} == expected, why


def test_typed_keeps_types_but_reads_bool_strings():
    assert typed("True") == typed(True) and typed(False) == typed("False")
    assert typed(True) != typed(1) and typed("true") != typed(True) and typed("High") != typed("high")
    assert typed(5) == typed(5.0)


def _table(answers: list[str], golds: list[tuple]) -> pl.DataFrame:
    rows = [{"sample_id": f"persona_environment-{i}", "setting": "persona_environment", "output": out,
             "failure": None, "scorer": "toolspectrum_f1", "gold_tool": tool, "gold_params": canonical_json(params),
             "toolset": json.dumps(TOOLSET), "gold_in_schema": True}
            for i, (out, (tool, params)) in enumerate(zip(answers, golds))]
    return pl.DataFrame(rows)


REFUSE = '{"tool_name": null, "parameters": null}'
GOLDS = [GOLD, (None, None), (None, None), ("Shop.search", {"q": "shoes", "size": "M"})]


def _pooled(answers: list[str], golds: list[tuple] = GOLDS) -> dict:
    return summarize(grade(_table(answers, golds))).filter(setting="all", parser="official").row(0, named=True)


F1S = ("app_f1", "api_f1", "app_api_f1", "required_f1", "personalized_f1", "environmental_f1")


def test_always_refusing_scores_zero_and_perfect_scores_one():
    refuser = _pooled([REFUSE] * len(GOLDS))
    assert {m: refuser[m] for m in F1S} == {m: 0.0 for m in F1S}
    assert (refuser["refusal_recall"], refuser["refusal_precision"]) == (1.0, 0.5)
    perfect = _pooled([REFUSE if t is None else json.dumps({"tool_name": t, "parameters": p}) for t, p in GOLDS])
    assert {m: perfect[m] for m in F1S} == {m: 1.0 for m in F1S}


def _real_run(folder, answer):
    from inference.benchmarks.toolspectrum import load_toolspectrum

    samples = load_toolspectrum(folder, ("persona_environment",))
    outputs = [answer(t, p) for t, p in samples.select("gold_tool", "gold_params").iter_rows()]
    table = samples.with_columns(pl.Series("output", outputs), pl.lit(None, dtype=pl.String).alias("failure"))
    return summarize(grade(table)).filter(setting="persona_environment", parser="official").row(0, named=True)


def _gold(tool, params):
    return json.dumps({"tool_name": tool, "parameters": json.loads(params)})


@pytest.mark.parametrize("source", ["bundled", "real"])
def test_bounds_on_persona_environment(request, source):
    """Always refusing (240 of the real 333 cases are refusals) scores 0 at every F1 level; gold 1."""
    from tests.conftest import TOOLSPECTRUM_SAMPLE

    folder = TOOLSPECTRUM_SAMPLE if source == "bundled" else request.getfixturevalue("toolspectrum_dir")
    refuser = _real_run(folder, lambda t, p: REFUSE)
    perfect = _real_run(folder, _gold)
    assert {m: refuser[m] for m in F1S} == {m: 0.0 for m in F1S}
    assert {m: perfect[m] for m in F1S} == {m: 1.0 for m in F1S}
