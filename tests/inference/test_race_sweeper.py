"""The racing sweeper's plumbing (hydra/sweeper=race), apart from its statistics: which jobs
`hydra.sweeper.keep` names, the plans and settings it refuses before any job runs, a failed job
run again on a rerun, and the progress count over rounds. Replayed answers on the bundled
sample (30 records), no model."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from grading.errors import GradingError
from grading.race import round_sizes
from hydra_plugins.toolsweep_race.race_sweeper import kept_jobs, setting_problems
from inference.benchmarks.petoolbench import load_petoolbench
from inference.errors import ConfigError
from inference.gold import gold_outputs, write_predictions
from tests.conftest import REPO, SAMPLE

CHECKPOINTS = [[f"model.path=/runs/x/checkpoint-{step}", "engine=vllm"] for step in ("100", "1000", "2000/", "20000")]


@pytest.mark.parametrize("keep, kept", [
    (["checkpoint-100"], {0}),  # a whole name, not the start of checkpoint-1000's
    (["checkpoint-2000"], {2}),  # the docs' own example: not checkpoint-20000 (a trailing / is no part of a name)
    (["x/checkpoint-1000"], {1}),  # the value's last path components
    (["/runs/x/checkpoint-20000"], {3}),  # the whole value
    (["model.path=/runs/x/checkpoint-100"], {0}),  # the whole override
    (["3", "checkpoint-100"], {0, 3}),  # a number is a job's number
], ids=["name", "docs-example", "path-tail", "value", "override", "number"])
def test_keep_names_a_job_by_a_whole_value_never_by_part_of_one(keep, kept):
    assert kept_jobs(CHECKPOINTS, keep) == kept


def test_keep_reads_a_quoted_or_escaped_value_as_hydra_does():
    """Hydra's sweeper hands a job a path with a space quoted (or escaped): its name is the path."""
    jobs = [["model.path='/runs/my x/checkpoint-100'"], [r"model.path=/runs/my\ x/checkpoint-1000"]]
    assert kept_jobs(jobs, ["checkpoint-100"]) == {0} and kept_jobs(jobs, ["my x/checkpoint-1000"]) == {1}


@pytest.mark.parametrize("keep", [
    ["checkpoint-10"],  # part of checkpoint-100's name names nothing
    ["vllm"],  # every job's engine: not a value the jobs differ in
    ["7"],  # no job 7 in a sweep of 4
    ["checkpoint-2000", "point-2000"],  # one entry naming nothing is enough
], ids=["part-of-a-name", "shared-override", "no-such-number", "one-of-two"])
def test_a_keep_entry_that_names_no_job_is_refused_with_the_jobs_values(keep):
    with pytest.raises(ConfigError) as refused:
        kept_jobs(CHECKPOINTS, keep)
    message = str(refused.value)
    assert repr(keep[-1]) in message and "model.path=/runs/x/checkpoint-1000" in message and "0-3" in message


@pytest.mark.parametrize("first, growth, wrong", [
    (100, 1.0, "hydra.sweeper.growth must be > 1"),  # 2,901 rounds of one more record each
    (100, 0.5, "hydra.sweeper.growth must be > 1"),
    (0, 2.0, "hydra.sweeper.first must be at least 1"),
    (1, 1.1, "plan 66 rounds for 3000 records"),  # more rounds than the cap: alpha split 66 ways
], ids=["growth-1", "shrinking", "first-0", "too-many-rounds"])
def test_a_plan_that_does_not_grow_or_runs_too_many_rounds_is_refused(first, growth, wrong):
    with pytest.raises(GradingError, match=re.escape(wrong)):
        round_sizes(3000, first, growth)


def test_the_longest_plan_allowed_is_twenty_rounds():
    assert len(round_sizes(3000, 1, 1.5)) == 20  # 1, 2, 3, 5, 8, ... 2397, 3000
    assert round_sizes(3000, 1, 2) == [2 ** k for k in range(12)] + [3000]


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, 2.0])
def test_alpha_must_lie_strictly_between_0_and_1(alpha):
    assert setting_problems({"alpha": alpha}) == [
        f"hydra.sweeper.alpha must lie strictly between 0 and 1, got {alpha}: e.g. hydra.sweeper.alpha=0.05"]
    assert setting_problems({"alpha": 0.05}) == []


def _answers(tmp_path: Path) -> dict[str, Path]:
    """Model folders of replayed answers on the bundled sample: every gold call, and every call one
    record off (wrong)."""
    gold = gold_outputs(load_petoolbench(SAMPLE, ["p", "r", "c"]))
    wrong = gold.with_columns(pl.col("output").shift(1, fill_value=gold["output"][-1]))
    folders = {}
    for name, answers in (("gold", gold), ("wrong", wrong)):
        folders[name] = write_predictions(answers, tmp_path / name / "preds.jsonl").parent
    return folders


def _race(sweep: Path, *folders: Path, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "inference.cli", "-m", f"hydra.sweep.dir={sweep}", "hydra/sweeper=race",
               "hydra.sweeper.first=10", "hydra.sweeper.growth=3", "engine=replay",
               "engine.predictions=${model.path}/preds.jsonl", f"model.path={','.join(map(str, folders))}", *extra]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)


def test_bad_race_settings_are_refused_together_before_any_job_runs(tmp_path):
    folders = _answers(tmp_path)
    sweep = tmp_path / "sweep"
    done = _race(sweep, folders["gold"], folders["wrong"],
                 extra=("hydra.sweeper.growth=1", "hydra.sweeper.alpha=1.5", "hydra.sweeper.keep=[checkpoint-1]"))
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    error = done.stderr
    assert "hydra.sweeper.growth must be > 1" in error and "hydra.sweeper.alpha must lie strictly" in error
    assert "'checkpoint-1'" in error, "the keep entry naming no job"
    assert not (sweep / "0").exists() and not (sweep / "race.json").exists(), "no job ran"


def test_a_job_that_failed_is_run_again_and_raced_when_the_race_is_rerun(tmp_path):
    """Three candidates; the third's answers are missing in the first run (it fails in round 1),
    then restored: the rerun runs it for the rounds it missed and races it against each round's
    leader, while the job the race stopped stays stopped and the leader's runs are not redone."""
    folders = _answers(tmp_path)
    flaky = tmp_path / "flaky"
    flaky.mkdir()
    sweep = tmp_path / "sweep"
    first = _race(sweep, folders["gold"], folders["wrong"], flaky)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    race = json.loads((sweep / "race.json").read_text())
    assert race["sizes"] == [10, 30] and list(race["rounds"][0]["failed"]) == ["2"]
    assert [(d["job"], d["stopped"]) for d in race["rounds"][0]["decisions"]] == [("0", False), ("1", True)]
    logs = {k: (sweep / str(k) / "job.log").stat().st_mtime_ns for k in (0, 1)}
    shutil.copy(folders["gold"] / "preds.jsonl", flaky / "preds.jsonl")  # the cause is gone
    again = _race(sweep, folders["gold"], folders["wrong"], flaky)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    race = json.loads((sweep / "race.json").read_text())
    assert [o["failed"] for o in race["rounds"]] == [{}, {}]
    assert [[(d["job"], d["stopped"]) for d in o["decisions"]] for o in race["rounds"]] == [
        [("0", False), ("1", True), ("2", False)], [("0", False), ("2", False)]], "raced in both rounds"
    assert json.loads((sweep / "2" / "job.json").read_text())["status"] == "complete"
    assert {k: (sweep / str(k) / "job.log").stat().st_mtime_ns for k in (0, 1)} == logs, \
        "the stopped job stays stopped; the leader's runs stand"
    board = pl.read_parquet(sweep / "leaderboard.parquet").filter(setting="all", parser="official")
    assert board.sort("job").select("job", "status", "n").rows() == [(0, "complete", 30), (1, "stopped", 10),
                                                                     (2, "complete", 30)]


def test_the_progress_count_covers_every_round_of_the_survivors(tmp_path):
    """`job N/T ... left for K job(s)`: T is every job-round the race plans, recounted as jobs stop
    (two jobs, two rounds: 4 planned; the wrong one stopped after round 1: 3), never N >= T, K never
    below 0."""
    folders = _answers(tmp_path)
    sweep = tmp_path / "sweep"
    done = _race(sweep, folders["gold"], folders["wrong"])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    race = json.loads((sweep / "race.json").read_text())
    survivors = [len(o["decisions"]) for o in race["rounds"]]
    assert survivors == [2, 1], "the wrong job stops after round 1"
    lines = re.findall(r"^\[toolsweep\] job (\d+)/(\d+): .*?(?:left for (\d+) job\(s\))?$", done.stdout, re.MULTILINE)
    assert [(int(n), int(total)) for n, total, _ in lines] == [(0, 4), (1, 4), (2, 3)]
    assert [int(left) if left else 0 for _, _, left in lines] == [3, 2, 0]
    # each job's overrides recorded whole (a value with spaces stays one), the stop said against whom
    assert all(isinstance(job, list) for job in race["jobs"]) and f"model.path={folders['wrong']}" in race["jobs"][1]
    assert re.search(r"stopped job 1 \(behind job 0 by [\d.]+, one-sided p=\S+, adjusted p=\S+\)", done.stdout), \
        done.stdout
