"""ETAPP with the real vLLM CPU engine: the smoke subset end to end with the embedded model as
agent and as judge (spec section 5), a judge-only rerun of it, and a SIGKILL in each phase then a
resume, run on the tiny seeded model as agent and judge (the phases' store is the subject: its
noise still fills the judge's guided JSON, and resume must reproduce it bit for bit)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tests.processes import alive, descendants
from tests.warm import forked, toolsweep
from tests.conftest import tiny_args

pytestmark = [pytest.mark.vllm, pytest.mark.shared_data]
# The smoke subset's shape (fc, tool-given, at most 4 turns, short answers and analyses) on two
# cases, two users' instruction 8 (of the spec's subset, the one with the fewest key-point words:
# the judge writes every key point back as a JSON key, so its guided answer is a third shorter than
# instruction 1's): every assertion is per case, and the embedded judge's decoding of those answers
# is the suite's largest single cost. No cross-run cache.
SLICE = ["dataset=etapp", "dataset.methods=[fc]", "dataset.settings=[tool_given]", "dataset.max_turns=4",
         "decoding.max_new_tokens=32", "decoding.constraint=xgrammar", "dataset.judge_analysis_chars=8",
         "roles.judge.decoding.constraint=xgrammar", "roles.judge.decoding.max_new_tokens=1536", "engine.cache=false", "roles.judge.engine.cache=false"]
SMOKE = [*SLICE, "dataset.users=[James_Harrington,John_Doe]", "dataset.instructions=[8]"]
# The killed run resumes from its own run dir. One request per shard gives each phase a middle to
# be killed in (two cases: after the first of two shards), and makes every generation's numerics independent of what was batched with it (on
# the CPU, vLLM's bf16 output for a request can change with the batch around it, and a batch's
# timing differs between processes); prefix caching off does the same for cached prefixes.
KILL = [*SLICE, "dataset.users=[James_Harrington]", "dataset.instructions=[1,8]", "engine.shard_size=1",
        "roles.judge.engine.shard_size=1", "engine.enable_prefix_caching=false", "roles.judge.engine.enable_prefix_caching=false"]


def _command(run_dir: Path, data: Path, args: tuple[str, ...] = tuple(SMOKE)) -> list[str]:
    return [sys.executable, "-m", "inference.cli", f"hydra.run.dir={run_dir}", f"dataset.path={data}", *args]


def _tiny(model: Path) -> tuple[str, ...]:
    """The kill slice with agent and judge both the tiny model, with small KV caches (the
    agent's answer budget is etapp.max_new_tokens)."""
    return (*KILL, *tiny_args(model, max_new_tokens=None), f"roles.judge.model.path={model}", "roles.judge.model.embedded=false", "roles.judge.engine.cpu_kvcache_gib=0.0625")


def test_smoke_subset_runs_end_to_end_then_rejudges_from_its_store(tmp_path, etapp_data, scratch_env):
    """The embedded model as agent and judge: every case ends with a reason and every judge answer
    is read; then toolsweep judge on the finished run makes no agent call and takes the same
    judge's answers from the run's store (one test, so that the run is made once)."""
    finished = tmp_path / "run"
    done = toolsweep(_command(finished, etapp_data)[3:], env=scratch_env, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    samples = pl.read_parquet(finished / "samples.parquet")
    assert samples.height == 2 and samples["end_reason"].null_count() == 0, "every case ends with a reason"
    assert samples["judge_error"].null_count() == 2, samples["judge_error"].to_list()
    judged = pl.read_parquet(finished / "judgements.parquet")
    assert judged["judge_attempts"].to_list() == [1, 1] and judged["judge_output_tokens"].max() < 1536, \
        "every guided answer fits its budget at the first attempt"
    for column in ("judge_procedure", "judge_personalization", "judge_proactivity"):
        assert samples[column].is_between(0, 5).all()
    trajectories = pl.read_parquet(finished / "trajectories.parquet")
    assert set(trajectories["sample_id"]) == set(samples["sample_id"])
    assert trajectories.filter(pl.col("role") == "assistant")["output_tokens"].drop_nulls().min() > 0
    metrics = pl.read_parquet(finished / "metrics.parquet")
    assert metrics["setting"].to_list() == ["tool_given/fc", "tool_given/fc/clean", "all", "all/clean"]
    facts = json.loads((finished / "run.json").read_text())
    for role in ("model", "judge"):
        assert facts["roles"][role]["output_tokens_per_s"] > 0, facts["roles"][role]
    _check_judge_only_rerun(finished, scratch_env)


def _kill_at(run_dir: Path, data: Path, extra: tuple[str, ...], env: dict[str, str], marker: str) -> None:
    """Start the run paused at `marker` (in either phase's process), SIGKILL the toolsweep process
    alone, and check its phase process went with it."""
    env = {**env, "TOOLSWEEP_PAUSE_AT": marker, "TOOLSWEEP_PAUSE_S": "300"}
    run = forked(_command(run_dir, data, extra)[3:], env)
    deadline = time.time() + 900
    for line in run.stdout:
        if line.decode("utf-8", "replace").startswith(f"[toolsweep] {marker}"):
            break
        assert time.time() < deadline, "marker never reached"
    below = descendants(run.pid)
    assert "toolsweep-step" in below.values(), f"the paused solver's process is not below the run: {below}"
    os.kill(run.pid, signal.SIGKILL)
    assert run.wait(60) == -signal.SIGKILL
    run.stdout.close()
    assert not alive(list(below)), f"processes of the killed run outlived it: {below}"


def _generation(run_dir: Path, step: int) -> dict:
    """The generation counts of solver `step` (0: the agent, 1: the judge) as its process wrote them."""
    return json.loads((run_dir / "steps" / f"{step}.json").read_text())["role"]["generation"]


def _scores(run_dir: Path) -> pl.DataFrame:
    return pl.read_parquet(run_dir / "samples.parquet").select(
        "sample_id", "end_reason", "output", "judge_procedure", "judge_personalization", "judge_proactivity",
        "judge_keypoints")


def test_sigkill_in_each_phase_then_rerun_gives_identical_results(tmp_path, tiny_model, etapp_data, scratch_env):
    extra = _tiny(tiny_model)
    finished = tmp_path / "uninterrupted"
    done = toolsweep(_command(finished, etapp_data, extra)[3:], env=scratch_env, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = tmp_path / "run"
    _kill_at(run_dir, etapp_data, extra, scratch_env, "shard 2/2")   # agent: after its first shard of 2
    assert not (run_dir / "trajectories.parquet").exists() and list((run_dir / "parts").glob("part-*"))
    _kill_at(run_dir, etapp_data, extra, scratch_env, "shard 2/2")   # the agent resumes (1 shard) and ends; judge: after 1 of 2
    agent = _generation(run_dir, 0)
    assert agent["stored_hits"] == 1 and agent["engine_calls"] >= 1, agent
    # the resume needs no process of its own (nothing kills it): it runs as the uninterrupted run did
    done = toolsweep(_command(run_dir, etapp_data, extra)[3:], env=scratch_env, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _generation(run_dir, 0)["engine_calls"] == 0
    judge = _generation(run_dir, 1)
    assert judge["stored_hits"] >= 1, judge
    assert pl.read_parquet(run_dir / "trajectories.parquet").equals(pl.read_parquet(finished / "trajectories.parquet"))
    assert _scores(finished)["judge_procedure"].null_count() == 0, "the tiny judge's guided JSON completes"
    assert _scores(run_dir).equals(_scores(finished))


def _check_judge_only_rerun(finished: Path, scratch_env: dict[str, str]) -> None:
    """`toolsweep judge` with the same judge given through Hydra's group syntax: a new run dir with
    the run's agent output, no agent call, the judge's answers from the cache; the run untouched."""
    before = pl.read_parquet(finished / "trajectories.parquet")
    agent = (finished / "steps" / "0.json").read_text()
    judged = (finished / "steps" / "1.json").read_text()
    done = toolsweep(["judge", str(finished), "engine@roles.judge.engine=vllm"], env=scratch_env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "agent_solver" not in done.stderr and "agent turn" not in done.stderr
    again = finished.with_name(f"{finished.name}-judged")
    assert f"judged into {again}" in done.stderr
    assert (again / "steps" / "0.json").read_text() == agent
    assert pl.read_parquet(again / "trajectories.parquet").equals(before)
    judge = _generation(again, 1)
    assert judge["engine_calls"] == 0, "the same judge's answers come from the run's store, copied with it"
    assert (finished / "steps" / "1.json").read_text() == judged, "the judged run is untouched"
