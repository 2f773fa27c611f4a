"""What benchmarks declare for shared code: side tables as run.json lists them, and the views
reports read (grading/views.py)."""

from __future__ import annotations

import polars as pl
import pytest

from grading.errors import GradingError
from grading.scoring import get_scorer
from grading.views import (JUDGE_ANSWERS, MESSAGES, SIDE_TABLES, JudgeView, SideTable, ablation_axis, judge_model,
                           judge_view, outcome_view, side_table_of, side_tables_in)

MESSAGES_TABLE = SideTable("messages.parquet", MESSAGES, order=("index",), description="one row per message")


def test_a_side_table_survives_run_json():
    facts = {SIDE_TABLES: [MESSAGES_TABLE.fact(), SideTable("answers.parquet", JUDGE_ANSWERS, key="case").fact()]}
    assert side_tables_in(facts)[0] == MESSAGES_TABLE
    assert side_table_of(facts, JUDGE_ANSWERS).key == "case"
    assert side_table_of(facts, "other") is None


def test_a_run_written_before_the_list_has_none():
    assert side_tables_in({"status": "complete"}) is None and side_table_of({}, MESSAGES) is None


@pytest.mark.parametrize("name", ["messages.json", "sub/messages.parquet"])
def test_a_side_table_is_a_parquet_file_in_the_run_dir(name):
    with pytest.raises(GradingError, match=f"got '{name}'"):
        SideTable(name, MESSAGES)


def test_a_listed_side_table_without_a_name_says_so():
    with pytest.raises(GradingError, match="lacks 'name'"):
        side_tables_in({SIDE_TABLES: [{"kind": MESSAGES}]})


def test_the_judge_model_is_the_declared_roles():
    view = JudgeView(role="grader", dimensions={"quality": "grader_quality"}, scale=(0, 1, 2), headline="quality")
    facts = {"roles": {"grader": {"model": {"name": "judge-7b"}}, "model": {"model": {"name": "agent"}}}}
    assert judge_model(view, facts) == "judge-7b"
    assert judge_model(view, {"grader": {"name": "old-judge"}}) == "old-judge", "a run written before roles"
    assert judge_model(None, facts) is None and judge_model(view, {"roles": {}}) is None


def test_a_judge_views_headline_is_one_of_its_dimensions():
    with pytest.raises(GradingError, match="got 'speed'"):
        JudgeView(role="grader", dimensions={"quality": "q"}, scale=(0, 1), headline="speed")


def test_the_shipped_scorers_declare_only_the_views_their_data_have():
    declared = {name: (judge_view(s) is not None, outcome_view(s) is not None, ablation_axis(s) is not None)
                for name in ("etapp_judge", "petoolbench", "toolspectrum_f1") if (s := get_scorer(name))}
    assert declared == {"etapp_judge": (True, False, False), "petoolbench": (False, True, True),
                        "toolspectrum_f1": (False, False, False)}


def test_a_case_view_bands_cases_by_its_declared_bands(tmp_path):
    """A 0-2 scale declares its own bands; a mean outside them is `other`, a null score `unscored`."""
    from grading.case_view import OUTSIDE, UNSCORED, CaseView, case_page
    from grading.views import MESSAGES, SIDE_TABLES, SideTable

    pl.DataFrame({"sample_id": ["a", "b", "c", "d"], "turn": [1] * 4, "role": ["user"] * 4, "content": ["q"] * 4,
                  "tool_calls": [None] * 4, "tool_error": [None] * 4},
                 schema_overrides={"tool_calls": pl.String, "tool_error": pl.Boolean}).write_parquet(tmp_path / "m.parquet")
    samples = pl.DataFrame({"sample_id": ["a", "b", "c", "d"], "setting": ["s"] * 4, "score": [0, 2, 7, None]})
    view = CaseView(columns=("score",), scores=("score",), bands=(("low", 0.0, 1.0), ("high", 1.0, 2.01)))
    page = case_page(tmp_path, samples, view, {SIDE_TABLES: [SideTable("m.parquet", MESSAGES).fact()]})
    assert [c["band"] for c in page["cases"]] == ["low", "high", OUTSIDE, UNSCORED]
    assert page["bands"] == ["low", "high", OUTSIDE, UNSCORED]
    default = case_page(tmp_path, samples.head(2), CaseView(columns=("score",), scores=("score",)),
                        {SIDE_TABLES: [SideTable("m.parquet", MESSAGES).fact()]})
    assert [c["band"] for c in default["cases"]] == ["0-1", "2-3"] and OUTSIDE not in default["bands"]
