"""Racing sweeps (hydra/sweeper=race): the statistics, and a race over replayed checkpoints of known
quality on the real PEToolBench file, killed after its first round and rerun into its dir."""

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

from grading.race import decide_round, holm, job_scores, paired_p, round_sizes, sign_test_p
from inference.benchmarks.petoolbench import BENCHMARK, load_petoolbench
from inference.gold import gold_outputs, write_predictions
from inference.shards import subsample
from tests.conftest import REPO


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


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, petoolbench_file) -> dict[int, Path]:
    """Replay files standing for 3 checkpoints: step -> folder whose preds.jsonl answers the first
    share of a seeded order right (the gold answer) and the rest with another record's gold."""
    root = tmp_path_factory.mktemp("race")
    gold = gold_outputs(load_petoolbench(petoolbench_file, ["p"]))
    wrong = gold.with_columns(pl.col("output").shift(1, fill_value=gold["output"][-1]))
    order = np.random.default_rng(7).permutation(gold.height)
    folders = {}
    for step, share in ((100, 0.45), (300, 0.72), (400, 0.64)):
        right = np.zeros(gold.height, dtype=bool)
        right[order[:int(share * gold.height)]] = True
        answers = pl.concat([gold.filter(pl.Series(right)), wrong.filter(pl.Series(~right))])
        folders[step] = write_predictions(answers, root / "train" / f"checkpoint-{step}" / "preds.jsonl").parent
    return folders


def _race(sweep: Path, folders: dict[int, Path], dataset: Path) -> list[str]:
    return [sys.executable, "-m", "inference.cli", "-m", f"hydra.sweep.dir={sweep}", "hydra/sweeper=race",
            "hydra.sweeper.first=250", "hydra.sweeper.growth=4", "engine=replay", "engine.predictions=${model.path}/preds.jsonl",
            f"dataset.path={dataset}", "dataset.settings=[p]", f"model.path={','.join(map(str, folders.values()))}"]


def test_a_race_killed_after_its_first_round_picks_the_best_as_its_rounds_say(tmp_path, checkpoints,
                                                                                 petoolbench_file):
    sweep = tmp_path / "sweep"
    first = subprocess.Popen(_race(sweep, checkpoints, petoolbench_file), cwd=REPO, stdout=subprocess.DEVNULL,
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
    logs = {k: (sweep / str(k) / "job.log").stat().st_mtime_ns for k in range(3)}
    done = subprocess.run(_race(sweep, checkpoints, petoolbench_file), cwd=REPO, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    race = json.loads((sweep / "race.json").read_text())
    assert race["sizes"] == [250, 1000] and race["rounds"][0] == round_one, "round 1 kept as recorded"
    stopped_first = [d["job"] for d in round_one["decisions"] if d["stopped"]]
    assert stopped_first and all((sweep / j / "job.log").stat().st_mtime_ns == logs[int(j)] for j in stopped_first), \
        "a job stopped in round 1 never ran again"
    # every round's decisions, recomputed here from the jobs' own graded samples on that round's records
    records = load_petoolbench(petoolbench_file, ["p"])
    alive = ["0", "1", "2"]
    for outcome in race["rounds"]:
        ids = subsample(records, BENCHMARK, SimpleNamespace(subsample=outcome["size"]))["sample_id"].to_list()
        scores = {job: job_scores(sweep / job)[0] for job in alive}
        arrays = {job: np.array([scores[job][i] for i in ids]) for job in alive}
        again = decide_round(outcome["round"], outcome["size"], arrays, True, 0.05, 2)
        assert again.leader == outcome["leader"]
        assert [(d.job, d.stopped) for d in again.decisions] == [(d["job"], d["stopped"]) for d in outcome["decisions"]]
        alive = [j for j in alive if j not in {d.job for d in again.decisions if d.stopped}]
    assert "1" in alive and race["rounds"][-1]["leader"] == "1", "checkpoint-300 (72%) is picked"
    board = pl.read_parquet(sweep / "leaderboard.parquet").filter(setting="all", parser="official")
    stopped = board.filter(status="stopped")
    assert set(stopped["job"].to_list()) == {int(j) for o in race["rounds"] for j in
                                             [d["job"] for d in o["decisions"] if d["stopped"]]}
    assert stopped["reason"].str.contains("stopped at round").all() and (stopped["n"] < 1000).all()
    assert (sweep / "leaderboard.png").is_file(), "stopped jobs are partial points of the plot"
    assert "<h2>Race</h2>" in (sweep / "report.html").read_text(), "the report shows the race round by round"
    assert board.filter(job=1)["n"].to_list() == [1000] and board.filter(job=1)["status"].to_list() == ["complete"]
    spent = sum(len(o["decisions"]) * (o["size"] - (race["sizes"][i - 1] if i else 0))
                for i, o in enumerate(race["rounds"])) / (3 * 1000)
    print(f"race spent {spent:.0%} of a full sweep's generations")
    assert spent < 1.0
    compared = subprocess.run([sys.executable, "-m", "grading.compare", str(sweep / stopped_first[0]), str(sweep / "1")],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
    assert compared.returncode == 0, compared.stderr
    assert "holds 250 of the other's 1000 samples; comparing those 250" in compared.stderr
    assert "| all | official | tool_acc | 250 |" in compared.stdout
