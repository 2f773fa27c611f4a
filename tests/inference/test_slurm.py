"""Sweeps and sharded runs on a real SLURM: Debian's slurmctld, slurmd and munge for one local
node (tests/slurm_cluster.py), jobs submitted by hydra-submitit's `slurm` launcher with the
defaults. `make test` sets TOOLSWEEP_REQUIRE_SLURM=1: there a missing SLURM fails these tests
instead of skipping them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from inference.gold import gold_outputs, write_predictions
from inference.benchmarks.petoolbench import load_petoolbench
from tests.conftest import REPO, SAMPLE, tiny_args
from tests.slurm_cluster import INSTALL_HINT, Cluster, missing_programs

REQUIRE_SLURM = os.environ.get("TOOLSWEEP_REQUIRE_SLURM") == "1"


def _cluster(root: Path, gpus: int = 0) -> Cluster:
    missing = missing_programs()
    if missing and REQUIRE_SLURM:
        pytest.fail(f"no local SLURM: {missing} missing; {INSTALL_HINT}")
    if missing:
        pytest.skip(f"no local SLURM ({missing} missing; under make test this fails): {INSTALL_HINT}")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return Cluster(root, f"ts{'gpu' if gpus else 'node'}{worker}", os.cpu_count() or 1, gpus)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    cluster = _cluster(tmp_path_factory.mktemp("slurm"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def toolsweep(cluster: Cluster, args: list[str], env: dict[str, str] | None = None,
              timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inference.cli", *args], cwd=REPO, env=cluster.env(env),
                          capture_output=True, text=True, timeout=timeout)


def sbatch_lines(sweep: Path) -> set[str]:
    return {line.strip() for script in (sweep / ".submitit").glob("*/*.sh")
            for line in script.read_text().splitlines() if line.startswith("#SBATCH")}


def _frame(run: Path, name: str) -> pl.DataFrame:
    return pl.read_parquet(run / name)


def _mixed_answers(path: Path) -> Path:
    """Gold answers of the bundled sample, every third one replaced by a wrong one."""
    gold = gold_outputs(load_petoolbench(SAMPLE, ["p", "r", "c"]))
    wrong = pl.when(pl.int_range(pl.len()) % 3 == 0).then(pl.lit("no call")).otherwise(pl.col("output"))
    return write_predictions(gold.with_columns(wrong.alias("output")), path)


@pytest.mark.vllm
def test_a_checkpoint_sweep_runs_on_slurm_with_the_default_requests(tmp_path, slurm, tiny_model, scratch_env):
    """Two checkpoints of the tiny model through hydra/launcher=slurm as it ships, but for
    jobs_per_task=2: on this GPU-less node the task asks for no GPU and for the CPUs and memory the
    node has; one array task runs both jobs on one warm worker (the second checkpoint read into the
    first one's engine), and the sweep ends with its leaderboard; submitit's polls stay quiet
    although the cluster keeps no accounting."""
    second = tmp_path / "ckpts" / "checkpoint-200"
    second.mkdir(parents=True)
    for f in tiny_model.iterdir():
        (second / f.name).symlink_to(f)
    sweep = tmp_path / "sweep"
    done = toolsweep(slurm, ["-m", f"hydra.sweep.dir={sweep}", "hydra/launcher=slurm", "hydra.launcher.jobs_per_task=2",
                             *tiny_args(f"{tiny_model},{second}"), "dataset.limit=1", "dataset.settings=[p]",
                             "engine.cache=false"],
                     scratch_env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "sacct" not in done.stderr and "accounting storage is disabled" not in done.stderr, done.stderr[-2000:]
    lines = sbatch_lines(sweep)
    assert "#SBATCH --gpus-per-node=0" in lines and f"#SBATCH --cpus-per-task={slurm.cpus}" in lines, lines
    board = pl.read_parquet(sweep / "leaderboard.parquet")
    assert board.filter(pl.col("status") == "complete")["job"].unique().sort().to_list() == [0, 1]
    assert board.filter(job=1)["step"].unique().to_list() == [200]
    jobs = [json.loads((sweep / str(k) / "job.json").read_text()) for k in (0, 1)]
    assert [job["status"] for job in jobs] == ["complete"] * 2
    assert len(list((sweep / ".submitit").glob("*/*_result.pkl"))) == 1  # one task ran both
    assert [job["worker"] for job in jobs] == ["fresh", "warm"], jobs
    started = [json.loads((sweep / str(k) / "run.json").read_text())["roles"]["model"]["engine_start"]["how"]
               for k in (0, 1)]
    assert started == ["cold", "swapped"]


def test_a_gpu_cluster_is_asked_for_tensor_parallel_gpus_per_task(tmp_path):
    """The same launcher on a node whose sinfo lists GPUs (count-only gres): the sbatch script asks
    for model.tensor_parallel_size GPUs, and SLURM hands the job that many devices."""
    cluster = _cluster(tmp_path / "gpu-slurm", gpus=2)
    try:
        cluster.start()
        sweep = tmp_path / "sweep"
        # two folders that are not models: each job refuses its own (one error every job shared
        # would be said before submitting anything)
        toolsweep(cluster, ["-m", f"hydra.sweep.dir={sweep}", "hydra/launcher=slurm", "model=local",
                            f"model.path={tmp_path / 'no-model'},{tmp_path / 'no-model-2'}",
                            "model.tensor_parallel_size=2"], timeout=180)
        assert "#SBATCH --gpus-per-node=2" in sbatch_lines(sweep)
        job = json.loads((sweep / "0" / "job.json").read_text())
        assert job["status"] == "failed" and "no-model" in job["reason"]  # it ran, and refused the folder
    finally:
        cluster.stop()


def test_a_sharded_replay_merges_to_the_unsharded_run(tmp_path, slurm):
    """`-m dataset.shards=3 dataset.shard=range(3)` as a SLURM array: three disjoint parts, merged
    at the sweep's end into samples, metrics and a report equal to one unsharded run's."""
    answers = _mixed_answers(tmp_path / "answers.jsonl")
    sweep, whole = tmp_path / "sweep", tmp_path / "whole"
    done = toolsweep(slurm, ["-m", f"hydra.sweep.dir={sweep}", "hydra/launcher=slurm", "engine=replay",
                             f"engine.predictions={answers}", "dataset.shards=3", "dataset.shard=range(3)"])
    assert done.returncode == 0 and "merged the shards" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    parts = [set(_frame(sweep / str(k), "samples.parquet")["sample_id"]) for k in range(3)]
    assert all(parts) and sum(map(len, parts)) == len(set().union(*parts)) == 30
    assert toolsweep(slurm, [f"hydra.run.dir={whole}", "engine=replay", f"engine.predictions={answers}"]).returncode == 0
    for name in ("samples.parquet", "metrics.parquet", "slices.parquet"):
        assert _frame(sweep / "merged", name).equals(_frame(whole, name)), name
    assert _report_tables(sweep / "merged") == _report_tables(whole)


def _report_tables(run: Path) -> list[str]:
    """report.html's tables (the facts above them name the run's own dir and times)."""
    return re.findall(r"<table.*?</table>", (run / "report.html").read_text(encoding="utf-8"), re.S)


def test_a_sharded_scripted_etapp_run_merges_by_case(tmp_path, slurm, etapp_data):
    """A scripted ETAPP agent and judge over 2 users x 2 instructions x 2 methods, in 2 shards on
    SLURM: each case's episodes stay in one shard, and the merged trajectories, judgements and
    metrics equal the unsharded run's."""
    from tests.inference.test_etapp_run import judge_script

    ids = [f"tool_given/{m}/{u}-{i}" for m in ("fc", "react") for u in ("John_Doe", "James_Harrington")
           for i in (1, 7)]
    agent, judge = tmp_path / "agent.jsonl", tmp_path / "judge.jsonl"
    agent.write_text("".join(json.dumps({"sample_id": s, "turn": 0, "answer": f"done: {s}"}) + "\n" for s in ids))
    judge.write_text("".join(json.dumps(r) + "\n" for r in judge_script(etapp_data, ids, 3)))
    common = ["dataset=etapp", f"dataset.path={etapp_data}", "dataset.users=[John_Doe,James_Harrington]",
              "dataset.instructions=[1,7]", "dataset.methods=[fc,react]", "dataset.settings=[tool_given]",
              "engine=script", f"engine.script={agent}", "engine@roles.judge.engine=script",
              f"roles.judge.engine.script={judge}"]
    sweep, whole = tmp_path / "sweep", tmp_path / "whole"
    done = toolsweep(slurm, ["-m", f"hydra.sweep.dir={sweep}", "hydra/launcher=slurm", *common, "dataset.shards=2",
                             "dataset.shard=range(2)"])
    assert done.returncode == 0 and "merged the shards" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    for k in range(2):
        cases = _frame(sweep / str(k), "samples.parquet")["sample_id"].str.split("/").list.last()
        assert cases.n_unique() * 2 == cases.len()  # both methods of a case in its shard
    assert toolsweep(slurm, [f"hydra.run.dir={whole}", *common]).returncode == 0
    for name in ("samples.parquet", "metrics.parquet", "trajectories.parquet", "judgements.parquet"):
        assert _frame(sweep / "merged", name).equals(_frame(whole, name)), name
    assert (sweep / "merged" / "cases.html").is_file()


def _requeue_now(slurm, job_id: str, deadline: float, before=None) -> None:
    """`scontrol requeue` the job, then `before` (where given), then start it at once: SLURM
    holds a requeued batch job back for two minutes (its BeginTime) once it is pending again."""
    slurm.run("scontrol", "requeue", job_id)
    if before is not None:
        before()
    while slurm.run("squeue", "-h", "-j", job_id, "-o", "%T").stdout.strip() != "PENDING":
        assert time.time() < deadline, "the requeued job never went back to pending"
        time.sleep(0.5)
    slurm.run("scontrol", "update", f"JobId={job_id}", "StartTime=now")


@pytest.mark.vllm
def test_a_requeued_job_resumes_from_its_finished_shards(tmp_path, slurm, tiny_model, scratch_env):
    """`scontrol requeue` of a running job (what preemption does): SLURM kills it and runs it
    again; the job resumes from the shards it had written and the sweep ends complete."""
    sweep = tmp_path / "sweep"
    args = ["-m", f"hydra.sweep.dir={sweep}", "hydra/launcher=slurm", *tiny_args(tiny_model, max_new_tokens=64),
            "dataset.limit=2", "decoding.constraint=none", "engine.shard_size=1", "engine.cache=false"]
    # The first attempt pauses after its second shard (6 shards of one record); the requeued one
    # has 4 left, so it does not.
    env = {**scratch_env, "TOOLSWEEP_PAUSE_AT": "shard 3/6", "TOOLSWEEP_PAUSE_S": "60"}
    sweeping = subprocess.Popen([sys.executable, "-m", "inference.cli", *args], cwd=REPO, env=slurm.env(env),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    part = sweep / "0" / "parts" / "part-00001.parquet"
    deadline = time.time() + 600
    while not part.is_file():
        assert time.time() < deadline and sweeping.poll() is None, "the job never wrote its second shard"
        time.sleep(0.5)
    (job_id,) = slurm.jobs()
    _requeue_now(slurm, job_id, deadline)
    out, err = sweeping.communicate(timeout=900)
    assert sweeping.returncode == 0, out[-2000:] + err[-3000:]
    facts = json.loads((sweep / "0" / "run.json").read_text())
    assert facts["generation"]["stored_hits"] >= 2 and facts["generation"]["engine_calls"] <= 4, facts["generation"]
    keys = pl.read_parquet(sorted(str(p) for p in (sweep / "0" / "parts").glob("part-*.parquet")))["cache_key"]
    assert keys.len() == 6 and keys.is_unique().all(), "a finished shard was generated again"
    assert "Restarts=1" in slurm.run("scontrol", "show", "job", job_id).stdout


@pytest.mark.parametrize("groups,per_task,tasks", [
    ([[0, 1, 2, 3]], 1, [[0], [1], [2], [3]]),
    ([[0, 1, 2, 3]], 2, [[0, 1], [2, 3]]),
    ([[0, 1, 2, 3, 4]], 4, [[0, 1, 2], [3, 4]]),
    ([[2, 0], [1], [3, 4, 5]], 3, [[2, 0], [1], [3, 4, 5]]),
    ([[0], [1]], 8, [[0], [1]]),
], ids=["one_job_a_task_as_before", "a_group_cut_in_two", "tasks_of_even_size_never_over_n",
        "plan_order_kept_group_by_group", "engines_never_merged"])
def test_array_tasks_take_the_jobs_of_one_engine(groups, per_task, tasks):
    """jobs_per_task cuts each engine group (warm_plan's) into as few tasks as it allows, of even
    size, in the plan's order; two engines never share a task (it would only run them one after
    the other on two workers, the parallelism lost)."""
    from hydra_plugins.toolsweep_launcher.slurm_launcher import array_tasks

    assert array_tasks(groups, per_task) == tasks


@pytest.mark.parametrize("launcher", ["slurm", "slurm_local"])
def test_fewer_than_one_job_per_task_is_refused(launcher, capsys):
    """Before anything is submitted, with toolsweep's error line and exit code (a configuration error)."""
    from hydra_plugins.toolsweep_launcher.slurm_launcher import WarmSlurmLauncher, WarmSubmititLocalLauncher

    cls = WarmSlurmLauncher if launcher == "slurm" else WarmSubmititLocalLauncher
    with pytest.raises(SystemExit) as ended:
        cls(jobs_per_task=0, submitit_folder="x")
    assert ended.value.code == 2
    assert "toolsweep: error: hydra.launcher.jobs_per_task must be at least 1, got 0: set it to 1" in \
        capsys.readouterr().err


def test_a_requeued_task_keeps_its_completed_jobs_and_runs_the_rest(tmp_path, slurm):
    """jobs_per_task=2: two replay jobs in one array task, `scontrol requeue` (what preemption
    does) during the second; the requeued task runs its jobs again: the first is kept as it was,
    the second runs and the sweep ends complete."""
    gold = gold_outputs(load_petoolbench(SAMPLE, ["p"]))
    full, half = write_predictions(gold, tmp_path / "full.jsonl"), write_predictions(gold.head(5), tmp_path / "half.jsonl")
    sweep = tmp_path / "sweep"
    # job 1's first attempt pauses where replay names the samples half.jsonl lacks
    env = {**os.environ, "TOOLSWEEP_PAUSE_AT": "have no prediction", "TOOLSWEEP_PAUSE_S": "60"}
    sweeping = subprocess.Popen([sys.executable, "-m", "inference.cli", "-m", f"hydra.sweep.dir={sweep}",
                                 "hydra/launcher=slurm", "hydra.launcher.jobs_per_task=2", "engine=replay",
                                 f"engine.predictions={full},{half}", "dataset.settings=[p]"],
                                cwd=REPO, env=slurm.env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = sweep / "1" / "job.log"
    deadline = time.time() + 600
    while not (log.is_file() and "have no prediction" in log.read_text()):
        assert time.time() < deadline and sweeping.poll() is None, "job 1 never reached its pause"
        time.sleep(0.5)
    first = (sweep / "0" / "job.json").read_text()
    (job_id,) = slurm.jobs()
    # the requeued task reads half.jsonl as it is then: complete, so it does not pause
    _requeue_now(slurm, job_id, deadline, before=lambda: write_predictions(gold, half))
    out, err = sweeping.communicate(timeout=600)
    assert sweeping.returncode == 0, out[-2000:] + err[-3000:]
    assert "Restarts=1" in slurm.run("scontrol", "show", "job", job_id).stdout
    assert (sweep / "0" / "job.json").read_text() == first  # kept, not run again
    board = pl.read_parquet(sweep / "leaderboard.parquet")
    # a job recorded as failed when SLURM stopped it would end the sweep before the requeued task ran
    assert board.filter(pl.col("status") != "complete").is_empty(), board.select("job", "status", "reason").unique()
    board = board.filter(setting="p", parser="official")
    assert board.sort("job").select("status", "tool_acc").rows() == [("complete", 1.0), ("complete", 1.0)]


def test_shards_are_a_stable_hash_of_the_key():
    """SHA-256 of the key's text modulo N (values fixed here: a change would reshuffle every sharded run)."""
    from inference.shards import shard_number

    assert [shard_number(k, 3) for k in ("p-900001", "r-900002", "tool_given/fc/John_Doe-1", "John_Doe")] == [1, 1, 2, 0]
    counts = [0, 0, 0]
    for number in range(3000):
        counts[shard_number(f"p-{number}", 3)] += 1
    assert min(counts) > 900  # parts of about equal size


@pytest.mark.parametrize("overrides,message", [
    (["dataset.shard=1"], "dataset.shard=1 must be in 0..0"),
    (["dataset.shards=3"], "dataset.shards=3 needs dataset.shard: run the parts as a sweep"),
    (["dataset.shards=0"], "dataset.shards must be an integer >= 1, got 0"),
])
def test_shard_options_are_checked(tmp_path, overrides, message):
    done = subprocess.run([sys.executable, "-m", "inference.cli", f"hydra.run.dir={tmp_path / 'run'}", "engine=replay",
                           f"engine.predictions={_mixed_answers(tmp_path / 'a.jsonl')}", *overrides],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and message in done.stderr, done.stderr[-2000:]


def test_requests_follow_the_engine_and_the_partition(monkeypatch):
    """No GPU for an engine that runs no weights (replay, script, a server); the partition's GPUs,
    CPUs and memory bound the rest (sinfo's answers stand in here for a GPU and a CPU cluster)."""
    from inference import slurm as requests

    answers = {"%G": ("gpu:8",), "%c": ("64",), "%m": ("512000",)}
    monkeypatch.setattr(requests, "_sinfo", lambda fields, partition: answers[fields])
    assert requests.gpus(4, "inference.engines.vllm_offline:VLLMEngine") == 4
    assert requests.gpus(4, "inference.engines.replay:ReplayEngine") == 0
    assert requests.gpus(4, "inference.engines.openai_server:OpenAIEngine") == 0
    assert (requests.cpus(), requests.mem_gb()) == (16, 64)
    answers.update({"%G": ("(null)",), "%c": ("2",), "%m": ("7800",)})
    assert requests.gpus(4, "inference.engines.vllm_offline:VLLMEngine") == 0
    assert (requests.cpus(), requests.mem_gb()) == (2, 7)


def test_a_sharded_sweep_with_an_unfinished_part_is_not_merged_and_says_how_to_finish(tmp_path):
    """Parts that fail (here every part, as it runs: the stored answers repeat a sample id, which
    replay refuses when it reads them) leave no merged run; the sweep says which parts and how to
    finish them; toolsweep merge says the same."""
    mixed = pl.read_ndjson(_mixed_answers(tmp_path / "all.jsonl"))
    answers = write_predictions(pl.concat([mixed, mixed.head(1)]), tmp_path / "repeated.jsonl")
    sweep = tmp_path / "sweep"
    done = subprocess.run([sys.executable, "-m", "inference.cli", "-m", f"hydra.sweep.dir={sweep}", "engine=replay",
                           f"engine.predictions={answers}", "dataset.shards=2", "dataset.shard=range(2)"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert "not merged" in done.stdout and f"hydra.sweep.dir={sweep}" in done.stdout, done.stdout[-2000:]
    assert not (sweep / "merged").exists()
    merged = subprocess.run([sys.executable, "-m", "inference.merge", str(sweep)], cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    assert merged.returncode == 2 and "are not complete" in merged.stderr
