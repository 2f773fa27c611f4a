"""Multirun sweeps: one process per job, failed jobs recorded, leaderboard, SLURM via submitit locally."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import inference.cli  # noqa: F401  (registers the config schema, as the entry point does)
from inference.gold import gold_outputs, write_predictions
from inference.benchmarks.petoolbench import load_petoolbench
from inference.sweep import checkpoint_dirs, checkpoint_step, failure_reason, visible_devices
from tests.conftest import REPO, SAMPLE, tiny_args
from tests.warm import toolsweep


def run_sweep(sweep_dir: Path, overrides: list[str], env=None, timeout=1500) -> subprocess.CompletedProcess:
    return toolsweep(["-m", f"hydra.sweep.dir={sweep_dir}", *overrides], env, timeout)


def linked_copy(model: Path, target: Path) -> Path:
    """A second model folder without copying 260 MB: one symlink per file."""
    target.mkdir(parents=True)
    for f in model.iterdir():
        (target / f.name).symlink_to(f)
    return target


@pytest.mark.parametrize("name,step", [("checkpoint-500", 500), ("step_20", 20), ("global_step7", 7),
                                       ("final", None)], ids=["hf_trainer", "step_underscore", "global_step", "none"])
def test_checkpoint_step(name, step):
    assert checkpoint_step(Path("/runs/x") / name) == step


def test_checkpoint_dirs_are_ordered_by_step(tmp_path):
    for step in (1000, 50, 200):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "config.json").write_text("{}")
    (tmp_path / "checkpoint-9").mkdir()  # no config.json: not a checkpoint
    assert [p.name for p in checkpoint_dirs(tmp_path)] == ["checkpoint-50", "checkpoint-200", "checkpoint-1000"]


def test_visible_devices_assigns_slots(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    assert [visible_devices(k, 1) for k in range(5)] == ["0", "1", "2", "3", "0"]
    assert [visible_devices(k, 2) for k in range(3)] == ["0,1", "2,3", "0,1"]
    assert visible_devices(0, 8) is None


@pytest.mark.parametrize("code,log,reason", [
    (2, "noise\ntoolsweep: error: invalid configuration:\n  model.path 'x' is bad\n  dataset.limit bad\nafter",
     "invalid configuration: model.path 'x' is bad dataset.limit bad"),
    (-9, "Processed prompts: 40%", "killed by SIGKILL (out of memory? the kernel's OOM killer sends SIGKILL)"),
    (1, "Traceback\nRuntimeError: CUDA out of memory", "RuntimeError: CUDA out of memory"),
], ids=["toolsweep_error", "sigkill", "traceback"])
def test_failure_reason(code, log, reason):
    assert failure_reason(code, log) == reason


@pytest.mark.vllm
def test_a_sweep_over_quantization_records_and_compares_its_jobs_and_keeps_a_failed_one(tmp_path, tiny_model,
                                                                                          scratch_env):
    """`-m model.quantization=null,fp8_per_channel,fp8` with an fp8 KV cache on vLLM's CPU build, the
    model in a folder named checkpoint-200. Two jobs complete with valid rows and record what they
    ran at (run.json, report, cache key: job 1 reuses nothing of job 0); fp8 has no CPU kernel and
    is refused before loading: a failed job with its reason. The leaderboard holds every job x
    setting x parser, the step from the folder's name, the configurations apart; compare pairs the
    two by sample. The tiny seeded model: the sweep's bookkeeping is the subject."""
    from inference.hardware import cpu_info

    model = linked_copy(tiny_model, tmp_path / "ckpts" / "checkpoint-200")
    sweep = tmp_path / "sweep"
    # vLLM's CPU build has an fp8 KV cache only on x86 with AVX-512 or AMX ("FP8 KV cache on CPU
    # requires x86 with AVX-512 or AMX"); elsewhere the sweep runs with the default KV cache
    kv = "fp8" if {"avx512f", "amx_tile"} & set(cpu_info()["flags"]) else "auto"
    done = run_sweep(sweep, [*tiny_args(model), "dataset.limit=1", "dataset.settings=[p,r]",
                             "model.quantization=null,fp8_per_channel,fp8", f"engine.kv_cache_dtype={kv}"],
                     env=scratch_env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    jobs = [json.loads((sweep / str(k) / "job.json").read_text()) for k in range(3)]
    assert [j["status"] for j in jobs] == ["complete", "complete", "failed"]
    assert "model.quantization=fp8 does not run on vLLM's CPU build" in jobs[2]["reason"]
    assert "Initializing a V1 LLM engine" not in (sweep / "2" / "job.log").read_text(), "refused before loading"
    for k, quantization in ((0, None), (1, "fp8_per_channel")):
        facts = json.loads((sweep / str(k) / "run.json").read_text())
        assert (facts["model"]["quantization"], facts["model"]["kv_cache_dtype"]) == (quantization, kv)
        samples = pl.read_parquet(sweep / str(k) / "samples.parquet")
        assert samples.height == 2 and samples["output_tokens"].min() > 0 and samples["error"].is_null().all()
        assert f"{quantization or 'none'}{' (model.quantization)' if quantization else ''}; KV cache {kv}" in \
            (sweep / str(k) / "report.html").read_text()
    assert json.loads((sweep / "1" / "run.json").read_text())["generation"]["stored_hits"] == 0, \
        "the quantization is part of the cache key: job 1 generated its own answers"
    board = pl.read_parquet(sweep / "leaderboard.parquet")
    complete = board.filter(status="complete")
    assert complete.select("job", "setting", "parser").sort("job", "setting", "parser").rows() == sorted(
        (j, s, p) for j in (0, 1) for s in ("p", "r", "all") for p in ("official", "json"))
    assert board.filter(status="failed")["reason"].str.contains("does not run on vLLM's CPU build").all()
    assert board["step"].unique().to_list() == [200]
    table = (sweep / "leaderboard.md").read_text()
    assert all(f"| {k} | model.quantization={q} |" in table for k, q in enumerate(("null", "fp8_per_channel", "fp8")))
    assert (sweep / "leaderboard.png").is_file()
    compared = subprocess.run([sys.executable, "-m", "grading.compare", str(sweep / "0"), str(sweep / "1")],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
    assert compared.returncode == 0, compared.stderr
    assert "| all | official | tool_acc | 2 |" in compared.stdout, "paired on the samples both hold"


def test_a_configuration_error_every_job_shares_is_said_once_before_any_job_starts(tmp_path):
    sweep = tmp_path / "sweep"
    done = run_sweep(sweep, ["+sweep.race=true", "engine=replay", "engine.predictions=a.jsonl,b.jsonl"], timeout=300)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.count("sweep is not an option here") == 1, done.stderr
    assert "toolsweep: error: every job of this sweep has this configuration error, so none was started" in done.stderr
    assert not sweep.exists(), "no job started"


def test_a_sweep_whose_jobs_all_fail_exits_non_zero_after_writing_its_board(tmp_path):
    """Each job's own error (a different missing file each): the jobs run and fail, the board and report
    of the failures are written, and the sweep exits 1 saying no job completed."""
    sweep = tmp_path / "sweep"
    done = run_sweep(sweep, ["engine=replay", f"engine.predictions={tmp_path}/a.jsonl,{tmp_path}/b.jsonl",
                             "dataset.settings=[p]"], timeout=300)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"toolsweep: error: no job of this sweep completed (2 failed; their reasons are in {sweep}" in done.stderr
    assert (sweep / "leaderboard.md").is_file() and (sweep / "report.html").is_file()
    assert [json.loads((sweep / str(k) / "job.json").read_text())["status"] for k in (0, 1)] == ["failed", "failed"]


def _empty_predictions(path: Path) -> Path:
    """Every sample answered with nothing: the run writes its samples, then fails on max_error_rate."""
    gold = gold_outputs(load_petoolbench(SAMPLE, ["p"]))
    return write_predictions(gold.with_columns(pl.lit("").alias("output")), path)


def test_a_sweep_whose_first_job_failed_after_writing_samples_compares_nothing_with_it(tmp_path):
    """Job 0 wrote samples.parquet and failed (every output empty): it is failed on the board, no job
    is compared with it, and the report says which job failed."""
    empty = _empty_predictions(tmp_path / "empty.jsonl")
    full = write_predictions(gold_outputs(load_petoolbench(SAMPLE, ["p"])), tmp_path / "full.jsonl")
    sweep = tmp_path / "sweep"
    done = run_sweep(sweep, ["engine=replay", f"engine.predictions={empty},{full}", "dataset.settings=[p]"], timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "raised" not in done.stdout + done.stderr, (done.stdout + done.stderr)[-2000:]
    assert (sweep / "0" / "samples.parquet").is_file()
    assert json.loads((sweep / "0" / "job.json").read_text())["status"] == "failed"
    board = pl.read_parquet(sweep / "leaderboard.parquet").unique("job").sort("job")
    assert board["status"].to_list() == ["failed", "complete"]
    assert not (sweep / "against_first.parquet").exists(), "a failed job 0 is no baseline"
    report = (sweep / "report.html").read_text(encoding="utf-8")
    assert "1 failed (job 0)" in report and "job 0 did not complete" in report


def test_a_sweep_whose_jobs_all_failed_after_writing_samples_exits_non_zero_with_its_report(tmp_path):
    """Both jobs wrote samples and failed: the board and the report of the failures are written and
    the sweep exits 1, as when no job wrote anything."""
    predictions = [_empty_predictions(tmp_path / f"empty_{k}.jsonl") for k in (0, 1)]
    sweep = tmp_path / "sweep"
    done = run_sweep(sweep, ["engine=replay", f"engine.predictions={predictions[0]},{predictions[1]}",
                             "dataset.settings=[p]"], timeout=300)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"toolsweep: error: no job of this sweep completed (2 failed; their reasons are in {sweep}" in done.stderr
    assert "raised" not in done.stdout + done.stderr, (done.stdout + done.stderr)[-2000:]
    assert not (sweep / "against_first.parquet").exists()
    assert "2 failed (jobs 0, 1)" in (sweep / "report.html").read_text(encoding="utf-8")


def test_a_sweep_over_checkpoint_paths_with_spaces_names_groups_and_records_them_whole(tmp_path):
    """model.path=my\\ runs/checkpoint-100,my\\ runs/checkpoint-200 (Hydra's escape, as a shell passes
    it in quotes): the board names each job by its checkpoint, export makes one series with a point
    per step, and job.json, run.json and the board hold the real path."""
    from grading.export import export_series

    full = write_predictions(gold_outputs(load_petoolbench(SAMPLE, ["p"])), tmp_path / "full.jsonl")
    folders = [tmp_path / "my runs" / f"checkpoint-{step}" for step in (100, 200)]
    for folder in folders:
        folder.mkdir(parents=True)
    swept = ",".join(str(f).replace(" ", "\\ ") for f in folders)
    sweep = tmp_path / "sweep"
    done = run_sweep(sweep, ["engine=replay", f"engine.predictions={full}", f"model.path={swept}",
                             "dataset.settings=[p]"], timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    table = (sweep / "leaderboard.md").read_text()
    assert "| 0 | model.path=checkpoint-100 | checkpoint-100 | 100 |" in table, table
    assert "| 1 | model.path=checkpoint-200 | checkpoint-200 | 200 |" in table, table
    board = pl.read_parquet(sweep / "leaderboard.parquet").unique("job").sort("job")
    assert board["model_path"].to_list() == [str(f) for f in folders]
    for job, folder in enumerate(folders):
        assert json.loads((sweep / str(job) / "job.json").read_text())["model_path"] == str(folder)
        assert json.loads((sweep / str(job) / "run.json").read_text())["model"]["path"] == str(folder)
    series = export_series(sweep)
    assert len(series) == 1 and [p.step for p in series[0].points] == [100, 200], [s.name for s in series]


def test_a_sweep_end_that_cannot_write_its_board_exits_non_zero(tmp_path, monkeypatch, capsys):
    """Hydra turns an exception in a callback into a warning and exit 0: the sweep's end says what
    went wrong and exits 1 instead."""
    from types import SimpleNamespace

    import grading.leaderboard
    from inference.sweep import LeaderboardCallback

    def broken(sweep_dir):
        raise ValueError("a broken board")

    monkeypatch.setattr(grading.leaderboard, "write_leaderboard", broken)
    config = SimpleNamespace(hydra=SimpleNamespace(sweep=SimpleNamespace(dir=str(tmp_path))))
    with pytest.raises(SystemExit) as ended:
        LeaderboardCallback().on_multirun_end(config)
    assert ended.value.code == 1
    assert f"toolsweep: error: the sweep's board and report in {tmp_path} could not be written: ValueError: " \
           "a broken board" in capsys.readouterr().err


def test_slurm_launcher_config_runs_through_submitit_local(tmp_path):
    """The SLURM launcher's settings, run by submitit's local executor, on two replay jobs."""
    gold = gold_outputs(load_petoolbench(SAMPLE, ["p"]))
    full = write_predictions(gold, tmp_path / "full.jsonl")
    half = write_predictions(gold.head(5), tmp_path / "half.jsonl")
    sweep = tmp_path / "sweep"
    done = run_sweep(sweep, ["hydra/launcher=slurm_local", "engine=replay", f"engine.predictions={full},{half}",
                             "dataset.settings=[p]"], timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (sweep / ".submitit").is_dir()
    board = pl.read_parquet(sweep / "leaderboard.parquet").filter(setting="p", parser="official")
    assert board.sort("job")["tool_acc"].to_list() == [1.0, 0.5]
    # each job against the first, paired by sample, as a guard benchmark is read
    against = pl.read_parquet(sweep / "against_first.parquet").filter(setting="p", metric="tool_acc")
    assert against.select("job", "n", "acc_a", "acc_b", "a_only", "b_only").row(0) == (1, 10, 1.0, 0.5, 5, 0)
    assert against["p_value"][0] == pytest.approx(2 * 0.5**5) and against["verdict"][0] == "worse"
    assert "<h2>Against the first job</h2>" in (sweep / "report.html").read_text()


def test_slurm_config_composes_with_gpus_per_task_from_tensor_parallel():
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["hydra/launcher=slurm", "model.tensor_parallel_size=4"],
                      return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert launcher.gpus_per_node == 4 and launcher.cpus_per_task == 16 and launcher.array_parallelism == 64


def _job_facts(sweep: Path, job: int) -> dict:
    return json.loads((sweep / str(job) / "run.json").read_text())["generation"]


@pytest.mark.vllm
def test_a_killed_sweep_rerun_into_its_dir_keeps_resumes_and_runs(tmp_path, tiny_model, scratch_env):
    """The paper's Figure 5 as one multirun (full, no and the last 3 history items; 2 records x 3
    settings), killed during job 1 (after its first shard) and rerun into the same sweep dir: job 0
    is kept (no process, no engine call), job 1 resumes from its shard, job 2 runs; the leaderboard
    equals that of an uninterrupted sweep (served from the cache the first two filled), names the
    ablation, and the report charts it with the jobs' own numbers. The tiny seeded model: what is
    checked is the sweep's bookkeeping and the prompts' lengths, not the answers."""
    import os
    import signal

    from inference.models import cache_root

    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "models").symlink_to(cache_root() / "models", target_is_directory=True)
    env = {**scratch_env, "TOOLSWEEP_CACHE": str(cache), "TOOLSWEEP_PAUSE_AT": "shard 2/6: generating",
           "TOOLSWEEP_PAUSE_S": "3"}
    args = [*tiny_args(tiny_model), "dataset.history=full,none,last_k", "dataset.history_k=3",
            "dataset.limit=2", "engine.shard_size=1", "decoding.constraint=none"]
    sweep = tmp_path / "sweep"
    command = [sys.executable, "-m", "inference.cli", "-m", f"hydra.sweep.dir={sweep}", *args]
    parent = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, start_new_session=True)
    job0_done = False
    for line in parent.stdout:
        job0_done = job0_done or line.startswith("[toolsweep] job 0/3: complete")
        if job0_done and "shard 2/6: generating" in line:
            break
    os.killpg(parent.pid, signal.SIGKILL)
    parent.wait()
    assert job0_done and (sweep / "1" / "parts" / "part-00000.parquet").is_file()
    assert not (sweep / "2").exists() and not (sweep / "1" / "job.json").exists()
    job0_log = (sweep / "0" / "job.log").stat().st_mtime_ns

    done = run_sweep(sweep, args, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "[toolsweep] job 0/3: complete (kept from an earlier run of this sweep)" in done.stdout
    assert (sweep / "0" / "job.log").stat().st_mtime_ns == job0_log, "job 0 was not run again"
    assert re.search(r"\[toolsweep\] job 2/3: complete in [\d.]+ s tool_acc [\d.]+%", done.stdout), done.stdout
    assert _job_facts(sweep, 1)["engine_calls"] == 5 and _job_facts(sweep, 1)["stored_hits"] == 1
    assert _job_facts(sweep, 2)["engine_calls"] == 6

    fresh = tmp_path / "uninterrupted"
    again = run_sweep(fresh, args, env={**env, "TOOLSWEEP_PAUSE_AT": ""})
    assert again.returncode == 0, again.stdout[-3000:]
    speeds = ["prompts_per_s", "output_tokens_per_s"]
    resumed = pl.read_parquet(sweep / "leaderboard.parquet").drop(speeds)
    assert resumed.equals(pl.read_parquet(fresh / "leaderboard.parquet").drop(speeds))
    assert resumed["status"].unique().to_list() == ["complete"]
    _check_history_ablation(sweep)


def _check_history_ablation(sweep: Path) -> None:
    from grading.scoring import format_value, get_scorer, metric_by_name

    board = pl.read_parquet(sweep / "leaderboard.parquet")
    assert board.unique("job").sort("job")["ablation"].to_list() == ["full", "none", "last_3"]
    assert "| history |" in (sweep / "leaderboard.md").read_text().splitlines()[0]
    report = (sweep / "report.html").read_text(encoding="utf-8")
    assert "history ablation" in report and "dataset.history=none" in report
    tool_acc = metric_by_name(get_scorer("petoolbench"), "tool_acc")
    for job in range(3):
        metrics = pl.read_parquet(sweep / str(job) / "metrics.parquet")
        pooled = metrics.filter((pl.col("setting") == "all") & (pl.col("parser") == "official")).row(0, named=True)
        assert pooled["n"] == 6
        shown = format_value(tool_acc, pooled["tool_acc"])
        assert shown in report and shown in (sweep / str(job) / "report.html").read_text(encoding="utf-8")
    prompts = [pl.read_parquet(sweep / str(j) / "samples.parquet")["prompt_tokens"].sum() for j in range(3)]
    assert prompts[0] > prompts[2] > prompts[1], "the ablations shorten the prompts"

