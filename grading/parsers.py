"""Turn a model's raw output into a tool call: the benchmark's official parser and a robust one.

Both return a :class:`ParsedCall`; neither raises on bad model output, because a
malformed answer is a graded sample, not an error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# The evaluation script of the benchmark whose scorer reads answers with it (grading/scorers/),
# verbatim: `re.search` with no flags (so `.` stops at a newline), then `json.loads` of the match.
OFFICIAL_PATTERN = re.compile(r'\{.*"tool_name":\s*".*?",\s*"parameters":\s*\{.*?\}\}')


@dataclass(frozen=True)
class ParsedCall:
    """A parsed call, or why there is none.

    `tool_name` and `parameters` are the decoded values as the model wrote them (the
    parameters may be any JSON value: graders compare it with the gold object).
    """

    ok: bool
    tool_name: Any = None
    parameters: Any = None
    error: str | None = None


def _failed(reason: str) -> ParsedCall:
    return ParsedCall(ok=False, error=reason)


def parse_official(output: str | None) -> ParsedCall:
    """The paper's scoring: first regex match, `json.loads`, top-level `tool_name` required."""
    if not output:
        return _failed("empty")
    match = OFFICIAL_PATTERN.search(output)
    if match is None:
        return _failed("no_match")
    return _decoded_call(match.group())


def parse_json(output: str | None) -> ParsedCall:
    """Robust parser: the first JSON object, anywhere in the text, with a top-level `tool_name`.

    Scans left to right and tries `raw_decode` at every `{`, so code fences, prose around
    the call, newlines inside it and key order do not matter. A `parameters` value that is
    a string holding a JSON object (models often double-encode it) is decoded.
    """
    if not output:
        return _failed("empty")
    decoder = json.JSONDecoder()
    start = output.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(output, start)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict) and "tool_name" in value:
            return ParsedCall(ok=True, tool_name=value["tool_name"],
                              parameters=decode_nested(value.get("parameters")))
        start = output.find("{", start + 1)
    return _failed("no_call")


def parse_whole_json(output: str | None) -> ParsedCall:
    """Strict parser: the whole answer (surrounding whitespace aside) is one JSON object with
    a top-level `tool_name`. The `official` reading for benchmarks whose own pipelines take
    the call as structured output rather than searching text for it.
    """
    if not output or not output.strip():
        return _failed("empty")
    return _decoded_call(output)


def _decoded_call(text: str) -> ParsedCall:
    """`json.loads` of the whole text, which must be an object with a top-level `tool_name`."""
    try:
        call = json.loads(text)
    except json.JSONDecodeError:
        return _failed("json_decode")
    if not isinstance(call, dict) or "tool_name" not in call:
        return _failed("no_tool_name")
    return ParsedCall(ok=True, tool_name=call["tool_name"], parameters=call.get("parameters"))


def decode_nested(parameters: Any) -> Any:
    """A parameters value given as a string holding a JSON object, decoded (models often double-encode it)."""
    if isinstance(parameters, str):
        try:
            decoded = json.loads(parameters)
        except json.JSONDecodeError:
            return parameters
        if isinstance(decoded, dict):
            return decoded
    return parameters
