"""`toolsweep gold`: write a benchmark's gold calls as replay predictions.

Replaying them (`engine=replay`) must give 1.0 on every metric: the check that the grader,
the loader and the schemas agree with the benchmark before any model is trusted. In the
native format the calls are written the way the model family writes them (Hermes-style
`<tool_call>` blocks by default), so the replay also exercises the family's parser.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable

import polars as pl

from inference.benchmarks import benchmark_names, default_benchmark, get_benchmark, load_dataset
from inference.config import NATIVE_FORMAT
from inference.errors import ConfigError, DatasetError
from inference.toolcalls import CALL_FORMATS, DEFAULT_PARSER

# A native answer that declines: text with no tool call.
NATIVE_REFUSAL = "I can't do that for you: it goes against the app's policy or your situation."


def gold_output(tool: str | None, params: str, fmt: str, parser: str = DEFAULT_PARSER) -> str:
    """The gold call (or refusal) as the answer format writes it, one line of compact JSON."""
    if fmt != NATIVE_FORMAT:
        return json.dumps({"tool_name": tool, "parameters": json.loads(params)}, ensure_ascii=False,
                          separators=(",", ":"))
    if tool is None:
        return NATIVE_REFUSAL
    family = CALL_FORMATS[parser]
    call = json.dumps({"name": tool, family.args_key: json.loads(params)}, ensure_ascii=False, separators=(",", ":"))
    return family.prefix + call + family.suffix


def gold_outputs(samples: pl.DataFrame, fmt: str = "benchmark", parser: str = DEFAULT_PARSER,
                 benchmark: Any = None) -> pl.DataFrame:
    """`{sample_id, output}` rows whose output is the gold answer in the given format: the
    benchmark's own gold writer's (`Benchmark.gold`) where it has one and writes that format,
    else the one gold call of `gold_tool` / `gold_params`."""
    own = benchmark.gold if benchmark is not None else None
    # whole rows only for a benchmark's own writer, which may read any column
    rows = samples if own is not None else samples.select("gold_tool", "gold_params")
    outputs = []
    for row in rows.iter_rows(named=True):
        written = own(row, fmt, parser) if own is not None else None
        outputs.append(written if written is not None else gold_output(row["gold_tool"], row["gold_params"], fmt, parser))
    return samples.select("sample_id").with_columns(pl.Series("output", outputs, dtype=pl.String))


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


def main(argv: list[str] | None = None, prog: str = "toolsweep-gold") -> None:
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
