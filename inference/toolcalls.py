"""The models' own tool-call formats (`prompt.format=native`): how a family wraps a call, how its
grammar is built per structured-output backend, and the tool block for templates without tools.

Pure translation; reading the calls back is vLLM's own parser (inference/engines/vllm_tool_parsers.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from inference.config import GRAMMAR_CONSTRAINTS
from inference.errors import ConfigError
from inference.schemas import backend_schema, call_schema, compact_json, outlines_regex


@dataclass(frozen=True)
class CallFormat:
    """How one model family writes a tool call in text."""

    parser: str
    """vLLM's tool parser name (`vllm.tool_parsers`)."""
    prefix: str
    suffix: str
    args_key: str
    separator: str = "\n"
    """Between two calls of one answer."""
    marker: str = ""
    """A string whose presence in a chat template identifies the family."""


# Families whose call is one JSON object between fixed strings; a model.tool_parser outside these
# is still read by vLLM's parser of that name, under free decoding.
CALL_FORMATS: dict[str, CallFormat] = {
    "hermes": CallFormat("hermes", "<tool_call>\n", "\n</tool_call>", "arguments", marker="<tool_call>"),
    "llama3_json": CallFormat("llama3_json", "<|python_tag|>", "", "parameters", separator="; ",
                              marker="<|python_tag|>"),
    "mistral": CallFormat("mistral", "[TOOL_CALLS][", "]", "arguments", separator=", ", marker="[TOOL_CALLS]"),
}
DEFAULT_PARSER = "hermes"

# For a chat template that ignores `tools=`: a Hermes-style tool block in the system turn, in
# toolsweep's words, so the model still sees the tools and the call format the parser reads.
_TOOL_BLOCK = (
    "# Tools\n\nYou can call the functions described below, one JSON signature per line, between "
    "<tools> and </tools>:\n<tools>\n{specs}\n</tools>\n\nTo call a function, write a JSON object with its "
    "name and arguments between <tool_call> and </tool_call>:\n<tool_call>\n"
    '{{"name": <function name>, "arguments": <arguments as a JSON object>}}\n</tool_call>')


def guess_parser(chat_template: str | None) -> str:
    """The family parser a chat template implies (hermes when nothing identifies it)."""
    for name, fmt in CALL_FORMATS.items():
        if fmt.marker and fmt.marker in (chat_template or ""):
            return name
    return DEFAULT_PARSER


def call_format(parser: str) -> CallFormat | None:
    """The format of a known family, or None for other vLLM parsers (read, never constrained)."""
    return CALL_FORMATS.get(parser)


def tool_block(tool_specs: list[dict[str, Any]]) -> str:
    """The fallback tool block for a template with no tool support."""
    return _TOOL_BLOCK.format(specs="\n".join(json.dumps(s, ensure_ascii=False) for s in tool_specs))


def native_call_schema(tools: list[dict[str, Any]], fmt: CallFormat) -> dict[str, Any]:
    """The schema of one native call to any of the tools, in the family's keys (no refusal branch:
    not calling is the refusal)."""
    return call_schema(tools, False, name_key="name", args_key=fmt.args_key)


def native_schema(tools: list[dict[str, Any]], fmt: CallFormat) -> str:
    """The compact, order-kept schema of one native call to any of the tools."""
    return compact_json(native_call_schema(tools, fmt))


def native_regex(schema_json: str, fmt: CallFormat, max_calls: int) -> str:
    """Outlines: a regex of 1..max_calls wrapped calls, each matching the schema."""
    one = re.escape(fmt.prefix) + f"(?:{outlines_regex(schema_json)})" + re.escape(fmt.suffix)
    more = f"(?:{re.escape(fmt.separator)}{one}){{0,{max_calls - 1}}}" if max_calls > 1 else ""
    return one + more


def native_structural_tag(schema_json: str, fmt: CallFormat, backend: str, max_calls: int) -> str:
    """xgrammar: a structural tag forcing 1..n wrapped calls (the schema with xgrammar's bounds)."""
    tag = {"type": "tag", "begin": fmt.prefix, "end": fmt.suffix,
           "content": {"type": "json_schema", "json_schema": json.loads(backend_schema(schema_json, backend))}}
    body = tag if max_calls == 1 else {"type": "tags_with_separator", "tags": [tag], "separator": fmt.separator,
                                       "at_least_one": True, "stop_after_first": False}
    return json.dumps({"type": "structural_tag", "format": body}, ensure_ascii=False)


def native_lark(schema_json: str, fmt: CallFormat, backend: str, max_calls: int) -> str:
    """guidance: a Lark grammar of 1..n wrapped calls, the call as an embedded JSON schema."""
    schema = backend_schema(schema_json, backend)
    lines = [f"call: {json.dumps(fmt.prefix)} %json {schema} {json.dumps(fmt.suffix)}" if fmt.suffix
             else f"call: {json.dumps(fmt.prefix)} %json {schema}"]
    start = "start: call" + (f" ({json.dumps(fmt.separator)} call){{0,{max_calls - 1}}}" if max_calls > 1 else "")
    return "\n".join([start, *lines])


def request_grammar(request: Any, backend: str) -> dict[str, Any] | None:
    """The structured-output constraint of an engine Request under `backend` (None: free)."""
    return grammar_spec(*grammar_key(request), backend)


def grammar_key(request: Any) -> tuple:
    """What decides a request's grammar: requests with equal keys share one compiled grammar."""
    return (request.schema_json, request.call_format, request.max_calls,
            getattr(request, "calls_optional", False), getattr(request, "regex", None),
            getattr(request, "grammar", None))


def grammar_spec(schema_json: str | None, call_format: str | None, max_calls: int, optional: bool,
                 regex: str | None, grammar: str | None, backend: str) -> dict[str, Any] | None:
    """The structured-output constraint of a request under `backend`, as vLLM's
    `StructuredOutputsParams` fields (the in-process engine) or the server's `structured_outputs`
    request field (engine=openai): {"regex" | "json" | "structural_tag" | "grammar": ...}.

    `regex` (one agent step) and `grammar` (a Lark grammar of a whole answer) win over the schema;
    `optional` lets the answer be plain text instead of calls (an agent's final answer)."""
    if backend == "none":
        return None
    if regex is not None:
        return {"regex": regex}
    if grammar is not None:
        if backend not in GRAMMAR_CONSTRAINTS:
            raise ConfigError(f"decoding.constraint={backend} cannot apply a Lark grammar (the benchmark's answer "
                              f"grammar); use one of {list(GRAMMAR_CONSTRAINTS)}, or none")
        return {"grammar": grammar}
    if schema_json is None:
        return None
    if optional and call_format is not None:
        return optional_calls_spec(schema_json, CALL_FORMATS[call_format], max_calls, backend)
    if call_format is None:
        if backend == "outlines":
            return {"regex": outlines_regex(schema_json)}
        return {"json": backend_schema(schema_json, backend)}
    fmt = CALL_FORMATS[call_format]
    if backend == "outlines":
        return {"regex": native_regex(schema_json, fmt, max_calls)}
    if backend == "xgrammar":
        return {"structural_tag": native_structural_tag(schema_json, fmt, backend, max_calls)}
    return {"grammar": native_lark(schema_json, fmt, backend, max_calls)}


# Text that cannot open a call: an agent's final answer under an optional-call grammar.
_PLAIN_TEXT = r"[^<]+"


def optional_calls_spec(schema_json: str, fmt: CallFormat, max_calls: int, backend: str) -> dict[str, Any]:
    """Either plain text (the final answer) or 1..max_calls wrapped calls matching the schema."""
    if backend == "outlines":
        return {"regex": f"(?:{_PLAIN_TEXT}|{native_regex(schema_json, fmt, max_calls)})"}
    if backend == "xgrammar":
        tag = {"type": "tag", "begin": fmt.prefix, "end": fmt.suffix,
               "content": {"type": "json_schema", "json_schema": json.loads(backend_schema(schema_json, backend))}}
        return {"structural_tag": json.dumps(
            {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": [fmt.prefix.strip()],
                                                  "tags": [tag], "at_least_one": False,
                                                  "stop_after_first": False}}, ensure_ascii=False)}
    calls = native_lark(schema_json, fmt, backend, max_calls).replace("start: call", "calls: call", 1)
    return {"grammar": "\n".join(["start: TEXT | calls", f"TEXT: /{_PLAIN_TEXT}/", calls])}
