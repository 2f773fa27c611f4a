"""How a sample's answer is read into calls, shared by the scorers.

An answer is either raw text in the benchmark's answer format (`{"tool_name", "parameters"}`)
or, in the native format, the `calls` column that inference filled with the model family's
own tool-call parser (`[{"name", "arguments"}, ...]`). Neither raises on bad model output.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from grading.parsers import ParsedCall, decode_nested, parse_json

NATIVE = "native"


def is_native(row: dict[str, Any]) -> bool:
    """Whether the sample was prompted in the model's native tool-call format."""
    return row.get("prompt_format") == NATIVE


@lru_cache(maxsize=4096)
def _decode(text: str) -> Any:
    return json.loads(text)


def native_calls(row: dict[str, Any]) -> list[ParsedCall]:
    """The calls the model family's parser read (an empty list: it found none)."""
    text = row.get("calls")
    if not text:
        return []
    return [ParsedCall(ok=True, tool_name=c.get("name"), parameters=c.get("arguments"))
            for c in _decode(text) if isinstance(c, dict)]


def robust_native_calls(output: str | None) -> list[ParsedCall]:
    """toolsweep's robust reading of a native answer: every JSON object in the text with a
    `name` and `arguments` (or `parameters`), wherever it sits (tags, fences, prose)."""
    if not output:
        return []
    decoder, calls, start = json.JSONDecoder(), [], output.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(output, start)
        except json.JSONDecodeError:
            value, end = None, start + 1
        if isinstance(value, dict) and "name" in value and ("arguments" in value or "parameters" in value):
            args = value.get("arguments", value.get("parameters"))
            calls.append(ParsedCall(ok=True, tool_name=value["name"], parameters=decode_nested(args)))
            start = output.find("{", end)
        else:
            start = output.find("{", start + 1)
    return calls


def first_call(calls: list[ParsedCall]) -> ParsedCall:
    """The first call, or a failed reading when there is none."""
    return calls[0] if calls else ParsedCall(ok=False, error="no_call")


def read_one(reading: str, row: dict[str, Any], official_text_parser) -> ParsedCall:
    """One call under a reading: `official` is the benchmark's parser (native rows: the family
    parser's first call), `json` the robust parser of either format."""
    if is_native(row):
        return first_call(native_calls(row) if reading == "official" else robust_native_calls(row["output"]))
    return official_text_parser(row["output"]) if reading == "official" else parse_json(row["output"])
