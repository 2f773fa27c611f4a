"""`toolsweep-gold`: write a benchmark's gold calls as replay predictions.

Replaying them (`engine=replay`) must give 1.0 on every metric: the check that the grader,
the adapter and the schemas agree with the benchmark before any model is trusted.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import polars as pl

from inference.adapters import adapters, load_dataset
from inference.errors import DatasetError


def gold_outputs(samples: pl.DataFrame) -> pl.DataFrame:
    """`{sample_id, output}` rows whose output is the gold call (or refusal) as compact one-line JSON."""
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
    parser = argparse.ArgumentParser(prog="toolsweep-gold", description=__doc__.splitlines()[0])
    parser.add_argument("dataset_path", type=Path, help="benchmark file or folder")
    parser.add_argument("out", type=Path, help="predictions file to write (.jsonl or .parquet)")
    parser.add_argument("--dataset", default="petoolbench", choices=sorted(adapters()),
                        help="benchmark adapter (dataset.name); default petoolbench")
    parser.add_argument("--settings", default=None,
                        help="comma-separated settings (default: all of the benchmark's), e.g. p,r")
    parser.add_argument("--limit", type=int, default=None, help="first N records of each setting")
    args = parser.parse_args(argv)
    settings = args.settings.split(",") if args.settings else adapters()[args.dataset].settings
    try:
        samples = load_dataset(args.dataset, args.dataset_path, settings, args.limit)
    except DatasetError as exc:
        parser.exit(2, f"toolsweep-gold: error: {exc}\n")
    print(write_predictions(gold_outputs(samples), args.out))


if __name__ == "__main__":
    main()
