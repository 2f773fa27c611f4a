"""ACEBench's `normal` scoring (normal_single_turn_eval), as its repository does it; the reading and
the checker are grading/scorers/acebench/checker.py.

`official`: the whole answer, every whitespace character removed, read as a Python list of calls
(ACEBench's reader); a native-format answer is the calls the model family's parser read, each
`{name: arguments}`, as ACEBench reads function-calling models' answers. `extracted`: toolsweep's
lenient reading, the same rules applied to the text from the first `[` to the last `]` (an
answer in a code fence or with prose around it). An answer that cannot be read is graded, wrong
(`wrong_output_format`), as ACEBench counts it: accuracy is correct answers over every sample.
A sample whose generation failed is graded on the text it has (a cut-off answer ACEBench would
also read); one with no text at all is wrong.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from grading.scorers.acebench.checker import WRONG_FORMAT, Undecodable, check, decode
from grading.readings import is_native, native_calls, robust_native_calls
from grading.scoring import RowScorer, mean

FIELDS: dict[str, pl.DataType] = {
    "valid": pl.Boolean, "n_calls": pl.Int64, "tool": pl.String, "params": pl.String,
    "correct": pl.Boolean, "error_type": pl.String,
}
NO_ANSWER = "no_answer"
"""The generation left no text (too long a prompt, an engine error, a replay without the sample)."""


def calls_of(reading: str, row: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer's calls as `[{name: {param: value}}]` under a reading, or Undecodable."""
    if is_native(row):
        parsed = native_calls(row) if reading == "official" else robust_native_calls(row["output"])
        if not parsed and row.get("output") and reading == "official":
            raise Undecodable("the family parser found no call")
        return [{_name(c.tool_name): c.parameters} for c in parsed]
    text = row["output"]
    if reading == "extracted":
        start, end = text.find("["), text.rfind("]")
        text = text[start:end + 1] if 0 <= start < end else text
    return decode(text)


def _name(value: Any) -> str:
    return value if isinstance(value, str) else _text(value)


def _text(value: Any) -> str:
    """Decoded values as JSON text (a value JSON cannot hold, as Python writes it)."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        pass
    try:
        return repr(value)
    except ValueError:  # an integer past Python's digit limit for text
        return f"<a {type(value).__name__} too large to write>"


def grade(reading: str, row: dict[str, Any]) -> dict[str, Any]:
    """The grade fields of one ACEBench sample under one reading."""
    empty = {"valid": False, "n_calls": None, "tool": None, "params": None, "correct": False}
    if row["output"] is None:
        return {**empty, "error_type": NO_ANSWER}
    try:
        calls = calls_of(reading, row)
    except Undecodable:
        return {**empty, "error_type": WRONG_FORMAT}
    verdict = check(calls, json.loads(row["functions"]), json.loads(row["ground_truth"]))
    name, params = next(iter(calls[0].items())) if calls else (None, None)
    return {"valid": True, "n_calls": len(calls), "tool": None if name is None else _name(name),
            "params": None if name is None else _text(params), "correct": verdict.correct,
            "error_type": verdict.error_type}


SCORER = RowScorer(
    name="acebench",
    readings=("official", "extracted"),
    inputs=("functions", "ground_truth"),
    fields=FIELDS,
    metrics=(
        mean("accuracy", "correct", higher_is_better=True, headline=True,
             description="ACEBench's verdict: names, counts, required and allowed parameters, types, strings "
                         "by substring (numbers and booleans by type only)"),
        mean("format_valid", "valid", higher_is_better=True, ci=False,
             description="answers the reading could decode as a list of calls"),
    ),
    grade=grade,
    description="ACEBench normal_single_turn_eval: Python-list reading, normal_checker",
)
