"""Paired run comparison: a run against itself, known flips, mismatched runs, the CLI."""

from __future__ import annotations

import polars as pl
import pyarrow.parquet as pq
import pytest

from grading.compare import COMPARISON_SCHEMA, FLIP_SCHEMA, compare_runs, main
from grading.errors import GradingError
from grading.stats import mcnemar_exact
from tests.grading.conftest import make_samples, write_run

RUN_A = {"p": ["call", "call", "tool", "wrong", "invalid", "params"], "r": ["call", "failed", "tool", "wrong"]}
# Against A: p-1 lost its call, p-3 and p-4 gained it, r-1 gained (no longer a failure), r-2 lost the tool.
RUN_B = {"p": ["call", "wrong", "tool", "call", "call", "params"], "r": ["call", "call", "wrong", "wrong"]}


def test_compare_run_with_itself():
    samples = make_samples(RUN_A)
    comparison, flips = compare_runs(samples, samples)
    assert comparison.schema == pl.Schema(COMPARISON_SCHEMA)
    assert comparison.height == 3 * 2 * 4, "(p, r, all) x 2 parsers x 4 metrics"
    assert comparison["diff"].to_list() == [0.0] * comparison.height
    assert set(zip(comparison["ci_low"], comparison["ci_high"])) == {(0.0, 0.0)}
    assert comparison["p_value"].to_list() == [1.0] * comparison.height
    assert (comparison["a_only"] + comparison["b_only"]).sum() == 0
    assert flips.height == 0 and flips.schema == pl.Schema(FLIP_SCHEMA)


def test_comparison_rows_are_ordered_setting_parser_metric():
    comparison, _ = compare_runs(make_samples(RUN_A), make_samples(RUN_B))
    assert comparison.select("setting", "parser", "metric").unique(maintain_order=True).height == comparison.height
    assert comparison["setting"].unique(maintain_order=True).to_list() == ["p", "r", "all"]
    assert comparison.head(4)["metric"].to_list() == ["tool_acc", "param_acc", "call_acc", "format_valid"]


# (id, setting, metric, n, acc_a, acc_b, a_only, b_only, reason)
CELL_CASES = [
    ("p_call", "p", "call_acc", 6, 2 / 6, 3 / 6, 1, 2, "p-1 lost the call, p-3 and p-4 gained it"),
    ("p_tool", "p", "tool_acc", 6, 3 / 6, 4 / 6, 1, 2, "p-1 lost the tool (wrong), p-3 and p-4 gained it"),
    ("p_format", "p", "format_valid", 6, 5 / 6, 6 / 6, 0, 1, "p-4 was unparsable in A"),
    ("r_tool", "r", "tool_acc", 4, 2 / 4, 2 / 4, 1, 1, "r-1 gained, r-2 lost: diff 0 but not identical"),
    ("r_format", "r", "format_valid", 4, 3 / 4, 4 / 4, 0, 1, "a failed generation counts as invalid"),
    ("all_call", "all", "call_acc", 10, 3 / 10, 5 / 10, 1, 3, "pooled over both settings"),
]


@pytest.mark.parametrize("setting,metric,n,acc_a,acc_b,a_only,b_only", [c[1:8] for c in CELL_CASES],
                         ids=[c[0] for c in CELL_CASES])
def test_comparison_cells(setting, metric, n, acc_a, acc_b, a_only, b_only):
    comparison, _ = compare_runs(make_samples(RUN_A), make_samples(RUN_B))
    for parser in ("official", "json"):
        row = comparison.filter(setting=setting, parser=parser, metric=metric).row(0, named=True)
        assert (row["n"], row["a_only"], row["b_only"]) == (n, a_only, b_only)
        assert (row["acc_a"], row["acc_b"]) == pytest.approx((acc_a, acc_b))
        assert row["diff"] == pytest.approx(acc_b - acc_a)
        assert row["ci_low"] <= row["diff"] <= row["ci_high"]
        assert row["p_value"] == mcnemar_exact(b_only, a_only)


def test_flips_list_every_changed_sample():
    _, flips = compare_runs(make_samples(RUN_A), make_samples(RUN_B))
    call = flips.filter(parser="official", metric="call_acc").sort("sample_id")
    assert call.select("sample_id", "setting", "direction").rows() == [
        ("p-1", "p", "lost"), ("p-3", "p", "gained"), ("p-4", "p", "gained"), ("r-1", "r", "gained")]
    assert flips.filter(parser="json").height == flips.filter(parser="official").height


def test_pairs_by_sample_id_not_row_order():
    a, b = make_samples(RUN_A), make_samples(RUN_B)
    in_order, _ = compare_runs(a, b)
    shuffled, _ = compare_runs(a, b.sample(fraction=1.0, shuffle=True, seed=3))
    assert shuffled.equals(in_order)


def test_different_sample_sets_are_listed():
    a = make_samples({"p": ["call"] * 30})
    b = make_samples({"p": ["call"] * 5, "r": ["call"] * 2})
    with pytest.raises(GradingError) as err:
        compare_runs(a, b)
    message = str(err.value)
    assert "25 only in A" in message and "2 only in B ['r-0', 'r-1']" in message
    assert message.count("'p-") == 20, "at most 20 ids listed per side"
    assert "dataset.limit" in message, "the message says how to fix it"


@pytest.mark.parametrize("broken,message", [
    (lambda s: pl.concat([s, s.head(1)]), "repeat sample_ids \\['p-0'\\]"),
    (lambda s: s.drop("json_call_ok"), "lack columns \\['json_call_ok'\\]"),
    (lambda s: s.head(0), "are empty"),
], ids=["duplicate_id", "ungraded", "empty"])
def test_bad_tables_are_refused(broken, message):
    samples = make_samples(RUN_A)
    with pytest.raises(GradingError, match=message):
        compare_runs(samples, broken(samples))


def test_cli_writes_tables_and_prints_markdown(tmp_path, capsys):
    run_a = write_run(tmp_path / "base", make_samples(RUN_A))
    run_b = write_run(tmp_path / "tuned", make_samples(RUN_B))
    assert main([str(run_a), str(run_b)]) == 0
    out_dir = run_b / "compare_vs_base"
    assert pq.read_schema(out_dir / "comparison.parquet").names == list(COMPARISON_SCHEMA)
    assert pq.read_schema(out_dir / "flips.parquet").names == list(FLIP_SCHEMA)
    assert pl.read_parquet(out_dir / "flips.parquet").filter(metric="call_acc").height == 2 * 4
    printed = capsys.readouterr().out
    assert "| all | official | call_acc | 10 | 30.0% | 50.0% | +20.0% [" in printed
    assert "| all | json | call_acc |" in printed


def test_cli_out_option_and_errors(tmp_path, capsys):
    run_a = write_run(tmp_path / "a", make_samples(RUN_A))
    assert main([str(run_a), str(run_a), "--out", str(tmp_path / "cmp")]) == 0
    assert pl.read_parquet(tmp_path / "cmp" / "comparison.parquet")["p_value"].min() == 1.0
    assert main([str(run_a), str(tmp_path / "missing")]) == 2
    assert "holds no samples.parquet" in capsys.readouterr().err


def test_fractional_parameter_scores_pair_by_sample():
    """Under FamilyTool's scorer a sample's parameter score is a fraction: the run that scored a
    sample higher counts it, and the difference is of the mean fractions."""
    from grading.grades import grade

    def run(output: str) -> pl.DataFrame:
        row = {"sample_id": "b-0", "setting": "b", "output": output, "failure": None, "scorer": "unifiedtoolhub",
               "gold_calls": '[{"name": "t", "parameters": {"x": "1", "y": "2"}}]', "gold_in_schema": True}
        return grade(pl.DataFrame([row]))

    half, full = run('{"tool_name":"t","parameters":{"x":"1"}}'), run('{"tool_name":"t","parameters":{"x":"1","y":"2"}}')
    comparison, flips = compare_runs(half, full)
    cell = comparison.filter(setting="all", parser="official", metric="param_acc").row(0, named=True)
    assert (cell["acc_a"], cell["acc_b"], cell["diff"], cell["a_only"], cell["b_only"]) == (0.5, 1.0, 0.5, 0, 1)
    assert flips.filter(metric="param_acc", parser="official")["direction"].to_list() == ["gained"]
    assert set(comparison["metric"]) == {"tool_acc", "param_acc", "call_acc", "format_valid"}, "the scorer's own"


# ----------------------------------------------------------------------------- metric directions

def _etapp_run(personalization: int, counts: tuple[int, int, int, int, int], end: str) -> pl.DataFrame:
    """Six ETAPP cases alike but for the last (not clean); `counts` (turns, calls, valid, errors, nudges)."""
    from grading.grades import grade
    from tests.grading.conftest import etapp_case, etapp_points, etapp_table

    cases = [etapp_case(f"tg-{i}", "tool_given/fc", (3, personalization, 3), etapp_points([2], [1]), counts, end,
                        ["t1"], ["t1"], clean=i < 5) for i in range(6)]
    return grade(etapp_table(cases))


# B: a better personalization, but a turn more, two more nudges, a tool error per call pair,
# one valid call fewer, and every episode cut at the turn cap.
ETAPP_A = _etapp_run(3, (3, 2, 2, 0, 0), "finish")
ETAPP_B = _etapp_run(4, (4, 2, 1, 1, 2), "turn_cap")

# (id, metric, verdict, a_only, b_only, flip direction, reason)
DIRECTION_CASES = [
    ("score_up", "personalization", "better", 0, 6, "gained", "a higher judge score is a gain"),
    ("nudges_up", "mean_nudges", "worse", 6, 0, "lost", "more format reminders are a loss"),
    ("turn_cap_up", "turn_cap", "worse", 6, 0, "lost", "more episodes cut at the cap are a loss"),
    ("turns_up", "mean_turns", "higher", 0, 6, "higher", "no direction: B higher on all six, neither gained nor lost"),
    ("errors_up", "tool_error_rate", "worse", None, None, None, "a pooled error share: worse, no flips"),
    ("valid_down", "valid_call_rate", "worse", None, None, None, "a pooled share that fell"),
]


@pytest.mark.parametrize("metric,verdict,a_only,b_only,flip", [c[1:6] for c in DIRECTION_CASES],
                         ids=[c[0] for c in DIRECTION_CASES])
def test_comparison_follows_each_metrics_direction(metric, verdict, a_only, b_only, flip):
    comparison, flips = compare_runs(ETAPP_A, ETAPP_B)
    row = comparison.filter(setting="all", metric=metric).row(0, named=True)
    assert (row["verdict"], row["a_only"], row["b_only"]) == (verdict, a_only, b_only)
    directions = flips.filter(metric=metric)["direction"].unique().to_list()
    assert directions == ([flip] if flip else [])


def test_comparison_has_the_subset_rows_and_the_verdict_column():
    comparison, _ = compare_runs(ETAPP_A, ETAPP_B)
    assert comparison["setting"].unique(maintain_order=True).to_list() == [
        "tool_given/fc", "tool_given/fc/clean", "all", "all/clean"]
    assert comparison.filter(setting="all/clean", metric="mean_nudges")["n"].to_list() == [5]
    assert "judge_failed" in comparison["metric"].to_list(), "defined (0%) in both runs"
    same, _ = compare_runs(ETAPP_A, ETAPP_A)
    assert same["verdict"].null_count() == same.height, "a run against itself: no change anywhere"


def test_a_metric_undefined_in_both_runs_gets_no_row():
    # Runs with judging switched off: no case was sent to the judge, so judge_failed is undefined.
    unjudged = ETAPP_A.with_columns(pl.lit(None, dtype=pl.Boolean).alias("judge_judged"))
    comparison, _ = compare_runs(unjudged, unjudged)
    assert "judge_failed" not in comparison["metric"].to_list()


def test_the_markdown_table_says_better_or_worse():
    from grading.compare import format_comparison
    from grading.scoring import get_scorer

    comparison, _ = compare_runs(ETAPP_A, ETAPP_B)
    text = format_comparison(comparison, get_scorer("etapp_judge"))
    assert "| B vs A |" in text.splitlines()[0]
    assert "| all | judge | mean_nudges | 6 | 0.00 | 2.00 | 2.00 [2.00, 2.00] | worse | 6 | 0 |" in text
