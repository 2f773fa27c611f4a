"""Reading native tool calls with vLLM's own tool-call parsers (`vllm.tool_parsers`).

The only place besides vllm_offline.py that imports vllm, lazily. Calls are read after
generation, in inference, and stored as JSON `[{"name", "arguments"}]` in the `calls` column,
so grading never needs vLLM.
"""

from __future__ import annotations

import ast
import json
import logging
from typing import Any, Callable

from inference.errors import ConfigError


def parser_names() -> list[str]:
    """Every tool parser vLLM registers."""
    from vllm.tool_parsers import ToolParserManager

    return sorted(ToolParserManager.list_registered())


def decode_arguments(text: str) -> Any:
    """A call's arguments string as a value: JSON, else a Python literal, else {} (as the
    benchmark pipelines that call vLLM's parsers decode what they return)."""
    try:
        return json.loads(text)
    except (TypeError, json.JSONDecodeError):
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return {}


def call_reader(parser: str, tokenizer: Any) -> Callable[[str | None], list[dict[str, Any]]]:
    """A function from a model's output text to its calls, read by vLLM's parser `parser`."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.tool_parsers import ToolParserManager

    known = parser_names()
    if parser not in known:
        raise ConfigError(f"model.tool_parser must be one of vLLM's tool parsers {known}, got {parser!r}")
    try:
        instance = ToolParserManager.get_tool_parser(parser)(tokenizer)
    except RuntimeError as exc:  # the family's special tokens are missing from this tokenizer
        raise ConfigError(f"model.tool_parser={parser} does not fit this model's tokenizer ({exc}); pick the "
                          "parser of the model's family, e.g. hermes for Qwen-style <tool_call> tags") from None
    request = ChatCompletionRequest(messages=[])
    quiet = logging.getLogger("vllm.tool_parsers")

    def read(output: str | None) -> list[dict[str, Any]]:
        if not output:
            return []
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)  # parsers log a traceback for every malformed answer
        try:
            found = instance.extract_tool_calls(output, request)
        except Exception:  # noqa: BLE001 - a parser failing on one answer reads as no call
            return []
        finally:
            quiet.setLevel(level)
        if not found.tools_called:
            return []
        return [{"name": c.function.name, "arguments": decode_arguments(c.function.arguments)}
                for c in found.tool_calls]
    return read
