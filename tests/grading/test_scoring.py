"""The scorer contract's declarations: which way each metric is better, subsets, the primary reading."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from grading.errors import GradingError
from grading.scoring import Metric, RowScorer, change_word, get_scorer, mean, primary_reading, scorer_names

# (id, scorer, metric, higher_is_better, reason)
DIRECTION_CASES = [
    ("etapp_personalization", "etapp_judge", "personalization", True, "a judge score: higher is better"),
    ("etapp_keypoints", "etapp_judge", "proactive_keypoints", True, "key points achieved"),
    ("etapp_valid_calls", "etapp_judge", "valid_call_rate", True, "valid calls are good"),
    ("etapp_listed_tools", "etapp_judge", "listed_tools_called", True, "the listed tools are the ones needed"),
    ("etapp_judge_failed", "etapp_judge", "judge_failed", False, "a failure share"),
    ("etapp_tool_errors", "etapp_judge", "tool_error_rate", False, "an error share"),
    ("etapp_nudges", "etapp_judge", "mean_nudges", False, "a nudge is a format failure"),
    ("etapp_turn_cap", "etapp_judge", "turn_cap", False, "an episode cut at the cap did not finish"),
    ("etapp_turns", "etapp_judge", "mean_turns", None, "more turns: thorough or flailing, no direction"),
    ("petoolbench_call", "petoolbench", "call_acc", True, "an accuracy"),
    ("petoolbench_format", "petoolbench", "format_valid", True, "readable answers are good"),
    ("toolspectrum_f1", "toolspectrum_f1", "app_api_f1", True, "an F1"),
    ("toolspectrum_refusal", "toolspectrum_f1", "refusal_recall", True, "gold refusals found"),
    ("familytool_call", "unifiedtoolhub", "call_acc", True, "ExactMatch"),
]


@pytest.mark.parametrize("scorer,metric,expected", [c[1:4] for c in DIRECTION_CASES],
                         ids=[c[0] for c in DIRECTION_CASES])
def test_each_metric_says_which_way_is_better(scorer, metric, expected):
    found = {m.name: m for m in get_scorer(scorer).metrics}[metric]
    assert found.higher_is_better is expected


def test_every_metric_of_every_scorer_declares_a_direction():
    for name in scorer_names():
        for metric in get_scorer(name).metrics:
            assert metric.higher_is_better in (True, False, None), f"{name}.{metric.name}"


def test_a_metric_must_declare_its_direction():
    with pytest.raises(TypeError, match="higher_is_better"):
        Metric("m", ("x",), lambda x: float(np.nanmean(x)))
    with pytest.raises(TypeError, match="higher_is_better"):
        mean("m", "x")


# (id, higher_is_better, increase, expected, reason)
WORD_CASES = [
    ("accuracy_up", True, True, "better", "more right answers"),
    ("accuracy_down", True, False, "worse", "fewer right answers"),
    ("errors_up", False, True, "worse", "more errors"),
    ("errors_down", False, False, "better", "fewer errors"),
    ("turns_up", None, True, "higher", "no direction: only the change is said"),
    ("turns_down", None, False, "lower", "no direction: only the change is said"),
]


@pytest.mark.parametrize("direction,increase,expected", [c[1:4] for c in WORD_CASES], ids=[c[0] for c in WORD_CASES])
def test_change_word_follows_the_direction(direction, increase, expected):
    metric = mean("m", "x", higher_is_better=direction)
    assert change_word(metric, increase) == expected


def _scorer(**changes) -> RowScorer:
    fields = {"name": "s", "readings": ("judge",), "fields": {"ok": pl.Boolean},
              "metrics": (mean("acc", "ok", higher_is_better=True),), "grade": lambda r, row: {"ok": True}}
    return RowScorer(**{**fields, **changes})


@pytest.mark.parametrize("subsets", [{"": "clean"}, {"a/b": "clean"}], ids=["empty_name", "slash_in_name"])
def test_subset_names_must_make_readable_row_labels(subsets):
    with pytest.raises(GradingError, match="subset names must be non-empty and hold no '/'"):
        _scorer(subsets=subsets)


# (id, readings, expected, reason)
READING_CASES = [
    ("official_first", ("official", "json"), "official", "the benchmark's own parser"),
    ("official_second", ("json", "official"), "official", "official wherever it stands"),
    ("no_official", ("judge",), "judge", "ETAPP: the scorer's first reading"),
]


@pytest.mark.parametrize("readings,expected", [c[1:3] for c in READING_CASES], ids=[c[0] for c in READING_CASES])
def test_primary_reading(readings, expected):
    assert primary_reading(_scorer(readings=readings)) == expected
