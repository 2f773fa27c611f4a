"""BFCL's reading of a model's answer into calls, reimplemented (never imported) from BFCL's code.

Prompt mode (`default_decode_ast_prompting` and `ast_parse` in BFCL's
`bfcl_eval/model_handler/utils.py`): the answer loses backticks, newlines and spaces at both ends,
gets a `[` in front and a `]` behind where it lacks them, loses single quotes at both ends, and is
parsed as one Python expression: a call, or a list / tuple / set of calls. Only keyword arguments
count (positional ones are dropped). A value is read by the rules of BFCL's `resolve_ast_by_type`,
quirks kept: a unary operator always negates its operand (`+5` reads -5), a bare name reads as its
text (`x` -> "x"), a call without keywords as its source text, a call with keywords as a nested
`{name: {...}}`, a subscript as its source text, arithmetic as `eval` computes it (BFCL `eval`s
it; here over literals only, and within the bounds of grading/scorers/_python_calls.py, so no
answer holds the grader: a longer answer or a larger value fails the reading). Anything else fails
the reading.

Native mode, Hermes family (BFCL's `QwenFCHandler`): the text after the last `</think>`, every
`<tool_call>\\n...\\n</tool_call>` block (exactly those newlines) decoded as JSON, blocks that do
not decode skipped; an item that is not an object with `name` and an `arguments` object fails the
reading.

A reading either gives the calls, `[{name: {param: value}}, ...]` as BFCL's checker takes them,
or fails with the reason; it never raises.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

from grading.scorers._python_calls import Arithmetic, Unreadable, dotted_name, parse_answer

_FC_BLOCK = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.DOTALL)


class Undecodable(Exception):
    """The answer does not read as calls (BFCL's decoder raised)."""


@dataclass(frozen=True)
class Decoded:
    """A reading of one answer: the calls, or why there are none."""

    calls: list[dict[str, Any]] | None
    """`[{name: {param: value}}, ...]`, or None where the reading failed."""
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.calls is not None


def decode_prompting(text: str) -> Decoded:
    """BFCL's prompt-mode decoding of a raw answer (see the module docstring)."""
    try:
        return Decoded(_decode_python(text))
    except (Undecodable, Unreadable, SyntaxError, ValueError, TypeError, AttributeError, RecursionError,
            MemoryError, OverflowError, ZeroDivisionError, KeyError, IndexError, AssertionError) as exc:
        return Decoded(None, f"{type(exc).__name__}: {exc}"[:300])


def _decode_python(text: str) -> list[dict[str, Any]]:
    text = text.strip("`\n ")
    if not text.startswith("["):
        text = "[" + text
    if not text.endswith("]"):
        text = text + "]"
    body = parse_answer(text.strip().strip("'"))
    arithmetic = Arithmetic()  # BFCL `eval`s arithmetic: computed here over literals, within bounds
    if isinstance(body, ast.Call):
        return [_call(body, arithmetic)]
    if not isinstance(body, (ast.List, ast.Tuple, ast.Set)):
        # BFCL reads `.elts` of whatever the expression is: an error for anything but a sequence
        raise Undecodable(f"the answer is a {type(body).__name__}, not a call or a list of calls")
    calls = []
    for element in body.elts:
        if not isinstance(element, ast.Call):
            raise Undecodable(f"an item of the list is a {type(element).__name__}, not a call")
        calls.append(_call(element, arithmetic))
    return calls


def _call(node: ast.Call, arithmetic: Arithmetic) -> dict[str, Any]:
    """{dotted name: {keyword: value}}; positional arguments are not read, as in BFCL."""
    return {dotted_name(node.func): {k.arg: _value(k.value, arithmetic) for k in node.keywords}}


def _value(node: ast.AST, arithmetic: Arithmetic) -> Any:
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        # BFCL negates the operand's `.value` whatever the operator: only a constant operand has one
        # that negates (a name, a nested operator or a string fails)
        if not isinstance(node.operand, ast.Constant):
            raise Undecodable(f"unary operator on a {type(node.operand).__name__}")
        return -node.operand.value
    if isinstance(node, ast.List):
        return [_value(v, arithmetic) for v in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise Undecodable("a ** entry in a dict")
        return {_value(k, arithmetic): _value(v, arithmetic) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.BinOp):
        return arithmetic.evaluate(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return ast.unparse(node) if not node.keywords else _call(node, arithmetic)
    if isinstance(node, ast.Tuple):
        return tuple(_value(v, arithmetic) for v in node.elts)
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"
    # BFCL's Lambda branch indexes the lambda's body expression, which always fails
    raise Undecodable(f"unsupported value {type(node).__name__}")


def after_thinking(text: str) -> str:
    """The text after the last `</think>` (newlines at its start dropped), as BFCL's Qwen handler keeps it."""
    return text.split("</think>")[-1].lstrip("\n") if "</think>" in text else text


def hermes_blocks(text: str) -> list[Any]:
    """Every `<tool_call>\\n...\\n</tool_call>` block of `text` decoded as JSON; one that does not
    decode is skipped, as BFCL skips it."""
    blocks = []
    for block in _FC_BLOCK.findall(text):
        try:
            blocks.append(json.loads(block))
        except (ValueError, RecursionError):
            continue
    return blocks


def decode_hermes_fc(text: str) -> Decoded:
    """BFCL's QwenFCHandler reading of a native answer (see the module docstring)."""
    calls = []
    for item in hermes_blocks(after_thinking(text)):
        if not isinstance(item, dict):
            return Decoded(None, f"a tool-call block holds a {type(item).__name__}, not an object")
        if "name" not in item or "arguments" not in item:
            return Decoded(None, f"a tool-call object lacks {'name' if 'name' not in item else 'arguments'}")
        if not isinstance(item["arguments"], dict):
            return Decoded(None, f"a call's arguments are a {type(item['arguments']).__name__}, not an object")
        try:
            calls.append({item["name"]: dict(item["arguments"])})
        except TypeError as exc:  # an unhashable name
            return Decoded(None, f"TypeError: {exc}")
    return Decoded(calls)


def decode_listed(calls: list[dict[str, Any]] | None) -> Decoded:
    """Calls another reader found (`[{"name", "arguments"}]`, e.g. vLLM's parser of a family BFCL
    reads with its own handler), in the checker's form."""
    if calls is None:
        return Decoded(None, "no reading")
    out = []
    for call in calls:
        args = call.get("arguments")
        if not isinstance(args, dict) or not isinstance(call.get("name"), str):
            return Decoded(None, "a call without a name or an arguments object")
        out.append({call["name"]: args})
    return Decoded(out)


def is_call_format(decoded: Any) -> bool:
    """BFCL's `is_function_calling_format_output`: a list of one-key dicts of dicts (`[]` included)."""
    return isinstance(decoded, list) and all(
        isinstance(item, dict) and len(item) == 1 and isinstance(next(iter(item.values())), dict) for item in decoded)


def has_call(decoded: Decoded) -> bool:
    """Whether the answer holds a call, as BFCL's relevance checks decide it (`is_empty_output`
    negated): read, in the call format, and not `[]` or `[{}]`."""
    calls = decoded.calls
    if not decoded.ok or not is_call_format(calls) or not calls:
        return False
    return not (len(calls) == 1 and len(calls[0]) == 0)
