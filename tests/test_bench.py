"""`make bench`'s warm section reads two sweep dirs; how it pairs jobs, compares their outputs and
times their first generation is checked here on made-up job dirs (no engine)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import polars as pl

from tests.conftest import REPO

BENCH = REPO / "scripts" / "bench.py"


def _bench():
    """scripts/bench.py (a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _job(sweep: Path, number: int, checkpoint: str, dataset: str, outputs: dict[str, str] | None) -> None:
    """A job dir as a sweep leaves it: job.json, and samples.parquet where it completed."""
    job_dir = sweep / str(number)
    job_dir.mkdir(parents=True)
    overrides = [f"model.path=/ckpts/{checkpoint}", f"dataset={dataset}"]
    status = "complete" if outputs is not None else "failed"
    (job_dir / "job.json").write_text(json.dumps({"status": status, "overrides": overrides, "wall_s": 5.0,
                                                  "reason": None if outputs else "exit 1"}))
    if outputs is not None:
        pl.DataFrame({"sample_id": list(outputs), "output": list(outputs.values())}).write_parquet(
            job_dir / "samples.parquet")


def test_outputs_are_compared_job_for_job_by_overrides_not_job_number(tmp_path):
    bench = _bench()
    cold, warm = tmp_path / "cold", tmp_path / "warm"
    _job(cold, 0, "a", "sample", {"s1": "x", "s2": "y"})
    _job(cold, 1, "broken", "sample", None)
    _job(cold, 2, "b", "sample", {"s1": "z"})
    # the warm launcher ran b before the broken checkpoint, and wrote a's rows in another order
    _job(warm, 0, "a", "sample", {"s2": "y", "s1": "x"})
    _job(warm, 1, "b", "sample", {"s1": "z"})
    _job(warm, 2, "broken", "sample", None)
    cold_jobs, warm_jobs = bench.sweep_jobs(cold), bench.sweep_jobs(warm)
    assert bench.same_outputs(cold, warm, cold_jobs, warm_jobs) == {
        "equal": True, "jobs_compared": 2, "differing": [], "complete_in_one_only": []}

    (warm / "1" / "samples.parquet").unlink()
    pl.DataFrame({"sample_id": ["s1"], "output": ["other"]}).write_parquet(warm / "1" / "samples.parquet")
    assert bench.same_outputs(cold, warm, cold_jobs, warm_jobs)["differing"] == ["b/sample"]


def test_a_job_that_completed_in_one_sweep_only_is_not_equal(tmp_path):
    bench = _bench()
    cold, warm = tmp_path / "cold", tmp_path / "warm"
    _job(cold, 0, "a", "sample", {"s1": "x"})
    _job(warm, 0, "a", "sample", None)
    result = bench.same_outputs(cold, warm, bench.sweep_jobs(cold), bench.sweep_jobs(warm))
    assert result == {"equal": False, "jobs_compared": 0, "differing": [], "complete_in_one_only": ["a/sample"]}


def test_time_to_first_generation_runs_from_the_job_start_to_the_first_shard(tmp_path):
    bench = _bench()
    _job(tmp_path, 0, "a", "sample", {"s1": "x"})
    job_dir = tmp_path / "0"
    (job_dir / "run.log").write_text(
        "[2026-12-03 13:39:36,000][toolsweep][INFO] - building prompts\n"
        "[2026-12-03 13:39:37,250][toolsweep][INFO] - shard 1/2: generating 12 requests\n"
        "[2026-12-03 13:39:38,500][toolsweep][INFO] - shard 2/2: generating 12 requests\n")
    ended = bench.log_time("[2026-12-03 13:39:40,000]")  # job.json written 5 s (its wall_s) after the start
    os.utime(job_dir / "job.json", (ended, ended))
    assert abs(bench.to_first_generation(job_dir) - 2.25) < 1e-3

    (job_dir / "run.log").write_text("[2026-12-03 13:39:36,000][toolsweep][INFO] - loading model\n")
    assert bench.to_first_generation(job_dir) is None
