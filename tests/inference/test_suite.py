"""A sweep over several benchmarks: the suite table, its figures and export; suite presets over one data root."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import inference.cli  # noqa: F401  (registers the schema and resolvers, as the entry point does)
from grading.export import export_series
from grading.plots import primary_rows
from grading.scoring import get_scorer
from grading.suite import headline_metric
from inference.benchmarks import load_dataset
from inference.gold import gold_outputs, write_predictions
from inference.sweep import task_jobs
from tests.conftest import REPO, SAMPLE, SHARED_DATA
from tests.inference.test_sweep import run_sweep

CONF = REPO / "conf"
TOOLSPECTRUM = REPO / "datasets" / "toolspectrum_sample"
PERSONAL = ["petoolbench", "familytool", "toolspectrum", "acebench", "etapp"]


def _checkpoints(root: Path) -> list[Path]:
    """Three checkpoints' replayed answers per benchmark: all gold, every third blanked (every fourth
    for ToolSpectrum), every second blanked with no ToolSpectrum file (that job fails)."""
    gold = {"petoolbench": gold_outputs(load_dataset("petoolbench", str(SAMPLE), ["p", "r", "c"])),
            "toolspectrum": gold_outputs(load_dataset("toolspectrum", str(TOOLSPECTRUM),
                                                      ["persona", "environment", "persona_environment"]))}
    plans = {100: {"petoolbench": 0, "toolspectrum": 0}, 200: {"petoolbench": 3, "toolspectrum": 4},
             300: {"petoolbench": 2}}
    folders = []
    for step, blanks in plans.items():
        folder = root / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        for name, every in blanks.items():
            frame = gold[name].with_row_index("_k")
            if every:
                frame = frame.with_columns(pl.when(pl.col("_k") % every == every - 1).then(pl.lit("{}"))
                                           .otherwise(pl.col("output")).alias("output"))
            write_predictions(frame.drop("_k"), folder / f"{name}.jsonl")
        folders.append(folder)
    return folders


def test_a_sweep_over_two_benchmarks_writes_a_suite_table_equal_to_each_jobs_headline(tmp_path):
    """Three checkpoints x two benchmarks, replayed: suite.parquet holds, per checkpoint and benchmark,
    the leaderboard's value and CI of that job's headline metric on the pooled setting under its
    primary reading; the job without answers is failed there; report.html draws one figure per
    benchmark; export carries each benchmark's values under its name."""
    folders = _checkpoints(tmp_path / "ckpts")
    sweep = tmp_path / "sweep"
    done = run_sweep(sweep, ["engine=replay", "engine.predictions=${model.path}/${dataset.name}.jsonl",
                             "model.path=" + ",".join(map(str, folders)), "dataset=sample,toolspectrum_sample"],
                     timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    board = pl.read_parquet(sweep / "leaderboard.parquet")
    suite = pl.read_parquet(sweep / "suite.parquet")
    assert suite["step"].to_list() == [100, 200, 300], "one row per configuration (checkpoint)"
    assert all(" dataset=" not in c for c in suite["configuration"]), "the data overrides are not the configuration"
    compared = 0
    for row in primary_rows(board.filter((pl.col("status") == "complete") & (pl.col("setting") == "all"))) \
            .iter_rows(named=True):
        name = json.loads((sweep / str(row["job"]) / "run.json").read_text())["config"]["dataset"]["name"]
        metric = headline_metric(get_scorer(row["scorer"])).name
        cell = suite.filter(pl.col(f"{name}_job") == row["job"]).row(0, named=True)
        assert (cell[name], cell[f"{name}_low"], cell[f"{name}_high"]) == \
            (row[metric], row[f"{metric}_low"], row[f"{metric}_high"]), (name, row["job"])
        compared += 1
    assert compared == 5
    last = suite.filter(pl.col("step") == 300).row(0, named=True)
    assert (last["toolspectrum_status"], last["toolspectrum"]) == ("failed", None)
    assert suite["petoolbench"].to_list()[0] == 1.0 > suite["petoolbench"].to_list()[1]
    assert suite["petoolbench_best"].to_list() == [True, False, False]
    table = (sweep / "suite.md").read_text()
    assert "| petoolbench: tool_acc, official |" in table and "failed (job 5)" in table
    assert "**100.0% [100.0, 100.0]**" in table, "the best per column in bold"
    report = (sweep / "report.html").read_text()
    assert report.index("<h2>Suite</h2>") < report.index("<h2>Leaderboard</h2>"), "the suite comes first"
    assert 'id="figure-suite-0"' in report and 'id="figure-suite-1"' in report, "one figure per benchmark"
    [series] = export_series(sweep)
    assert [p.step for p in series.points] == [100, 200, 300], "one series: the configuration over both benchmarks"
    first = series.points[0].values
    assert first["petoolbench/all/official/tool_acc"] == 1.0 and "toolspectrum/all/official/app_f1" in first
    assert "toolspectrum/all/official/app_f1" not in series.points[2].values, "the failed job has no point"


def test_a_sweep_over_one_benchmark_has_no_suite_table(tmp_path):
    sweep = tmp_path / "sweep"
    folders = _checkpoints(tmp_path / "ckpts")[:2]
    done = run_sweep(sweep, ["engine=replay", "engine.predictions=${model.path}/${dataset.name}.jsonl",
                             "model.path=" + ",".join(map(str, folders))], timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not (sweep / "suite.parquet").exists() and "<h2>Suite</h2>" not in (sweep / "report.html").read_text()


def _suite_jobs(overrides: list[str]) -> list[tuple[str, str]]:
    """(benchmark, dataset.path) of every job a preset's sweep would run, as the sweep expands it."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        config = compose(config_name="config", overrides=overrides, return_hydra_config=True)
        jobs = task_jobs(config)
        assert jobs is not None
        found = []
        for job in jobs:
            composed = compose(config_name="config", overrides=job)
            found.append((composed.dataset.name, str(composed.dataset.path)))
    return found


@pytest.mark.parametrize("suite,expected", [("personal", PERSONAL), ("general", ["bfcl"]),
                                            ("all", [*PERSONAL, "bfcl"])], ids=["personal", "general", "all"])
def test_a_suite_preset_composes_one_job_per_benchmark_under_the_data_root(suite, expected, tmp_path):
    jobs = _suite_jobs([f"+suite={suite}", f"data_root={tmp_path}", "model.path=/models/x"])
    assert [name for name, _ in jobs] == expected
    for name, path in jobs:
        assert path == str(tmp_path / ("bfcl/data" if name == "bfcl" else name))


def test_the_data_root_comes_from_the_environment_and_a_datasets_own_path_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLSWEEP_DATA_ROOT", str(tmp_path))
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        from_env = compose(config_name="config", overrides=["dataset=familytool"])
        own = compose(config_name="config", overrides=["dataset=familytool", "dataset.path=/elsewhere"])
    assert OmegaConf.to_container(from_env, resolve=True)["dataset"]["path"] == str(tmp_path / "familytool")
    assert own.dataset.path == "/elsewhere"


@pytest.mark.skipif(not (SHARED_DATA / "etapp").is_dir(), reason="the shared data folder is absent")
def test_the_personal_suite_finds_every_benchmark_under_the_shared_data_folder():
    for name, path in _suite_jobs(["+suite=personal", f"data_root={SHARED_DATA}"]):
        assert Path(path).exists(), (name, path)


def test_a_missing_benchmark_folder_is_refused_before_any_job_starts(tmp_path):
    """Two of five folders under the root: the sweep stops at once, naming each missing folder and
    the options to set, and makes no sweep dir."""
    root = tmp_path / "data"
    for name in ("petoolbench", "familytool", "toolspectrum"):
        (root / name).mkdir(parents=True)
    sweep = tmp_path / "sweep"
    done = run_sweep(sweep, ["+suite=personal", f"data_root={root}", "engine=replay",
                             f"engine.predictions={tmp_path}/p.jsonl"], timeout=300)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "so no job was started" in done.stderr
    for name in ("acebench", "etapp"):
        assert f"{name}: {root / name} does not exist; set data_root=DIR" in done.stderr, done.stderr
    assert "dataset.path=" in done.stderr and "petoolbench:" not in done.stderr
    assert not sweep.exists(), "no job started"


def test_a_sweep_without_a_data_root_says_how_to_set_one(tmp_path):
    done = run_sweep(tmp_path / "sweep", ["+suite=general", "engine=replay", f"engine.predictions={tmp_path}/p.jsonl"],
                     env={k: v for k, v in os.environ.items() if k != "TOOLSWEEP_DATA_ROOT"}, timeout=300)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "there is no data root to find bfcl/data/ under: set dataset.path=..., or data_root=DIR" in done.stderr
