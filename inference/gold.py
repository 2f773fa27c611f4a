"""`toolsweep-gold`: write a benchmark's gold calls as replay predictions.

Replaying them (`engine=replay`) must give 1.0 on every metric: the check that the grader,
the adapter and the schemas agree with the benchmark before any model is trusted.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import polars as pl

from inference.petoolbench import SETTINGS, load_petoolbench


def gold_outputs(samples: pl.DataFrame) -> pl.DataFrame:
    """`{sample_id, output}` rows whose output is the gold call as compact one-line JSON."""
    outputs = [json.dumps({"tool_name": tool, "parameters": json.loads(params)},
                          ensure_ascii=False, separators=(",", ":"))
               for tool, params in samples.select("gold_tool", "gold_params").iter_rows()]
    return samples.select("sample_id").with_columns(pl.Series("output", outputs, dtype=pl.String))


def write_predictions(predictions: pl.DataFrame, path: Path) -> Path:
    """Write `{sample_id, output}` rows as JSONL (or Parquet for a .parquet path)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        predictions.write_parquet(path)
    else:
        predictions.write_ndjson(path)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset_path", type=Path, help="benchmark file or folder")
    parser.add_argument("out", type=Path, help="predictions file to write (.jsonl or .parquet)")
    parser.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated, e.g. p,r")
    parser.add_argument("--limit", type=int, default=None, help="first N records of each setting")
    args = parser.parse_args(argv)
    samples = load_petoolbench(args.dataset_path, args.settings.split(","), args.limit)
    print(write_predictions(gold_outputs(samples), args.out))


if __name__ == "__main__":
    main()
