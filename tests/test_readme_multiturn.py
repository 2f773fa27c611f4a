"""The docs' multi-turn worked example (docs/extending.md; toybench: an agent with a tool over
several turns, then a judge role), extracted into tmp_path and run as written with a scripted agent
and a scripted judge: no model, and no file of the project written. Then its second part: a second
judge, the agreement of the two (the scorer's judge view), two shards merged (the agent's side
table), and the case view."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import REPO
from tests.grading.test_agreement import quadratic_kappa
from tests.test_readme_example import BASH_BLOCK, PAGE, doc_part, run_bash, write_files

SUBSECTION = "### A multi-turn benchmark with a tool and a judge"
FILES = {"data/toybench/test.jsonl", "toybench/benchmark.py", "toybench/agent.py", "toybench/judge.py",
         "toybench/scorer.py", "conf/dataset/toybench.yaml", "agent.jsonl", "judge.jsonl", "judge_b.jsonl"}
RUN = Path("runs") / "toybench-script"
JUDGE_B = Path("runs") / "toybench-judge-b"
MERGED = Path("runs") / "toybench-shards" / "merged"
# Paths whose contents no run writes or that change on their own (bytecode, the test runner's cache).
_UNWATCHED = {".git", ".venv", "__pycache__", ".pytest_cache"}


def project_files() -> dict[str, int]:
    """Every file of the repository tree (ignored ones too: outputs/ is ignored), by mtime."""
    found = {}
    for folder, dirs, names in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in _UNWATCHED]
        for name in names:
            path = Path(folder) / name
            found[str(path.relative_to(REPO))] = path.lstat().st_mtime_ns
    return found


@pytest.fixture
def example(tmp_path) -> tuple[str, Path, dict[str, str]]:
    """The subsection, the folder its files were written to, and the environment to run it in."""
    section = doc_part(PAGE, SUBSECTION)
    assert set(write_files(section, tmp_path)) == FILES
    # a cache of its own: nothing is read from or written to the user's toolsweep cache; this
    # checkout's toolsweep first on the path, whichever one the venv installed
    return section, tmp_path, {"TOOLSWEEP_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}


def run_second_block(section: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The subsection's second ```bash block (after the first has run), as run_bash runs the first."""
    blocks = list(BASH_BLOCK.finditer(section))
    assert len(blocks) == 2, "the example has its run and then its views"
    base = {**os.environ, **env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", "-euc", blocks[1]["body"]], cwd=cwd, env=base, capture_output=True, text=True,
                          timeout=600)


def test_readme_multiturn_example_runs_its_agent_and_judge_and_touches_no_project_file(example):
    section, root, env = example
    before = project_files()
    done = run_bash(section, root, env)
    assert done.returncode == 0, done.stderr[-3000:]
    changed = {p for p, t in project_files().items() if before.get(p) != t} | (before.keys() - project_files().keys())
    assert not changed, f"the example wrote into the repository: {sorted(changed)}"
    # the pooled line the page says the run prints
    printed = re.search(r"`(\| all \| judge \|[^`]+\|)`", section)[1]
    assert printed in done.stdout, done.stdout

    samples = pl.read_parquet(root / RUN / "samples.parquet").sort("sample_id")
    got = samples.select("sample_id", "output", "failure", "turns", "tool_calls", "tool_errors", "judge_score",
                         "judge_points").rows()
    assert got == [
        ("test-1", "2 apples and a pear cost 1.30 EUR.", None, 3, 2, 0, 2, 2.0),  # two lookups, then the answer
        ("test-2", "About 1 EUR.", None, 3, 2, 1, 1, 1.0),  # a fruit it lacks: a tool error the agent read
        ("test-3", None, "turn_cap", 3, 3, 0, 0, 0.0),  # still calling at the cap: a row, scored 0 unasked
        ("test-4", "0.50 EUR", "judge_unreadable", 1, 0, 0, None, None),  # the judge gave no score
    ]
    assert samples["scorer"].unique().to_list() == ["toybench.scorer"]
    assert "Looks fine." in samples.filter(sample_id="test-4")["error"][0]
    transcript = json.loads(samples.filter(sample_id="test-2")["transcript"][0])
    assert [m["role"] for m in transcript] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert transcript[3]["content"].startswith("error: no fruit 'plums'") and transcript[5]["content"] == "0.30 EUR"

    metrics = pl.read_parquet(root / RUN / "metrics.parquet")
    pooled = metrics.filter(setting="all").to_dicts()[0]
    assert pooled["score"] == 1.0 and pooled["turn_cap"] == 0.25 and pooled["mean_turns"] == 2.5
    assert pooled["tool_error_rate"] == pytest.approx(1 / 7) and pooled["n_failed"] == 2
    assert "gold_schema_coverage" not in metrics.columns  # the scorer declared its count columns
    facts = json.loads((root / RUN / "run.json").read_text(encoding="utf-8"))
    assert facts["roles"]["judge"]["engine"] == "script" and facts["engine"] == "script"
    # the agent's declared side table, listed by the run and shown by the scorer's case view
    assert [t["name"] for t in facts["side_tables"]] == ["messages.parquet"]
    messages = pl.read_parquet(root / RUN / "messages.parquet")
    assert messages.filter(sample_id="test-2").sort("index")["content"].to_list() == [m["content"] for m in transcript]
    assert messages.filter(tool_error=True)["sample_id"].to_list() == ["test-2"]
    cases = (root / RUN / "cases.html").read_text(encoding="utf-8")
    assert all(f"test-{i}" in cases for i in range(1, 5)) and "no fruit &#39;plums&#39;" in cases
    assert 'href="cases.html"' in (root / RUN / "report.html").read_text(encoding="utf-8")


def test_readme_multiturn_views_agreement_and_merged_shards(example):
    """Second judge, agreement (the scorer's judge view), two shards merged (the agent's side
    table): every number from the files, and no project file written."""
    section, root, env = example
    assert run_bash(section, root, env).returncode == 0
    before = project_files()
    done = run_second_block(section, root, env)
    assert done.returncode == 0, done.stderr[-3000:]
    changed = {p for p, t in project_files().items() if before.get(p) != t} | (before.keys() - project_files().keys())
    assert not changed, f"the example wrote into the repository: {sorted(changed)}"

    # judge B rescored the same agent output: test-2 up to 2, test-4 now 1 (the agent never reran)
    a = pl.read_parquet(root / RUN / "samples.parquet").sort("sample_id")
    b = pl.read_parquet(root / JUDGE_B / "samples.parquet").sort("sample_id")
    assert b["judge_score"].to_list() == [2, 2, 0, 1] and b["output"].equals(a["output"])
    # agreement over the cases both scored (test-1..3): A (2, 1, 0) against B (2, 2, 0)
    printed = re.search(r"`(\| score \| 3 \|[^`]+\|)`", section)[1]
    assert printed in done.stdout, done.stdout
    table = pl.read_parquet(root / JUDGE_B / "agreement_vs_toybench-script" / "agreement.parquet")
    row = table.row(0, named=True)
    assert table["scope"].to_list() == ["score"], "one dimension, no key points declared"
    assert (row["n"], row["exact"], row["within_1"]) == (3, pytest.approx(2 / 3), 1.0)
    assert row["mean_diff"] == pytest.approx(1 / 3)
    assert row["kappa"] == pytest.approx(quadratic_kappa([2, 1, 0], [2, 2, 0], 3))

    # the two shards merged are the unsharded run, its side table included
    for name in ("samples.parquet", "messages.parquet"):
        merged, whole = pl.read_parquet(root / MERGED / name), pl.read_parquet(root / RUN / name)
        assert merged.select(whole.columns).equals(whole), name
    assert pl.read_parquet(root / MERGED / "metrics.parquet").equals(pl.read_parquet(root / RUN / "metrics.parquet"))
    facts = json.loads((root / MERGED / "run.json").read_text(encoding="utf-8"))
    assert [t["name"] for t in facts["side_tables"]] == ["messages.parquet"] and len(facts["shards"]) == 2
    parts = [pl.read_parquet(root / "runs" / "toybench-shards" / str(i) / "messages.parquet") for i in (0, 1)]
    assert sorted(p["sample_id"].n_unique() for p in parts) == [1, 3], "each shard wrote its own cases' messages"
    assert "no fruit &#39;plums&#39;" in (root / MERGED / "cases.html").read_text(encoding="utf-8")
    assert "merged runs/toybench-shards" in done.stdout


def test_readme_multiturn_example_with_its_judge_off_leaves_the_scores_empty(example):
    section, root, env = example
    bash = section.replace("hydra.run.dir=runs/toybench-script", "hydra.run.dir=runs/toybench-script roles.judge.enabled=false")
    assert bash != section
    done = run_bash(bash, root, env)
    assert done.returncode == 0, done.stderr[-3000:]
    samples = pl.read_parquet(root / RUN / "samples.parquet").sort("sample_id")
    assert samples["judge_score"].null_count() == samples.height  # skip: the judge's column, empty
    assert samples["failure"].to_list() == [None, None, "turn_cap", None]  # no judge failures either
    pooled = pl.read_parquet(root / RUN / "metrics.parquet").filter(setting="all").to_dicts()[0]
    assert pooled["score"] is None and pooled["turn_cap"] == 0.25
    assert json.loads((root / RUN / "steps" / "1.json").read_text(encoding="utf-8")) == {"skipped": True}


SHARDS_JUDGED_APART = """\
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
toolsweep -m "hydra.searchpath=[file://$PWD/conf]" dataset=toybench dataset.path=data/toybench \\
    engine=script engine.script=agent.jsonl \\
    engine@roles.judge.engine=script roles.judge.engine.script=judge.jsonl \\
    dataset.shards=2 "dataset.shard=range(2)" hydra.sweep.dir=runs/toybench-shards
toolsweep judge runs/toybench-shards/1 "hydra.searchpath=[file://$PWD/conf]" \\
    roles.judge.engine.script=judge_b.jsonl --overwrite
"""


def test_merge_refuses_shards_judged_by_different_judges(example):
    """Shard 1 judged again by judge B (`toolsweep judge SWEEP/1 --overwrite`), shard 0 still by
    judge A: job.json still names judge A for both, run.json names the judge that scored. Merge
    refuses, naming the shards and their judges, and leaves the merged run of judge A alone."""
    section, root, env = example
    base = {**os.environ, **env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-euc", SHARDS_JUDGED_APART], cwd=root, env=base, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    merged = (root / MERGED / "samples.parquet").read_bytes()
    merge = subprocess.run(["toolsweep", "merge", "runs/toybench-shards"], cwd=root, capture_output=True, text=True,
                           env={**base, "PYTHONPATH": f"{root}{os.pathsep}{env['PYTHONPATH']}"}, timeout=300)
    assert merge.returncode == 2, merge.stdout[-2000:] + merge.stderr[-2000:]
    assert ("toolsweep merge: error: runs/toybench-shards: its shards were judged differently, so their scores "
            "are not one run's: shard 0 by roles.judge.engine.script=judge.jsonl; shard 1 by "
            "roles.judge.engine.script=judge_b.jsonl") in merge.stderr, merge.stderr
    assert (root / MERGED / "samples.parquet").read_bytes() == merged
