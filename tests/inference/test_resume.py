"""Crash safety: SIGKILL a real vLLM run at five points; each rerun completes with identical results.

The subject is the run dir's store, not the model's answers: the real engine runs the tiny seeded
model (tests/conftest.py), on the bundled sample's real prompts, unconstrained (no grammar compile
to wait for) and with 64-token answers, so that a shard's generation lasts long enough (about
0.2 s at the least here) for the mid-shard kill, 0.05 s after the shard starts, to land inside it."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import REPO, tiny_args
from tests.inference.test_end_to_end import check_run_around_answers
from tests.warm import forked, toolsweep

# TOOLSWEEP_KILL_TEST_ARGS swaps the data, e.g. "dataset=petoolbench dataset.path=... dataset.limit=10"
DATA_ARGS = shlex.split(os.environ.get("TOOLSWEEP_KILL_TEST_ARGS", "dataset.limit=1"))
ARGS = [*DATA_ARGS, "engine.shard_size=1", "engine.cache=false", "decoding.constraint=none"]

# (id, marker on stderr, pause there?, seconds to wait before SIGKILL)
KILL_POINTS = [
    ("model_load", "loading model", False, 1.0),
    ("mid_shard", "shard 2/", False, 0.05),
    ("between_shards", "shard 1/", True, 0.0),
    ("after_last_shard", "writing reports", True, 0.0),
    ("during_final_write", "wrote samples.parquet", True, 0.0),
]


@pytest.fixture
def args(tiny_model) -> list[str]:
    return [*tiny_args(tiny_model, max_new_tokens=64), *ARGS]


def _command(run_dir: Path, args: list[str]) -> list[str]:
    return [sys.executable, "-m", "inference.cli", f"hydra.run.dir={run_dir}", *args]


def _kill_at(run_dir: Path, args: list[str], env: dict[str, str], marker: str, pause: bool, delay: float) -> str:
    """Start a run in a process of its own, SIGKILL it once `marker` (+ delay) is reached (its
    engine runs in it: `scratch_env` turns vLLM's engine process off); return its output up to then."""
    env = {**env, **({"TOOLSWEEP_PAUSE_AT": marker, "TOOLSWEEP_PAUSE_S": "120"} if pause else {})}
    child = forked(_command(run_dir, args)[3:], env)
    seen = []
    deadline = time.time() + 900
    for raw in child.stdout:
        line = raw.decode("utf-8", "replace")
        seen.append(line)
        if marker in line and line.startswith("[toolsweep]"):
            time.sleep(delay)
            break
        assert time.time() < deadline, "marker never reached"
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(60) == -signal.SIGKILL, "the run ended before it could be killed"
    child.stdout.close()
    return "".join(seen)


def _rows(run_dir: Path) -> pl.DataFrame:
    return pl.read_parquet(run_dir / "samples.parquet").select("sample_id", "output", "finish_reason", "failure")


@pytest.mark.vllm
def test_killed_run_resumes_to_identical_results(tmp_path, args, scratch_env):
    """One run dir killed at each of the five points in turn, every rerun resuming the last one's
    state; the final rerun completes with the uninterrupted run's results, and no finished shard
    was ever generated twice (one invocation per point instead of a kill and a rerun each). The
    uninterrupted run is also the suite's free-decoding run (rows, facts, no library logs on the
    console), and a
    grading-only rerun of it makes no engine call: one test, so that it is made once."""
    baseline = tmp_path / "baseline"
    done = toolsweep(_command(baseline, args)[3:], env=scratch_env, timeout=1800)
    default_data = "TOOLSWEEP_KILL_TEST_ARGS" not in os.environ
    check_run_around_answers(baseline, done, "none", [f"{s}-900001" for s in "prc"] if default_data else None,
                             one_shard=False)
    run_dir = tmp_path / "run"
    for name, marker, pause, delay in KILL_POINTS:
        _kill_at(run_dir, args, scratch_env, marker, pause, delay)
        assert json.loads((run_dir / "state.json").read_text())["status"] == "running", name
        assert not (run_dir / "run.json").exists(), name
    # the resume needs no process of its own (nothing kills it): it runs as the baseline did
    done = toolsweep(_command(run_dir, args)[3:], env=scratch_env, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    resumed = _rows(run_dir)
    assert resumed["sample_id"].is_unique().all()
    assert resumed.equals(_rows(baseline))
    assert pl.read_parquet(run_dir / "metrics.parquet").equals(pl.read_parquet(baseline / "metrics.parquet"))
    facts = json.loads((run_dir / "run.json").read_text())
    assert facts["generation"]["engine_calls"] == 0, "the killed runs had generated everything"
    parts = pl.read_parquet(sorted(str(p) for p in (run_dir / "parts").glob("part-*.parquet")))
    assert parts["cache_key"].is_unique().all(), "a finished shard was generated again"
    assert facts["generation"]["stored_hits"] == resumed.height
    assert json.loads((run_dir / "state.json").read_text())["status"] == "complete"
    _check_grading_only_rerun(baseline, args, scratch_env)


def _check_grading_only_rerun(baseline: Path, args: list[str], scratch_env: dict[str, str]) -> None:
    """Rerunning a finished run (here with a different error threshold, a grading-side change)."""
    done = toolsweep([*_command(baseline, args)[3:], "max_error_rate=0.5"], env=scratch_env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads((baseline / "run.json").read_text())
    assert facts["generation"]["engine_calls"] == 0 and "model_load" not in facts["wall_s"]
