"""Reading an FC turn's calls by the model family `model.tool_parser` names.

Upstream's open-model FC path has two readers, chosen by the model's name: Qwen-family Hermes
blocks and Llama-family JSON. They are reproduced here rule for rule (agent_text holds the
Hermes one). Any other parser vLLM ships reads its family's format through vLLM itself: upstream
has no reader for those families, so their reading is vLLM's, not upstream's (README).

A reading is `(content, calls)`: `content` is what the trajectory records as the assistant's
text, `calls` the calls in order, [] for a final answer, or None for a malformed call (the
format reminder follows).
"""

from __future__ import annotations

import ast
import json
from typing import Any, Callable, Optional

from . import agent_text as text

Reading = tuple[str, Optional[list[dict[str, Any]]]]
Reader = Callable[[str], Reading]
HERMES = "hermes"
LLAMA_PARSERS = ("llama3_json", "llama4_json")
_LLAMA_TOKENS = ("<|python_tag|>", "<|eom_id|>", "<|eot_id|>")


def read_hermes(output: str) -> Reading:
    """Upstream's Qwen-family reading: the text outside the blocks, and the blocks' calls."""
    calls = text.parse_fc_calls(output)
    if calls is None:
        return output, None
    return (text.fc_text_before_calls(output), calls) if calls else (output.strip(), [])


def read_llama(output: str) -> Reading:
    """Upstream's Llama-family reading. A text holding the end-of-turn token, or without the word
    "name", is a final answer. Otherwise the whole text (the Llama tokens removed) is the calls:
    split at every `;` and each piece read as JSON, else one Python literal (a dict, or a list
    of them); each call needs "name" and "parameters". Anything else is malformed, so a final
    answer that mentions a name gets the format reminder, as upstream's does. The answer text
    loses the end tokens but keeps `<|python_tag|>` (upstream's filter)."""
    if "<|eot_id|>" in output or "name" not in output:
        return _filtered(output), []
    body = output
    for token in _LLAMA_TOKENS:
        body = body.replace(token, "")
    calls = _llama_calls(body)
    return ("", calls) if calls else (_filtered(output), calls)


def _filtered(output: str) -> str:
    return output.replace("<|eot_id|>", "").replace("<|eom_id|>", "")


def _llama_calls(body: str) -> Optional[list[dict[str, Any]]]:
    """The calls ([] for an empty list, a final answer upstream), or None when malformed."""
    try:
        if ";" in body:  # even a `;` inside an argument splits the text (upstream's rule)
            found = [json.loads(piece) for piece in body.split(";")]
        else:
            value = ast.literal_eval(body.strip())
            found = [value] if isinstance(value, dict) else value
        return [{"name": c["name"], "arguments": c["parameters"]} for c in found]
    except (ValueError, SyntaxError, TypeError, KeyError, IndexError, MemoryError, RecursionError):
        return None


def fc_reader(parser: Optional[str], tokenizer: Callable[[], Any]) -> Reader:
    """The reader for `model.tool_parser` (Hermes when unset); `tokenizer` gives the model's
    tokenizer, loaded only for a family vLLM reads."""
    if parser in (None, HERMES):
        return read_hermes
    if parser in LLAMA_PARSERS:
        return read_llama
    return _vllm_reader(parser, tokenizer())


def _vllm_reader(parser: str, tokenizer: Any) -> Reader:
    """Another family, read by vLLM's parser of that name: no call is a final answer (vLLM's
    parsers do not tell a malformed call from none)."""
    from inference.engines.vllm_tool_parsers import call_reader

    calls_of = call_reader(parser, tokenizer)

    def read(output: str) -> Reading:
        calls = calls_of(output)
        return ("", calls) if calls else (output.strip(), [])
    return read
