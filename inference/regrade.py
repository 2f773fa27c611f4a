"""`toolsweep grade RUN_DIR`: re-grade a run or a sweep (grading/regrade.py), first adding the
columns a newer loader writes that the run's samples.parquet lacks (e.g. the
same-function sets of a miss diagnosis), read from the benchmark files named in its run.json,
and, to a run.json written before runs listed their side tables, the side tables its benchmark's
solvers declare that the run holds (so its report shows its cases). Nothing is regenerated."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl

from grading import regrade as grading_regrade
from grading.files import atomic_write_text
from grading.scoring import scorer_of
from grading.views import SIDE_TABLES
from inference.benchmarks import get_benchmark, load_dataset
from inference.errors import ToolsweepError


def refresh_run(samples: pl.DataFrame, run_dir: Path) -> pl.DataFrame:
    """What `toolsweep grade` brings up to date in a run before grading it: run.json's side tables
    (list_side_tables), then the samples' inputs (refresh_inputs); run.json is read once."""
    facts = _facts(run_dir)
    list_side_tables(run_dir, facts)
    return refresh_inputs(samples, run_dir, facts)


def refresh_inputs(samples: pl.DataFrame, run_dir: Path, facts: dict | None = None) -> pl.DataFrame:
    """`samples` with the scorer's optional inputs it lacks, joined by sample_id from the dataset
    the run read (its run.json's `facts`, read here where not given; a note, and the table
    unchanged, where that dataset cannot be read)."""
    wanted = [c for c in getattr(scorer_of(samples), "optional_inputs", ()) if c not in samples.columns]
    if not wanted:
        return samples
    facts = _facts(run_dir) if facts is None else facts
    dataset = (facts.get("config") or {}).get("dataset") or {}
    try:
        table = load_dataset(dataset["name"], dataset["path"], dataset["settings"])
    except (ToolsweepError, KeyError, TypeError) as exc:
        print(f"toolsweep grade: note: {run_dir}: cannot read the run's dataset to add {wanted} ({exc}); "
              "grading without them", file=sys.stderr)
        return samples
    known = [c for c in wanted if c in table.columns]  # a run's own output (e.g. an agent's model_calls) is not there
    if not known:
        return samples
    return samples.join(table.select("sample_id", *known), on="sample_id", how="left", maintain_order="left")


def list_side_tables(run_dir: Path, facts: dict | None = None) -> None:
    """Add `side_tables` to a run.json written before runs listed them: the tables the benchmark's
    solvers declare that the run dir holds (a note, and run.json unchanged, where the benchmark
    cannot be found). `facts`: run.json as read ({}: none), read here where not given."""
    from inference.solvers import present_side_tables

    facts = _facts(run_dir) if facts is None else facts
    if not facts or SIDE_TABLES in facts:
        return
    path = run_dir / "run.json"
    try:
        solvers = get_benchmark(((facts.get("config") or {}).get("dataset") or {})["name"]).solvers
        tables = [t.fact() for t in present_side_tables(solvers, run_dir)]
    except (ToolsweepError, KeyError, TypeError) as exc:
        print(f"toolsweep grade: note: {run_dir}: cannot tell the run's side tables ({exc}); its report shows "
              "no cases", file=sys.stderr)
        return
    atomic_write_text(path, json.dumps({**facts, SIDE_TABLES: tables}, indent=2, default=str) + "\n")


def _facts(run_dir: Path) -> dict:
    """The run's run.json ({} where it has none)."""
    path = run_dir / "run.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def main(argv: list[str] | None = None, prog: str = "toolsweep-grade") -> int:
    return grading_regrade.main(argv, refresh=refresh_run, prog=prog)


if __name__ == "__main__":
    sys.exit(main())
