"""Racing sweeps (hydra/sweeper=race): the statistics and the sweeper's options; a race over 8
replayed checkpoints of known quality on the real PEToolBench file, killed after its first round
and rerun into its dir, against the simulation's prediction; a race through the real engine; a
sharded ETAPP race on judge scores."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from grading.race import bootstrap_p, decide_round, holm, job_scores, paired_p, round_sizes, sign_test_p
from hydra_plugins.toolsweep_race.race_sweeper import kept_jobs, race_units
from inference.benchmarks.petoolbench import BENCHMARK, load_petoolbench
from inference.errors import ConfigError
from inference.gold import gold_outputs, write_predictions
from inference.shards import subsample
from tests.conftest import REPO
from tests.warm import toolsweep


def test_round_sizes_grow_to_the_whole_set():
    assert round_sizes(3000) == [100, 200, 400, 800, 1600, 3000]
    assert round_sizes(1000, 250, 2) == [250, 500, 1000]
    assert round_sizes(80) == [80]


def test_the_sign_test_is_binomials_exact_tail_and_holm_steps_down():
    from math import comb

    assert sign_test_p(9, 1) == pytest.approx(sum(comb(10, i) for i in (9, 10)) / 2**10, rel=1e-12)
    assert sign_test_p(1600, 1400) == pytest.approx(sum(comb(3000, i) for i in range(1600, 3001)) / 2**3000, rel=1e-9)
    assert sign_test_p(0, 0) == 1.0
    assert holm({"a": 0.001, "b": 0.02, "c": 0.5}, 0.05) == {"a", "b"}
    assert holm({"a": 0.03, "b": 0.04}, 0.05) == set(), "0.03 > 0.05/2: Holm stops at the first"


def test_a_round_stops_only_the_clearly_worse_and_never_a_kept_job():
    rng = np.random.default_rng(0)
    good = (rng.random(800) < 0.7).astype(float)
    close = good.copy()  # as good as the leader, right on other samples: 20 flips each way
    close[np.flatnonzero(good == 1)[:20]], close[np.flatnonzero(good == 0)[:20]] = 0, 1
    bad = (rng.random(800) < 0.4).astype(float)
    result = decide_round(1, 800, {"0": bad, "1": good, "2": close, "3": bad.copy()}, True, 0.05, 4, keep=["3"])
    assert result.leader == "1"
    assert {d.job for d in result.decisions if d.stopped} == {"0"}, "2 is not provably worse; 3 is kept"
    assert result.alpha == 0.05 / 4
    scores = np.array([4.0, 3.5, np.nan, 5.0])  # judge scores: the permutation test
    assert 0 < paired_p(scores[[0, 1, 3]], scores[[0, 1, 3]] - 0.5, True) < 0.5


def test_a_pooled_metric_races_by_a_paired_bootstrap():
    """F1 over counts (ToolSpectrum's headline): each job's per-sample (tp, fp, fn); the clearly
    worse one is stopped, one as good on other samples is not, and a job's value is the pooled F1."""
    from grading.scoring import _f1

    rng = np.random.default_rng(1)
    right = rng.random(600) < 0.8
    good = np.stack([right, ~right, ~right], axis=1).astype(float)  # one gold call per sample
    shifted = np.roll(good, 7, axis=0)  # the same F1 on other samples
    poor = rng.random(600) < 0.55
    bad = np.stack([poor, ~poor, ~poor], axis=1).astype(float)
    result = decide_round(1, 600, {"0": good, "1": shifted, "2": bad}, True, 0.05, 3, reduce=_f1)
    assert result.values["0"] == pytest.approx(_f1(*good.T))
    assert {d.job for d in result.decisions if d.stopped} == {"2"}
    assert bootstrap_p(good, bad, _f1, True) < 0.01 < bootstrap_p(good, shifted, _f1, True)
    assert bootstrap_p(bad, good, _f1, False) < 0.01, "lower is better: the direction turns the test"


def test_jobs_that_differ_only_in_their_shard_race_as_one_candidate():
    jobs = [["model.path=a", "dataset.shard=0"], ["model.path=a", "dataset.shard=1"],
            ["model.path=b", "dataset.shard=0"], ["model.path=b", "dataset.shard=1"]]
    assert race_units(jobs) == [[0, 1], [2, 3]]
    assert race_units([["model.path=a"], ["model.path=b"]]) == [[0], [1]]
    assert kept_jobs(jobs, ["b"]) == {2, 3} and kept_jobs(jobs, ["1"]) == {1}, "a number is a job's, not a shard's"
    models = [["model.path=/runs/x/checkpoint-1", "engine=vllm"], ["model.path=/runs/x/checkpoint-2", "engine=vllm"]]
    assert kept_jobs(models, ["checkpoint-2"]) == {1}
    with pytest.raises(ConfigError, match="'vllm'"):
        kept_jobs(models, ["vllm"])  # swept values only: every job's engine names no job


def test_every_race_option_composes_through_hydra_into_the_sweeper():
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    import inference.cli  # noqa: F401  (registers the config schema, as the entry point does)

    options = {"alpha": 0.1, "delta": 0.02, "first": 50, "growth": 3.0, "keep": ["checkpoint-100"],
               "metric": "param_acc", "seed": 4}
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True,
                      overrides=["hydra/sweeper=race", "hydra.sweeper.keep=[checkpoint-100]",
                                 *(f"hydra.sweeper.{k}={v}" for k, v in options.items() if k != "keep")])
        sweeper = instantiate(cfg.hydra.sweeper)
        with pytest.raises(Exception, match="alpah"):
            compose(config_name="config", return_hydra_config=True, overrides=["hydra/sweeper=race", "hydra.sweeper.alpah=1"])
    assert sweeper.settings == options


# 8 checkpoints of a training run: a rise, then a plateau whose best (step 600) is 2 points up
STEPS = (100, 200, 300, 400, 500, 600, 700, 800)
ACCURACY = (0.40, 0.50, 0.58, 0.64, 0.68, 0.72, 0.70, 0.695)


def _race_sim():
    """scripts/race_sim.py, the simulation `make bench` runs (a script, not a package module)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("race_sim", REPO / "scripts" / "race_sim.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, petoolbench_file) -> tuple[dict[int, Path], np.ndarray]:
    """Replay files standing for 8 checkpoints of known quality, and which records each gets right:
    the simulation's own model of a training run (each record's ease shared by all checkpoints,
    neighbours' mistakes correlated), drawn once; a right record answers the gold call, a wrong
    one another record's gold."""
    root = tmp_path_factory.mktemp("race")
    records = load_petoolbench(petoolbench_file, ["p"])
    gold = gold_outputs(records)
    wrong = gold.with_columns(pl.col("output").shift(1, fill_value=gold["output"][-1]))
    right = _race_sim().correctness(np.array(ACCURACY), np.random.default_rng(3))[:, :gold.height].astype(bool)
    folders = {}
    for k, step in enumerate(STEPS):
        answers = pl.concat([gold.filter(pl.Series(right[k])), wrong.filter(pl.Series(~right[k]))])
        folders[step] = write_predictions(answers, root / "train" / f"checkpoint-{step}" / "preds.jsonl").parent
    return folders, right


def _race(sweep: Path, folders: dict[int, Path], dataset: Path) -> list[str]:
    return [sys.executable, "-m", "inference.cli", "-m", f"hydra.sweep.dir={sweep}", "hydra/sweeper=race",
            "hydra.sweeper.first=250", "hydra.sweeper.growth=4", "engine=replay", "engine.predictions=${model.path}/preds.jsonl",
            f"dataset.path={dataset}", "dataset.settings=[p]", f"model.path={','.join(map(str, folders.values()))}"]


def _predicted(right: np.ndarray, records: pl.DataFrame, sizes: list[int]) -> tuple[list[list[str]], float]:
    """The race the simulation predicts on these checkpoints' known right and wrong records: each
    round's stopped jobs, and the share of a full sweep's generations spent."""
    index = {sid: i for i, sid in enumerate(records["sample_id"].to_list())}
    alive, stops, spent, previous = [str(k) for k in range(len(right))], [], 0, 0
    for number, size in enumerate(sizes, start=1):
        ids = subsample(records, BENCHMARK, SimpleNamespace(subsample=size))["sample_id"].to_list()
        rows = [index[i] for i in ids]
        result = decide_round(number, size, {job: right[int(job), rows].astype(float) for job in alive}, True, 0.05,
                              len(sizes), candidates=len(right))
        spent, previous = spent + len(alive) * (size - previous), size
        stops.append([d.job for d in result.decisions if d.stopped])
        alive = [job for job in alive if job not in stops[-1]]
    return stops, spent / right.size


def test_a_race_over_eight_checkpoints_killed_after_its_first_round_picks_the_best_as_predicted(
        tmp_path, checkpoints, petoolbench_file):
    folders, right = checkpoints
    sweep = tmp_path / "sweep"
    first = subprocess.Popen(_race(sweep, folders, petoolbench_file), cwd=REPO, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 600
        while time.time() < deadline and first.poll() is None:
            if (sweep / "race.json").is_file() and json.loads((sweep / "race.json").read_text())["rounds"]:
                break
            time.sleep(0.5)
        assert first.poll() is None, "the race ended before it could be killed"
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    round_one = json.loads((sweep / "race.json").read_text())["rounds"][0]
    logs = {k: (sweep / str(k) / "job.log").stat().st_mtime_ns for k in range(len(STEPS))}
    done = toolsweep(_race(sweep, folders, petoolbench_file)[3:], timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    race = json.loads((sweep / "race.json").read_text())
    assert race["sizes"] == [250, 1000] and race["rounds"][0] == round_one, "round 1 kept as recorded"
    stopped_first = [d["job"] for d in round_one["decisions"] if d["stopped"]]
    assert stopped_first and all((sweep / j / "job.log").stat().st_mtime_ns == logs[int(j)] for j in stopped_first), \
        "a job stopped in round 1 never ran again"
    # what the simulation predicts from the checkpoints' known records is what the race did
    records = load_petoolbench(petoolbench_file, ["p"])
    stops, predicted_spend = _predicted(right, records, race["sizes"])
    assert [[d["job"] for d in o["decisions"] if d["stopped"]] for o in race["rounds"]] == stops
    best = str(STEPS.index(600))
    assert race["rounds"][-1]["leader"] == best and best not in sum(stops, []), "checkpoint-600 is picked"
    spent = sum(len(o["decisions"]) * (o["size"] - (race["sizes"][i - 1] if i else 0))
                for i, o in enumerate(race["rounds"])) / (len(STEPS) * 1000)
    print(f"race spent {spent:.1%} of a full sweep's generations (predicted {predicted_spend:.1%})")
    assert spent == pytest.approx(predicted_spend) and spent < 0.75
    # every round's decisions, recomputed from the jobs' own graded samples on that round's records
    alive = [str(k) for k in range(len(STEPS))]
    for outcome in race["rounds"]:
        ids = subsample(records, BENCHMARK, SimpleNamespace(subsample=outcome["size"]))["sample_id"].to_list()
        scores = {job: job_scores(sweep / job)[0] for job in alive}
        again = decide_round(outcome["round"], outcome["size"], {job: np.array([scores[job][i] for i in ids])
                                                                 for job in alive}, True, 0.05, 2, candidates=len(STEPS))
        assert again.leader == outcome["leader"]
        assert [(d.job, d.stopped) for d in again.decisions] == [(d["job"], d["stopped"]) for d in outcome["decisions"]]
        alive = [j for j in alive if j not in {d.job for d in again.decisions if d.stopped}]
    board = pl.read_parquet(sweep / "leaderboard.parquet").filter(setting="all", parser="official")
    stopped = board.filter(status="stopped")
    assert set(stopped["job"].to_list()) == {int(j) for j in sum(stops, [])}
    assert stopped["reason"].str.contains("stopped at round").all()
    stopped_after = {int(j): o["size"] for o in race["rounds"] for j in (d["job"] for d in o["decisions"] if d["stopped"])}
    assert dict(stopped.select("job", "n").rows()) == stopped_after, "a stopped job's metrics: its rounds' records"
    assert all(d["against"] in {other["job"] for other in o["decisions"]} and d["adjusted_p"] <= o["alpha"]
               for o in race["rounds"] for d in o["decisions"] if d["stopped"]), "whom each was shown worse than"
    assert all(("(partial)" in reason) == (stopped_after[job] < 1000) for job, reason in stopped.select("job", "reason").rows())
    assert (sweep / "leaderboard.png").is_file(), "stopped jobs are partial points of the plot"
    assert "<h2>Race</h2>" in (sweep / "report.html").read_text(), "the report shows the race round by round"
    assert board.filter(job=int(best))["n"].to_list() == [1000]
    assert board.filter(job=int(best))["status"].to_list() == ["complete"]
    compared = subprocess.run([sys.executable, "-m", "grading.compare", str(sweep / stopped_first[0]), str(sweep / best)],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
    assert compared.returncode == 0, compared.stderr
    assert "holds 250 of the other's 1000 samples; comparing those 250" in compared.stderr
    assert "| all | official | tool_acc | 250 |" in compared.stdout


def _engine_option(folder: Path, name: str, base: str, **values: str) -> None:
    """conf/engine/<name>.yaml in a config dir the test adds to Hydra's search path: `base` with
    these values, so that a sweep over `engine=` runs differently configured engines side by side."""
    (folder / "engine").mkdir(parents=True, exist_ok=True)
    lines = ["defaults:", f"  - {base}", "  - _self_", *(f"{k}: {v}" for k, v in values.items())]
    (folder / "engine" / f"{name}.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.vllm
def test_a_race_through_the_real_engine_generates_each_record_once_across_rounds(tmp_path, tiny_model, scratch_env):
    """Three candidates on the bundled sample (12 records, 2 samples each: decoding.samples), rounds
    of 8 and 12 records: stored gold answers (the leader), stored wrong answers (stopped after round
    1: 8 records to none, p = 1/256, times 2 for the two jobs it could be shown worse than, under
    Holm's 0.025 / 2; 6 records could not show it), and the tiny seeded model through vLLM, kept to
    the end (`keep`). The kept job's second round resumes its own run: it generates only the 4 new
    records' 8 samples and reads the rest from its store, so each record is generated once over the
    race."""
    from inference.benchmarks.petoolbench import load_petoolbench as load
    from inference.repeats import repeat_samples
    from tests.conftest import SAMPLE

    samples = repeat_samples(load(SAMPLE, ["p", "r", "c"], 4), 2)
    gold = gold_outputs(samples.drop("sample_id").rename({"record_id": "sample_id"}))
    gold = gold.with_columns(samples["sample_index"])
    wrong = gold.with_columns(pl.col("output").shift(2, fill_value=gold["output"][-1]))
    conf = tmp_path / "conf"
    _engine_option(conf, "gold", "replay", predictions=str(write_predictions(gold, tmp_path / "gold.jsonl")))
    _engine_option(conf, "wrong", "replay", predictions=str(write_predictions(wrong, tmp_path / "wrong.jsonl")))
    _engine_option(conf, "tiny", "vllm", cpu_kvcache_gib="0.0625")
    sweep = tmp_path / "sweep"
    done = subprocess.run(
        [sys.executable, "-m", "inference.cli", "-m", f"hydra.sweep.dir={sweep}", f"hydra.searchpath=[file://{conf}]",
         "hydra/sweeper=race", "hydra.sweeper.first=8", "hydra.sweeper.keep=[tiny]", "engine=gold,wrong,tiny",
         "model=local", f"model.path={tiny_model}", "dataset.limit=4", "decoding.samples=2",
         "decoding.temperature=0.7", "decoding.max_new_tokens=16", "decoding.constraint=none"],
        cwd=REPO, env=scratch_env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    race = json.loads((sweep / "race.json").read_text())
    assert race["sizes"] == [8, 12]
    assert [[(d["job"], d["stopped"]) for d in o["decisions"]] for o in race["rounds"]] == [
        [("0", False), ("1", True), ("2", False)], [("0", False), ("2", False)]]
    assert race["rounds"][0]["leader"] == "0" and race["rounds"][0]["decisions"][0]["value"] == 1.0
    facts = json.loads((sweep / "2" / "run.json").read_text())
    assert facts["generation"]["engine_calls"] == 8 and facts["generation"]["stored_hits"] == 16, \
        "round 2 generated the 4 new records' 2 samples each and read round 1's 16 from its store"
    assert json.loads((sweep / "2" / "job.json").read_text())["worker"] == "warm" and \
        facts["roles"]["model"]["engine_start"]["how"] == "reused", \
        ("round 2 ran on the engine round 1 loaded", [line for line in done.stdout.splitlines() if "worker" in line])
    tiny = pl.read_parquet(sweep / "2" / "samples.parquet")
    assert tiny.height == 24 and tiny["output_tokens"].min() > 0 and tiny["error"].is_null().all()
    board = pl.read_parquet(sweep / "leaderboard.parquet").filter(setting="all", parser="official")
    assert board.sort("job").select("status", "n").rows() == [("complete", 24), ("stopped", 16), ("complete", 24)], "n: samples"


def test_an_etapp_race_stops_the_clearly_worse_checkpoint_after_one_round_on_judge_scores(tmp_path, etapp_data):
    """Two checkpoints of a scripted agent whose scripted judges score every case 4 and 1, each run
    as two shards (dataset.shard: a case's episodes stay in one): the race decides on the judge's
    scores (ETAPP's headline, a permutation test) over both shards' cases together, and the worse
    checkpoint's shards are stopped after 8 of the 16 cases."""
    from tests.inference.test_etapp_run import judge_script

    cases = [f"tool_given/fc/John_Doe-{i}" for i in range(1, 17)]
    folders = []
    for name, score in (("checkpoint-100", 1), ("checkpoint-200", 4)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "agent.jsonl").write_text(json.dumps({"sample_id": cases[0], "turn": 0, "answer": "Done."}) + "\n")
        (folder / "judge.jsonl").write_text("".join(json.dumps(r) + "\n" for r in judge_script(etapp_data, cases, score)))
        folders.append(str(folder))
    sweep = tmp_path / "sweep"
    done = subprocess.run(
        [sys.executable, "-m", "inference.cli", "-m", f"hydra.sweep.dir={sweep}", "hydra/sweeper=race",
         "hydra.sweeper.first=8", "dataset=etapp", f"dataset.path={etapp_data}", "dataset.users=[John_Doe]",
         f"dataset.instructions=[{','.join(str(i) for i in range(1, 17))}]", "dataset.methods=[fc]",
         "dataset.settings=[tool_given]", "dataset.shards=2", "dataset.shard=0,1", f"model.path={','.join(folders)}",
         "engine=script", "engine.script=${model.path}/agent.jsonl", "engine@roles.judge.engine=script",
         "roles.judge.engine.script=${model.path}/judge.jsonl"],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    race = json.loads((sweep / "race.json").read_text())
    first, last = race["rounds"]
    # jobs: shard 0 of checkpoint-100, of checkpoint-200, then shard 1 of each
    assert (first["metric"], first["n"], first["leader"]) == ("personalization", 8, "1")
    assert [(d["job"], d["jobs"], d["value"], d["stopped"]) for d in first["decisions"]] == [
        ("0", [0, 2], 1.0, True), ("1", [1, 3], 4.0, False)]
    assert last["n"] == 16 and [d["job"] for d in last["decisions"]] == ["1"]
    held = {k: pl.read_parquet(sweep / str(k) / "samples.parquet")["sample_id"].to_list() for k in range(4)}
    assert not set(held[0]) & set(held[2]) and len(held[0]) + len(held[2]) == 8, "the shards split round 1's cases"
    assert len(held[1]) + len(held[3]) == 16
    board = pl.read_parquet(sweep / "leaderboard.parquet").filter(setting="all")
    assert board.filter(status="stopped")["job"].unique().sort().to_list() == [0, 2]
