"""Re-grading: a finished run reproduces itself exactly, stale grades are fixed, sweeps too."""

from __future__ import annotations

import polars as pl
import pytest

from grading.errors import GradingError
from grading.regrade import main, regrade_run, regrade_sweep
from grading.report import read_metadata
from tests.grading.conftest import RUN_FACTS, make_samples, write_run

OUTCOMES = {"p": ["call", "tool", "params", "invalid"], "r": ["call", "failed", "wrong"], "c": ["call"]}


def test_regrade_reproduces_a_finished_run_exactly(tmp_path):
    run = write_run(tmp_path / "run", make_samples(OUTCOMES))
    before = {name: pl.read_parquet(run / name) for name in ("samples.parquet", "metrics.parquet")}
    markdown = (run / "metrics.md").read_text(encoding="utf-8")
    metrics, _ = regrade_run(run)
    assert metrics.equals(before["metrics.parquet"])
    for name, frame in before.items():
        assert pl.read_parquet(run / name).equals(frame), name
        assert read_metadata(run / name) == RUN_FACTS, f"{name} keeps the run facts"
    assert (run / "metrics.md").read_text(encoding="utf-8") == markdown
    assert "<table id=\"headline\">" in (run / "report.html").read_text(encoding="utf-8"), "and writes report.html"


def test_regrade_replaces_stale_grades(tmp_path):
    run = write_run(tmp_path / "run", make_samples(OUTCOMES))
    expected = pl.read_parquet(run / "metrics.parquet")
    # An older grader marked every tool wrong; its numbers are on disk.
    stale = make_samples(OUTCOMES).with_columns(pl.lit(False).alias("official_tool_ok"))
    write_run(run, stale)
    assert not pl.read_parquet(run / "metrics.parquet").equals(expected)
    assert regrade_run(run)[0].equals(expected)
    assert pl.read_parquet(run / "metrics.parquet").equals(expected)
    assert pl.read_parquet(run / "samples.parquet")["official_tool_ok"].sum() == 4


def test_regrade_without_metrics_uses_the_samples_facts(tmp_path):
    run = write_run(tmp_path / "run", make_samples(OUTCOMES))
    (run / "metrics.parquet").unlink()
    regrade_run(run)
    assert read_metadata(run / "metrics.parquet") == RUN_FACTS


def test_regrade_sweep_regrades_complete_jobs_and_writes_the_leaderboard(sweep_dir):
    job = sweep_dir / "0"
    expected = pl.read_parquet(job / "metrics.parquet")
    (job / "metrics.parquet").unlink()
    paths = regrade_sweep(sweep_dir)
    assert pl.read_parquet(job / "metrics.parquet").equals(expected)
    assert [p.name for p in paths] == ["leaderboard.parquet", "leaderboard.md", "leaderboard.png", "against_first.parquet", "report.html"]
    assert not (sweep_dir / "2" / "metrics.parquet").exists(), "a failed job is left alone"
    assert (job / "report.html").is_file() and not (sweep_dir / "2" / "report.html").exists()


def test_cli_on_a_run_prints_the_metrics(tmp_path, capsys):
    run = write_run(tmp_path / "run", make_samples(OUTCOMES))
    assert main([str(run)]) == 0
    assert "| all | official | 8 | 50.0% | 50.0% | 37.5% | 75.0% | 100.0% | 1 |" in capsys.readouterr().out


def test_cli_on_a_sweep_prints_the_leaderboard(sweep_dir, capsys):
    assert main([str(sweep_dir)]) == 0
    out = capsys.readouterr().out
    assert "| 2 | model.path=checkpoint-1500 | checkpoint-1500 | 1500 | all |  |" in out and "CUDA out of memory" in out
    assert str(sweep_dir / "leaderboard.png") in out


@pytest.mark.parametrize("make", [lambda p: p, lambda p: p / "missing"], ids=["empty_dir", "no_such_dir"])
def test_cli_refuses_other_folders(tmp_path, capsys, make):
    assert main([str(make(tmp_path))]) == 2
    assert "is neither a run dir (no samples.parquet) nor a sweep dir" in capsys.readouterr().err


def test_regrade_run_needs_samples(tmp_path):
    with pytest.raises(GradingError, match="holds no samples.parquet"):
        regrade_run(tmp_path)


def test_old_tables_of_other_benchmarks_are_refused_with_the_fix():
    """Old PEToolBench tables (no scorer column) re-grade as before; old FamilyTool or
    ToolSpectrum tables lack what their scorers read, and say how to get a new one."""
    from grading.grades import grade
    from grading.scoring import scorer_of

    old = make_samples({"p": ["call"]}).drop("scorer")
    assert scorer_of(old).name == "petoolbench" and grade(old)["official_call_ok"].to_list() == [True]
    with pytest.raises(GradingError, match="predates per-benchmark scorers"):
        scorer_of(old.with_columns(pl.lit("whole_json").alias("official_parser")))


def test_regrade_keeps_a_scorers_subset_rows(tmp_path):
    """ETAPP declares its `clean` subset: the re-graded metrics have the /clean rows the run had."""
    from grading.grades import grade
    from tests.grading.conftest import etapp_case, etapp_points, etapp_table

    points = etapp_points([2], [1])
    cases = [etapp_case("tg-0", "tool_given/fc", (4, 3, 2), points, (3, 2, 2, 0, 0), "finish", ["t1"], ["t1"]),
             etapp_case("tg-1", "tool_given/fc", (2, 5, 4), points, (5, 2, 1, 1, 2), "turn_cap", ["t1"], [],
                        clean=False)]
    run = write_run(tmp_path / "run", grade(etapp_table(cases)))
    before = pl.read_parquet(run / "metrics.parquet")
    metrics, _ = regrade_run(run)
    assert metrics["setting"].to_list() == ["tool_given/fc", "tool_given/fc/clean", "all", "all/clean"]
    assert metrics.equals(before) and pl.read_parquet(run / "metrics.parquet").equals(before)
    assert "| all/clean | judge | 1 |" in (run / "metrics.md").read_text(encoding="utf-8")
    assert "all/clean" in (run / "report.html").read_text(encoding="utf-8")


def test_a_run_is_graded_and_reported_with_its_scorer_looked_up_once(tmp_path, monkeypatch):
    """write_graded (a run's end, `toolsweep grade`, a merge) resolves the scorer its rows name once
    and hands it to grading, metrics, slices and the reports."""
    import grading.scoring
    from grading.outputs import write_graded

    samples, looked_up = make_samples(OUTCOMES), []
    real = grading.scoring.get_scorer
    monkeypatch.setattr(grading.scoring, "get_scorer", lambda name: looked_up.append(name) or real(name))
    (tmp_path / "run").mkdir()
    _, metrics, scorer = write_graded(samples, tmp_path / "run", RUN_FACTS)
    assert looked_up == ["petoolbench"] and scorer.name == "petoolbench"
    assert pl.read_parquet(tmp_path / "run" / "metrics.parquet").equals(metrics)
