"""Side tables of runs written before run.json listed them: `toolsweep grade` adds the list, and
merge stands in for it, from what the benchmark's solvers declare (no model, no data files)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from grading.sweep import Job
from grading.views import SIDE_TABLES, side_tables_in
from inference.benchmarks import benchmark_names, get_benchmark
from inference.merge import parts_side_tables
from inference.regrade import list_side_tables
from inference.solvers import declared_side_tables

# A benchmark whose solvers declare side tables, found through the registry, not by name.
BENCHMARK = next(b for b in benchmark_names() if len(declared_side_tables(get_benchmark(b).solvers)) > 1)
DECLARED = declared_side_tables(get_benchmark(BENCHMARK).solvers)


def _old_run(folder: Path, holds: int) -> dict:
    """A run dir whose run.json has no side-table list, holding the first `holds` declared tables."""
    folder.mkdir(parents=True)
    facts = {"status": "complete", "config": {"dataset": {"name": BENCHMARK}}}
    (folder / "run.json").write_text(json.dumps(facts), encoding="utf-8")
    for table in DECLARED[:holds]:
        pl.DataFrame({"sample_id": ["s-1"]}).write_parquet(folder / table.name)
    return facts


def test_grade_lists_the_side_tables_an_old_run_holds(tmp_path):
    _old_run(tmp_path / "run", holds=1)
    list_side_tables(tmp_path / "run")
    facts = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))
    assert side_tables_in(facts) == DECLARED[:1], "the declared tables the run holds, no other"
    assert facts["config"]["dataset"]["name"] == BENCHMARK, "the rest of run.json kept"


def test_grade_leaves_a_listed_run_as_it_is(tmp_path):
    facts = _old_run(tmp_path / "run", holds=2)
    (tmp_path / "run" / "run.json").write_text(json.dumps({**facts, SIDE_TABLES: []}), encoding="utf-8")
    list_side_tables(tmp_path / "run")
    assert json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))[SIDE_TABLES] == []


def test_merge_reads_the_parts_lists_and_stands_in_for_old_parts(tmp_path):
    solvers = get_benchmark(BENCHMARK).solvers
    old = [_old_run(tmp_path / str(i), holds=len(DECLARED)) for i in (0, 1)]
    jobs = [Job(i, tmp_path / str(i), "complete", None, (), None) for i in (0, 1)]
    assert parts_side_tables(jobs, old, solvers) == DECLARED
    listed = [{**f, SIDE_TABLES: [DECLARED[-1].fact()]} for f in old]
    assert parts_side_tables(jobs, listed, solvers) == DECLARED[-1:], "a part's own list wins"
