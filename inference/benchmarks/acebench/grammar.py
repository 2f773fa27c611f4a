"""ACEBench's answer format, `[ApiName(key1='value1', key2=2)]`: the regex constrained decoding
applies, and the gold answer written in it.

The grammar allows one call (every normal_preference gold is one call) to one of the case's
functions, its parameters in declared order, the required ones present, each value in a Python
literal form of its declared type; arguments are separated by ", " as the prompt's examples are.
ACEBench removes every whitespace character before reading, so the spaces change nothing.
"""

from __future__ import annotations

import re
from typing import Any

from inference.python_source import python_call_list

_STRING = r"""(?:'[^'\\\n]*'|"[^"\\\n]*")"""
_INTEGER = r"-?(?:0|[1-9][0-9]*)"
_NUMBER = _INTEGER + r"(?:\.[0-9]+)?"
_BOOLEAN = r"(?:True|False)"
_SCALARS = {"string": _STRING, "any": _STRING, "enum": _STRING, "integer": _INTEGER, "int": _INTEGER,
            "number": _NUMBER, "float": _NUMBER, "boolean": _BOOLEAN}
_LISTS = ("array", "tuple", "list", "list(string)", "list(enum)", "objectArray")
_REPEAT_SUFFIX = re.compile(r"_\d+$")


def value_regex(spec: dict[str, Any]) -> str:
    """A value of the parameter's declared type, as Python writes it."""
    kind = str(spec.get("type", "string"))
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind in _LISTS:
        items = spec.get("items")
        item = _SCALARS.get(items.get("type"), None) if isinstance(items, dict) else None
        item = item or f"(?:{_STRING}|{_NUMBER})"
        return rf"\[(?:{item}(?:, {item})*)?\]"
    if kind in ("object", "dict"):
        entry = f"{_STRING}: (?:{_STRING}|{_NUMBER}|{_BOOLEAN})"
        return rf"\{{(?:{entry}(?:, {entry})*)?\}}"
    return _STRING


def _arguments(items: list[tuple[str, bool]]) -> str:
    """Keyword arguments in the given order, each optional one optional, the required ones
    present, ", " between two: O(n^2) text, where listing the subsets would be exponential."""
    def rest(i: int) -> str:  # after at least one argument
        if i == len(items):
            return ""
        text, required = items[i]
        return (f", {text}" if required else f"(?:, {text})?") + rest(i + 1)

    def first(i: int) -> str:  # nothing written yet
        if i == len(items):
            return ""
        text, required = items[i]
        present = text + rest(i + 1)
        return present if required else f"(?:{present}|{first(i + 1)})"
    return first(0)


def call_regex(function: dict[str, Any]) -> str:
    """One call of the function."""
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    items = [(re.escape(name) + "=" + f"(?:{value_regex(spec)})", name in required)
             for name, spec in properties.items()]
    return re.escape(function["name"]) + r"\(" + _arguments(items) + r"\)"


def answer_regex(functions: list[dict[str, Any]]) -> str:
    """The whole answer: a list holding one call of one of the functions."""
    return r"\[(?:" + "|".join(call_regex(f) for f in functions) + r")\]"


def gold_answer(ground_truth: Any) -> str:
    """The gold calls in the answer format (a list of alternatives: the first), values as Python
    writes them, a repeated call's `_<n>` key suffix removed."""
    gold = ground_truth[0] if isinstance(ground_truth, list) else ground_truth
    return python_call_list((_REPEAT_SUFFIX.sub("", name), params) for name, params in gold.items())
