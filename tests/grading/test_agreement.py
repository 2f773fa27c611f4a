"""toolsweep agreement: two scripted judges of the same agent run, their kappa, alpha and tau
checked against the statistics' definitions worked out here, independently of the libraries."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from itertools import combinations

import numpy as np
import polars as pl
import pytest

from grading.agreement import compare_judges, ranking
from tests.warm import toolsweep as warm_toolsweep
from tests.conftest import REPO
from tests.inference.test_etapp_run import judge_script, one_case, toolsweep

pytestmark = pytest.mark.shared_data
CASES = [f"tool_given/fc/{user}-{n}" for user in ("James_Harrington", "John_Doe") for n in (1, 7, 8)]
SCORES_A, SCORES_B = [4, 3, 1, 5, 2, 0], [4, 2, 0, 3, 2, 1]
"""Each judge's score per case, everywhere in its answer (key points capped at 2)."""


def quadratic_kappa(a: list[int], b: list[int], k: int) -> float:
    """Cohen's kappa with quadratic weights, from its definition: 1 - sum(w*O) / sum(w*E)."""
    observed = np.zeros((k, k))
    for x, y in zip(a, b):
        observed[x, y] += 1
    expected = np.outer(observed.sum(1), observed.sum(0)) / len(a)
    weights = np.array([[(i - j) ** 2 for j in range(k)] for i in range(k)], dtype=float)
    return 1 - (weights * observed).sum() / (weights * expected).sum()


def ordinal_alpha(a: list[int], b: list[int], k: int) -> float:
    """Krippendorff's alpha, ordinal, two coders and no missing value: from the coincidence matrix."""
    coincidence = np.zeros((k, k))
    for x, y in zip(a, b):
        coincidence[x, y] += 1
        coincidence[y, x] += 1
    totals = coincidence.sum(1)
    n = totals.sum()

    def delta(c: int, d: int) -> float:
        low, high = min(c, d), max(c, d)
        return (totals[low:high + 1].sum() - (totals[c] + totals[d]) / 2) ** 2

    observed = sum(coincidence[c, d] * delta(c, d) for c in range(k) for d in range(k))
    expected = sum(totals[c] * totals[d] * delta(c, d) for c in range(k) for d in range(k))
    return 1 - (n - 1) * observed / expected


def kendall_tau(x: list[float], y: list[float]) -> float:
    """Tau from concordant and discordant pairs (no ties)."""
    signs = [np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]) for i, j in combinations(range(len(x)), 2)]
    return sum(signs) / len(signs)


@pytest.fixture(scope="module")
def judged(tmp_path_factory, etapp_data):
    """One scripted agent run judged by judge A, then the same run judged again by judge B."""
    tmp = tmp_path_factory.mktemp("agreement")
    agent = [{"sample_id": sid, "turn": 0, "answer": "Done."} for sid in CASES]
    judges = {}
    for name, scores in (("a", SCORES_A), ("b", SCORES_B)):
        judges[name] = tmp / f"judge-{name}.jsonl"
        rows = [r for sid, score in zip(CASES, scores) for r in judge_script(etapp_data, [sid], score)]
        judges[name].write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = [a for a in one_case("James_Harrington", 1)[:-1] if not a.startswith(("dataset.users", "dataset.instr"))]
    done = toolsweep(tmp / "a", etapp_data, [*args, "dataset.users=[James_Harrington,John_Doe]",
                                             "dataset.instructions=[1,7,8]", "engine@roles.judge.engine=script",
                                             f"roles.judge.engine.script={judges['a']}"], agent)
    assert done.returncode == 0, done.stderr[-3000:]
    before = (tmp / "a" / "samples.parquet").read_bytes()
    again = warm_toolsweep(["judge", str(tmp / "a"), "--out", str(tmp / "b"),
                            f"roles.judge.engine.script={judges['b']}"], timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (tmp / "a" / "samples.parquet").read_bytes() == before, "the judged run is a new dir; A is untouched"
    return tmp


def test_two_scripted_judges_agree_as_the_definitions_say(judged):
    done = subprocess.run([sys.executable, "-m", "grading.agreement", str(judged / "a"), str(judged / "b")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    table = pl.read_parquet(judged / "b" / "agreement_vs_a" / "agreement.parquet")
    row = {r["scope"]: r for r in table.iter_rows(named=True)}
    a, b = pl.read_parquet(judged / "a" / "samples.parquet"), pl.read_parquet(judged / "b" / "samples.parquet")
    scores_a = a.sort("sample_id")["judge_personalization"].to_list()
    scores_b = b.sort("sample_id")["judge_personalization"].to_list()
    assert sorted(scores_a) == sorted(SCORES_A) and sorted(scores_b) == sorted(SCORES_B)
    for dimension in ("procedure", "personalization", "proactivity"):
        cell = row[dimension]
        assert cell["n"] == 6
        assert cell["kappa"] == pytest.approx(quadratic_kappa(scores_a, scores_b, 6))
        assert cell["alpha"] == pytest.approx(ordinal_alpha(scores_a, scores_b, 6))
        assert cell["exact"] == pytest.approx(2 / 6) and cell["within_1"] == pytest.approx(5 / 6)
        assert cell["mean_diff"] == pytest.approx(-0.5)
        assert cell["kappa_low"] <= cell["kappa"] <= cell["kappa_high"]
    assert row["keypoints"]["n"] > 6 and row["keypoints"]["exact"] < 1
    html = (judged / "b" / "agreement_vs_a" / "report.html").read_text(encoding="utf-8")
    assert "Do the judges agree?" in html and "kappa (quadratic)" in html
    assert "| personalization | 6 |" in done.stdout


def test_the_key_point_agreement_pairs_every_point_both_scored(judged):
    table, _, _ = compare_judges(judged / "a", judged / "b")
    a, b = pl.read_parquet(judged / "a" / "samples.parquet"), pl.read_parquet(judged / "b" / "samples.parquet")
    left, right = [], []
    for ka, kb in a.join(b, on="sample_id").select("judge_keypoints", "judge_keypoints_right").iter_rows():
        pa, pb = json.loads(ka), json.loads(kb)
        for group in pa:
            for point in pa[group]:
                left.append(pa[group][point])
                right.append(pb[group][point])
    cell = table.filter(scope="keypoints").row(0, named=True)
    assert cell["n"] == len(left) > 6 * 4
    assert cell["kappa"] == pytest.approx(quadratic_kappa(left, right, 3))
    assert cell["alpha"] == pytest.approx(ordinal_alpha(left, right, 3))


def test_kendalls_tau_and_the_flipped_pairs_of_two_rankings():
    a, b = [3.1, 2.0, 4.5, 1.2, 3.9], [2.8, 2.2, 3.0, 1.0, 3.5]
    result = ranking(a, b, ["c1", "c2", "c3", "c4", "c5"], "personalization")
    assert result["tau"] == pytest.approx(kendall_tau(a, b))
    assert json.loads(result["flips"]) == [["c3", "c5"]] and result["metric"] == "personalization"


def test_two_sweeps_pair_job_by_job_and_rank_their_checkpoints(judged, tmp_path):
    """Sweeps of two checkpoints each (job i of A with job i of B): a ranking row, and every case
    of both jobs in the agreement."""
    for sweep, run in (("sa", "a"), ("sb", "b")):
        for job, shift in ((0, 0), (1, 1)):
            folder = tmp_path / sweep / str(job)
            shutil.copytree(judged / run, folder)
            samples = pl.read_parquet(folder / "samples.parquet")
            lowered = samples.with_columns((pl.col("judge_personalization") - shift).clip(0, 5))
            lowered.write_parquet(folder / "samples.parquet")
    table, ranked, _ = compare_judges(tmp_path / "sa", tmp_path / "sb")
    assert table.filter(scope="personalization")["n"].item() == 12
    row = ranked.row(0, named=True)
    assert row["jobs"] == 2 and row["tau"] == pytest.approx(1.0) and json.loads(row["flips"]) == []
    with pytest.raises(Exception, match="2 runs"):
        compare_judges(tmp_path / "sa", judged / "b")


def test_a_rejudge_override_replaces_the_runs_own_of_the_same_key():
    from inference.rejudge import merged_overrides

    saved = ["dataset=etapp", "engine@roles.judge.engine=script", "roles.judge.engine.script=a.jsonl", "+x=1",
             "engine=script", "engine.script=s.jsonl", "roles.judge.model.path=j"]
    assert merged_overrides(saved, ["engine@roles.judge.engine=openai", "++x=2", "roles.judge.model.path=m"]) == [
        "dataset=etapp", "engine=script", "engine.script=s.jsonl", "engine@roles.judge.engine=openai", "++x=2",
        "roles.judge.model.path=m"], "the old judge engine's own option goes with it"
    assert merged_overrides(saved, ["engine=replay"], {"engine", "dataset"})[-4:] == [
        "roles.judge.engine.script=a.jsonl", "+x=1", "roles.judge.model.path=j", "engine=replay"]


@pytest.mark.parametrize("spelling", ["same", "symlink"])
def test_judge_out_naming_the_run_itself_is_refused_without_overwrite(judged, tmp_path, spelling):
    """--out the run dir (as given, or through a symlink to it) exists like any other dir:
    refused with the same error, the run untouched; only --overwrite rewrites it."""
    run = shutil.copytree(judged / "a", tmp_path / "a")
    out = {"same": run, "symlink": tmp_path / "link"}[spelling]
    if spelling == "symlink":
        out.symlink_to(run, target_is_directory=True)
    before = {p.name: p.stat().st_mtime_ns for p in run.iterdir() if p.is_file()}
    done = warm_toolsweep(["judge", str(run), "--out", str(out)], timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"toolsweep judge: error: --out {out} exists (it is the run dir {run} itself); name a new dir, or " \
           "rewrite the run with --overwrite" in done.stderr
    assert {p.name: p.stat().st_mtime_ns for p in run.iterdir() if p.is_file()} == before
