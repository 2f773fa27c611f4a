"""`toolsweep gold`: write a benchmark's gold calls as replay predictions.

Replaying them (`engine=replay`) must give 1.0 on every metric: the check that the grader,
the loader and the schemas agree with the benchmark before any model is trusted. In the
native format the calls are written the way the model family writes them (Hermes-style
`<tool_call>` blocks by default), so the replay also exercises the family's parser.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import polars as pl

from inference.benchmarks import benchmark_names, default_benchmark, get_benchmark, load_dataset
from inference.config import NATIVE_FORMAT
from inference.errors import ConfigError, DatasetError
from inference.gold_answers import NATIVE_REFUSAL, gold_output, gold_outputs  # noqa: F401 (the verb's and tests' names)
from inference.toolcalls import CALL_FORMATS, DEFAULT_PARSER

def with_history(samples: pl.DataFrame, benchmark: Any, history: str, seed: int) -> pl.DataFrame:
    """The samples as a run with dataset.history=`history` sees them (and grades them)."""
    import dataclasses

    fields = {f.name for f in dataclasses.fields(benchmark.options)}
    if "history" not in fields or benchmark.select is None:
        raise ConfigError(f"{benchmark.name} has no dataset.history option; leave --history out")
    options = benchmark.options(name=benchmark.name, path="", history=history, history_seed=seed)
    problems = options.problems()
    if problems:
        raise ConfigError("; ".join(problems))
    return benchmark.select(samples, options)


def write_predictions(predictions: pl.DataFrame, path: Path) -> Path:
    """Write `{sample_id, output}` rows as JSONL (or Parquet for a .parquet path)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        predictions.write_parquet(path)
    else:
        predictions.write_ndjson(path)
    return path


def build_parser(prog: str = "toolsweep-gold") -> argparse.ArgumentParser:
    """The parser of `toolsweep gold` (it names the benchmarks; it loads none)."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("dataset_path", type=Path, help="benchmark file or folder")
    parser.add_argument("out", type=Path, help="predictions file to write (.jsonl or .parquet)")
    default = default_benchmark()
    parser.add_argument("--dataset", default=default,
                        help=f"benchmark (dataset.name): one of {benchmark_names()} or a module's dotted path; "
                             f"default {default} (the default dataset config's)")
    parser.add_argument("--settings", default=None,
                        help="comma-separated settings (default: those its config runs), e.g. p,r")
    parser.add_argument("--limit", type=int, default=None, help="first N records of each setting")
    parser.add_argument("--format", choices=("benchmark", NATIVE_FORMAT), default=None,
                        help="answer format (default: the benchmark's, as prompt.format)")
    parser.add_argument("--history", default=None,
                        help="the benchmark's dataset.history (e.g. swap: the counterfactual gold), as a run sets it")
    parser.add_argument("--history-seed", type=int, default=0, help="its dataset.history_seed")
    parser.add_argument("--tool-parser", choices=sorted(CALL_FORMATS), default=DEFAULT_PARSER,
                        help="native format: the family whose call format to write (default hermes)")
    return parser


def main(argv: list[str] | None = None, prog: str = "toolsweep-gold") -> None:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    try:
        benchmark = get_benchmark(args.dataset)
        settings = args.settings.split(",") if args.settings else (benchmark.default_settings or benchmark.settings)
        samples = load_dataset(args.dataset, args.dataset_path, settings, args.limit)
        if args.history is not None:
            samples = with_history(samples, benchmark, args.history, args.history_seed)
    except (DatasetError, ConfigError) as exc:
        parser.exit(2, f"{prog}: error: {exc}\n")
    fmt = args.format or benchmark.prompt_format
    print(write_predictions(gold_outputs(samples, fmt, args.tool_parser, benchmark), args.out))


if __name__ == "__main__":
    main()
