"""Gold answers as a benchmark's answer format writes them: the one gold call (or refusal) of
`gold_tool` / `gold_params`, or the benchmark's own gold writer's text (`Benchmark.gold`). Read by
`toolsweep gold` (inference/gold.py) and by the single-call solver's gold coverage."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from inference.config import NATIVE_FORMAT
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
