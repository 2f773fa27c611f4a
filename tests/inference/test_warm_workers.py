"""Warm workers: a local sweep's jobs with one engine run back to back on one process that keeps it,
with outputs equal to one cold process per job; a killed worker costs its job, not the sweep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from hydra_plugins.toolsweep_launcher.warm_launcher import engine_order
from inference.workers import DONE, WORKER_NAME, Worker, compatible
from tests.processes import named
from tests.warm import toolsweep
from tests.conftest import REPO, tiny_args


@pytest.mark.parametrize("keys,order", [
    (["a", "a", "b"], [0, 1, 2]),
    (["a", "b", "a", "b"], [0, 2, 1, 3]),
    (["", "a", "", "b", ""], [0, 1, 2, 3, 4]),
    (["a", "", "b", "a"], [0, 1, 3, 2]),
    (["", ""], [0, 1]),
], ids=["grouped_already", "interleaved_seeds", "engine_free_jobs_stay_in_place",
        "engine_free_follows_its_group", "no_engine_at_all"])
def test_jobs_with_one_engine_run_back_to_back(keys, order):
    assert engine_order(keys) == order


@pytest.mark.parametrize("keys,shapes,order", [
    (["a", "b", "a", "b"], ["s", "s", "s", "s"], [0, 2, 1, 3]),
    (["a", "c", "b", "a"], ["s", "t", "s", "s"], [0, 3, 2, 1]),
    (["a", "b", "c"], ["a", "b", "c"], [0, 1, 2]),
    (["", "a", "c", "b"], ["", "s", "t", "s"], [0, 1, 3, 2]),
], ids=["datasets_of_each_checkpoint_together", "shapes_follow_each_other", "no_shape_shared", "engine_free_first"])
def test_checkpoints_of_one_shape_follow_each_other_each_one_s_jobs_together(keys, shapes, order):
    assert engine_order(keys, shapes) == order


@pytest.mark.parametrize("held,wanted,fits", [
    (None, "", False), ("", "", True), ("", "k", True), ("k", "", True), ("k", "k", True), ("k", "j", False)],
    ids=["no_worker", "no_engine", "first_engine", "engine_free_job", "same_engine", "other_engine"])
def test_a_worker_takes_a_job_its_engine_fits(held, wanted, fits):
    assert compatible(held, wanted) is fits


def test_a_job_end_marker_split_across_reads_is_found(tmp_path, capfdbinary):
    """The worker's output is read in chunks; the end of a job's output may straddle two."""
    script = ("import sys, time\nout = sys.stdout.buffer\nmarker = %r\n"
              "out.write(b'one\\r two ' + marker[:7]); out.flush(); time.sleep(0.2)\n"
              "out.write(marker[7:] + b'{\"returncode\": 3, \"healthy\": true}\\nnext'); out.flush()\n"
              "sys.stdin.read()\n") % DONE
    worker = Worker.__new__(Worker)
    worker.process = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    worker._pending = b""
    with open(tmp_path / "job.log", "wb") as log:
        assert worker._stream(log) == {"returncode": 3, "healthy": True}
    assert (tmp_path / "job.log").read_bytes() == b"one\r two "
    assert worker._pending == b"next"
    worker.process.stdin.close()
    worker.process.wait()


def _sweep(sweep: Path, args: list[str], env: dict[str, str]) -> subprocess.Popen:
    command = [sys.executable, "-m", "inference.cli", "-m", f"hydra.sweep.dir={sweep}", *args]
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _warm_sweep(sweep: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """A sweep that no test step interrupts, run as tests/warm.py runs commands."""
    return toolsweep(["-m", f"hydra.sweep.dir={sweep}", *args], env)


def _worker_pids(parent: int) -> list[int]:
    return named(parent, WORKER_NAME)


def _job(sweep: Path, number: int) -> tuple[dict, dict, pl.DataFrame]:
    job = json.loads((sweep / str(number) / "job.json").read_text())
    if job["status"] != "complete":
        return job, {}, pl.DataFrame()
    run = json.loads((sweep / str(number) / "run.json").read_text())
    samples = pl.read_parquet(sweep / str(number) / "samples.parquet").select("sample_id", "output").sort("sample_id")
    return job, run, samples


def test_a_warm_sweep_equals_a_cold_one_and_survives_a_killed_worker(tmp_path, tiny_model, scratch_env):
    """Four jobs (two settings x two seeds, the seed varying fastest): the two jobs of each seed's
    engine run back to back on one worker (0, 2, then 1, 3), the second on the engine the first
    loaded. The worker is killed with SIGKILL during job 2: that job fails and the sweep goes on;
    rerun into its dir, the sweep keeps the others and resumes job 2 on a fresh worker. Every job's
    outputs equal those of the same jobs with reuse_engine=false (one cold process per job). The
    tiny seeded model samples at temperature 1, so that the seed, and so the engine, matters."""
    env = {**scratch_env, "TOOLSWEEP_PAUSE_AT": "shard 1/1: generating", "TOOLSWEEP_PAUSE_S": "2"}
    args = [*tiny_args(tiny_model), "dataset.settings=[p],[r]", "decoding.seed=0,1", "decoding.temperature=1.0",
            "dataset.limit=2", "engine.cache=false"]
    warm = tmp_path / "warm"
    parent = _sweep(warm, args, env)
    lines: list[str] = []
    for line in parent.stdout:
        lines.append(line)
        if "shard 1/1: generating" in line and any("#2 :" in seen for seen in lines) and not any(
                "#1 :" in seen for seen in lines):
            pids = _worker_pids(parent.pid)
            assert len(pids) == 1, pids
            os.kill(pids[0], signal.SIGKILL)
    out = "".join(lines)
    assert parent.wait() == 0, out[-3000:]
    order = [int(line.split("#", 1)[1].split(" ")[0]) for line in lines if "] \t#" in line]
    assert order == [0, 2, 1, 3], out[-3000:]
    jobs = {n: _job(warm, n) for n in range(4)}
    assert jobs[0][0]["worker"] == "fresh" and jobs[0][1]["roles"]["model"]["engine_start"]["how"] == "cold"
    assert jobs[2][0]["worker"] == "warm"
    assert jobs[2][0]["status"] == "failed" and "SIGKILL" in jobs[2][0]["reason"], jobs[2][0]
    assert jobs[1][0]["worker"] == "fresh" and jobs[1][1]["roles"]["model"]["engine_start"]["how"] == "cold"
    assert jobs[3][0]["worker"] == "warm" and jobs[3][1]["roles"]["model"]["engine_start"]["how"] == "reused"

    # The rerun and the reference need no live process of their own (nothing is killed): they run
    # as the tests' other commands do, on this pytest process's warm command worker (tests/warm.py),
    # which keeps its preloaded template for the rerun's fresh worker. Their jobs still get fresh
    # workers (rerun) or new processes of their own (reuse_engine=false), which the assertions below check.
    rerun = _warm_sweep(warm, args, {**env, "TOOLSWEEP_PAUSE_AT": ""})
    again = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, again[-3000:]
    for number in (0, 1, 3):
        assert f"job {number}/4: complete (kept" in again, again[-3000:]
    assert _job(warm, 2)[0]["status"] == "complete" and _job(warm, 2)[0]["worker"] == "fresh"

    # the cold reference of the jobs whose outputs came from a reused engine (3) or from the fresh
    # worker after the kill (2): the same jobs, one new process each
    cold = tmp_path / "cold"
    cold_args = [arg.replace("[p],[r]", "[r]") for arg in args]
    reference = _warm_sweep(cold, [*cold_args, "hydra.launcher.reuse_engine=false"], {**env, "TOOLSWEEP_PAUSE_AT": ""})
    said = reference.stdout + reference.stderr
    assert reference.returncode == 0, said[-3000:]
    for number, warm_number in ((0, 2), (1, 3)):
        job, run, samples = _job(cold, number)
        assert job["worker"] is None and run["roles"]["model"]["engine_start"]["how"] == "cold"
        assert samples.height == 2 and samples.equals(_job(warm, warm_number)[2]), warm_number
    # the two seeds answer differently: a job given the other seed's engine would show
    assert not _job(cold, 0)[2].equals(_job(cold, 1)[2])


def _checkpoints(root: Path, tiny_model: Path) -> dict[str, Path]:
    """Four checkpoints of the tiny model's shape: two trainings steps (other weights), one whose
    weights file was cut short, one whose config changes its outputs (rope_theta)."""
    import shutil

    from inference.models import prepare_tiny_model

    made = {"a": root / "step-100", "b": root / "step-200", "cut": root / "step-300", "rope": root / "step-400"}
    shutil.copytree(tiny_model, made["a"])
    prepare_tiny_model(made["b"], seed=1)
    shutil.copytree(made["b"], made["cut"])
    weights = made["cut"] / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    shutil.copytree(made["b"], made["rope"])
    config = json.loads((made["rope"] / "config.json").read_text())
    config["rope_parameters"] = {**(config.get("rope_parameters") or {}), "rope_theta": 500.0}
    (made["rope"] / "config.json").write_text(json.dumps(config))
    return made


@pytest.mark.vllm
def test_a_checkpoint_sweep_swaps_weights_in_place_and_equals_cold_engines(tmp_path, tiny_model, scratch_env):
    """model.path over four checkpoints: the second training step's weights are read into the
    first's engine (swapped); the one whose config differs gets a fresh worker, the reason said;
    the cut-short one too, and fails alone; the swapped job's answers equal a cold engine's."""
    made = _checkpoints(tmp_path / "ckpts", tiny_model)
    swept = ",".join(str(made[name]) for name in ("a", "b", "rope", "cut"))
    args = [*tiny_args(tiny_model), f"model.path={swept}", "dataset.settings=[p]", "dataset.limit=2",
            "engine.cache=false"]
    warm = tmp_path / "warm"
    done = _warm_sweep(warm, args, scratch_env)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]  # one failed job does not fail the sweep
    jobs = {n: _job(warm, n) for n in range(4)}
    assert jobs[0][1]["roles"]["model"]["engine_start"]["how"] == "cold"
    assert jobs[1][0]["worker"] == "warm" and jobs[1][1]["roles"]["model"]["engine_start"]["how"] == "swapped"
    assert jobs[2][0]["status"] == "complete" and jobs[2][0]["worker"] == "fresh"
    assert jobs[2][1]["roles"]["model"]["engine_start"]["how"] == "cold"
    assert "rope_theta" in jobs[2][0]["fresh_worker_because"] and "rope_theta" in out, jobs[2][0]
    assert jobs[2][1]["roles"]["model"]["engine_start"]["fresh_worker_because"] == jobs[2][0]["fresh_worker_because"]
    assert "fresh_worker_because" not in jobs[1][1]["roles"]["model"]["engine_start"]
    assert jobs[3][0]["status"] == "failed" and jobs[3][0]["worker"] == "fresh", jobs[3][0]
    assert "truncated" in jobs[3][0]["fresh_worker_because"], jobs[3][0]

    cold = tmp_path / "cold"
    reference = _warm_sweep(cold, [*tiny_args(tiny_model), f"model.path={made['b']}", "dataset.settings=[p]",
                                   "dataset.limit=2", "engine.cache=false", "hydra.launcher.reuse_engine=false"],
                            scratch_env)
    said = reference.stdout + reference.stderr
    assert reference.returncode == 0, said[-3000:]
    assert _job(cold, 0)[0]["worker"] is None, "the reference ran on a worker, not in a new process"
    assert _job(cold, 0)[2].equals(jobs[1][2]), "the swapped-in checkpoint answered otherwise than a cold engine"
    assert not jobs[0][2].equals(jobs[1][2]), "the two steps answer alike: the comparison would prove nothing"


def _job_config(overrides: list[str]):
    import warnings

    from hydra import compose, initialize_config_dir

    import inference.cli  # noqa: F401 - registers the config schema and resolvers

    with warnings.catch_warnings(), initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        warnings.simplefilter("ignore")
        return compose("config", overrides=overrides)


def test_adapters_of_one_base_share_a_worker_and_other_bases_do_not(tmp_path, tiny_model):
    from inference.workers import engine_key

    def keys(base: Path, adapter: str) -> tuple[str, str]:
        config = _job_config([*tiny_args(base), f"model.lora={tmp_path / adapter}"])
        return engine_key(config), engine_key(config, swap=True)

    other = tmp_path / "other-base"
    other.mkdir()
    exact_a, shared_a = keys(tiny_model, "a")
    exact_b, shared_b = keys(tiny_model, "b")
    assert exact_a != exact_b and shared_a == shared_b  # one engine, one LoRA request per job
    assert keys(other, "a")[1] != shared_a               # another base model: another engine


@pytest.mark.parametrize("overrides,launcher,fork", [
    (["model=local", "model.path=/models/step-100"], "hydra_plugins.toolsweep_launcher.warm_launcher.WarmLauncher", True),
    (["engine=replay", "engine.predictions=answers.jsonl"], "hydra_plugins.toolsweep_launcher.warm_launcher.WarmLauncher",
     False),
    (["engine=script", "engine.script=moves.jsonl"], "hydra_plugins.toolsweep_launcher.warm_launcher.WarmLauncher", False),
    (["model=local", "model.path=/models/step-100"], "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
     False),
], ids=["vllm_local", "replay_local", "script_local", "vllm_one_job_per_process"])
def test_a_cold_job_is_forked_from_the_template_only_where_it_loads_a_model_beside_other_jobs(overrides, launcher, fork):
    """reuse_engine=false: where the sweep's process runs every job, a job that loads weights forks
    from its preloaded template (the imports once for the sweep); a job that loads none, or the one
    job of a task's process, is a new interpreter (a template would import for that job alone)."""
    from inference.sweep import fork_job

    assert fork_job(_job_config(overrides), {"_target_": launcher}) is fork
