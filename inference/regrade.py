"""`toolsweep grade RUN_DIR`: re-grade a run or a sweep (grading/regrade.py), first adding the
columns a newer loader writes that the run's samples.parquet lacks (e.g. the
same-function sets of a miss diagnosis), read from the benchmark files named in its run.json.
Nothing is regenerated."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl

from grading import regrade as grading_regrade
from grading.scoring import scorer_of
from inference.benchmarks import load_dataset
from inference.errors import ToolsweepError


def refresh_inputs(samples: pl.DataFrame, run_dir: Path) -> pl.DataFrame:
    """`samples` with the scorer's optional inputs it lacks, joined by sample_id from the dataset
    the run read (a note, and the table unchanged, where that dataset cannot be read)."""
    wanted = [c for c in getattr(scorer_of(samples), "optional_inputs", ()) if c not in samples.columns]
    if not wanted:
        return samples
    dataset = _dataset_config(run_dir)
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


def _dataset_config(run_dir: Path) -> dict:
    path = run_dir / "run.json"
    facts = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return (facts.get("config") or {}).get("dataset") or {}


def main(argv: list[str] | None = None, prog: str = "toolsweep-grade") -> int:
    return grading_regrade.main(argv, refresh=refresh_inputs, prog=prog)


if __name__ == "__main__":
    sys.exit(main())
