"""Candidate tools -> the JSON schema of exactly one call, and its per-backend grammar form.

A call is `{"tool_name": <one candidate's name>, "parameters": {...}}`: one `anyOf` branch
per candidate tool, the name as a constant, its declared parameters (required ones
required, no extra keys). Pure translation: no engine is imported here.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import Any

from grading.canonical import canonical_json

# Part of every generation's cache key: bump it when the schemas or their bounds change.
SCHEMA_VERSION = 2

# Declared parameter types disagree with some gold values (NUMBER given as "10" or "",
# STRING given as 10, BOOLEAN given as "true"), so every type also admits the forms the
# benchmark's gold uses; a schema that rejected gold calls would cap accuracy below 1.
_STRINGY = {"type": "string"}
_NUMBER = {"type": "number"}
_INTEGER = {"type": "integer"}
_BOOLEAN = {"type": "boolean"}
_SCALAR = {"anyOf": [_STRINGY, _NUMBER, _BOOLEAN]}
# Containers hold scalars only: an open nested-JSON grammar is large, and no benchmark's
# gold nests deeper. Gold values also give a container as a string ("a, b"), so strings stay.
_ARRAY = {"type": "array", "items": _SCALAR}
_OBJECT = {"type": "object", "additionalProperties": _SCALAR}
TYPE_SCHEMAS: dict[str, list[dict[str, Any]]] = {
    "NUMBER": [_NUMBER, _STRINGY],
    "INTEGER": [_INTEGER, _STRINGY],
    "BOOLEAN": [_BOOLEAN, _STRINGY],
    "STRING": [_STRINGY, _INTEGER],
    "ARRAY": [_ARRAY, _STRINGY, _INTEGER],
    "OBJECT": [_OBJECT, _STRINGY, _INTEGER],
}
# Other benchmarks' spellings of the same types.
TYPE_ALIASES = {"FLOAT": "NUMBER", "INT": "INTEGER", "BOOL": "BOOLEAN", "STR": "STRING",
                "LIST": "ARRAY", "DICT": "OBJECT"}
_DEFAULT_TYPE = [_STRINGY, _INTEGER]  # string, ENUM, DATE, GEOPOINT, ...: free text

# Bounds keep a small model from running away inside a value (an unclosed string eats the
# whole token budget and the call is lost). Outlines compiles a regex to an automaton whose
# size grows with the bound: a `maxLength: 64` schema took 52.8 s to compile against 1.7 s
# without, so under outlines strings stay unbounded and only numbers get a digit cap.
MAX_STRING_CHARS = 128
MAX_NUMBER_DIGITS = 15
# A small model also loops by repeating keys of an open object (`{"id":"1","id":"1",...}`) or
# items of a list; xgrammar and guidance bound both cheaply, outlines has no such bound.
MAX_OPEN_PROPERTIES = 8


def parameter_schema(declared_type: str | None, allowed: list[Any] | None = None) -> dict[str, Any]:
    """The value schema of one parameter, from its declared type and, where the tool lists
    them, its allowed values (an array parameter takes a list of them, or one alone)."""
    kind = str(declared_type or "").upper()
    kind = TYPE_ALIASES.get(kind, kind)
    if allowed:
        if kind == "ARRAY":
            return {"anyOf": [{"type": "array", "items": {"enum": list(allowed)}, "maxItems": len(allowed)},
                              {"enum": list(allowed)}]}
        return {"enum": list(allowed)}
    options = TYPE_SCHEMAS.get(kind, _DEFAULT_TYPE)
    return {"anyOf": [dict(o) for o in options]}


def parameters_schema(tool: dict[str, Any]) -> dict[str, Any]:
    """The schema of one tool's parameter object: declared parameters only, required ones required."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for group, is_required in (("required_parameters", True), ("optional_parameters", False)):
        for param in tool.get(group) or []:
            name = param["name"]
            if name in properties:  # declared twice: the first declaration wins
                continue
            properties[name] = parameter_schema(param.get("type"), param.get("enum"))
            if is_required:
                required.append(name)
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def tool_branch(tool: dict[str, Any], name_key: str = "tool_name", args_key: str = "parameters") -> dict[str, Any]:
    """The schema branch for calling one candidate tool (keys as the answer format names them)."""
    return {
        "type": "object",
        "properties": {name_key: {"const": tool["tool_name"]}, args_key: parameters_schema(tool)},
        "required": [name_key, args_key],
        "additionalProperties": False,
    }


# Declining to call, where a benchmark scores refusals: both fields null.
REFUSAL_BRANCH: dict[str, Any] = {
    "type": "object",
    "properties": {"tool_name": {"type": "null"}, "parameters": {"type": "null"}},
    "required": ["tool_name", "parameters"],
    "additionalProperties": False,
}


def call_schema(tools: list[dict[str, Any]], allow_refusal: bool = False, name_key: str = "tool_name",
                args_key: str = "parameters") -> dict[str, Any]:
    """The schema of one call to any of `tools` (duplicate tool names collapse to one branch),
    or, with `allow_refusal`, of a refusal. The native format names the keys `name` and
    `arguments` (or the family's own) and has no refusal branch: not calling is the refusal."""
    branches, seen = [], set()
    for tool in tools:
        if tool["tool_name"] not in seen:
            seen.add(tool["tool_name"])
            branches.append(tool_branch(tool, name_key, args_key))
    if allow_refusal:
        branches.append(REFUSAL_BRANCH)
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


_JSON_TYPES = {"NUMBER": "number", "INTEGER": "integer", "BOOLEAN": "boolean", "ARRAY": "array",
               "OBJECT": "object"}


def function_specs(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Schema-form tools as the function specs chat templates take (`tools=`), with JSON types."""
    specs = []
    for tool in tools:
        properties: dict[str, Any] = {}
        for group in ("required_parameters", "optional_parameters"):
            for param in tool.get(group) or []:
                kind = str(param.get("type") or "").upper()
                properties.setdefault(param["name"], {
                    "type": _JSON_TYPES.get(TYPE_ALIASES.get(kind, kind), "string"),
                    **({"description": param["description"]} if param.get("description") else {}),
                    **({"enum": param["enum"]} if param.get("enum") else {})})
        required = [p["name"] for p in tool.get("required_parameters") or []]
        specs.append({"type": "function", "function": {
            "name": tool["tool_name"], "description": tool.get("tool_description") or tool.get("description") or "",
            "parameters": {"type": "object", "properties": properties, "required": required}}})
    return specs


def cap_strings(schema: Any, max_chars: int | None) -> Any:
    """A copy of `schema` whose strings hold at most `max_chars` characters (None: unchanged).

    A small model can loop inside a string value until the token budget runs out, and the
    cut-off call is lost; a cap makes the grammar close every string in time. Configuration
    allows it only for xgrammar and guidance: outlines' automaton grows with the cap.
    """
    if max_chars is None or not isinstance(schema, (dict, list)):
        return schema
    if isinstance(schema, list):
        return [cap_strings(s, max_chars) for s in schema]
    out = {k: cap_strings(v, max_chars) for k, v in schema.items()}
    if out.get("type") == "string":
        out["maxLength"] = max_chars
    return out


def named_call_schema(names: list[str], args_key: str = "arguments") -> str:
    """One native call of any of `names` with an arguments object whose contents are free (an agent's
    step: its arguments are checked by the tool that runs it), as compact JSON."""
    return compact_json({"type": "object", "properties": {"name": {"enum": list(names)}, args_key: {"type": "object"}},
                         "required": ["name", args_key], "additionalProperties": False})


def compact_json(value: Any) -> str:
    """JSON on one line with key order kept: a schema's property order is the output's order."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def schema_id(schema: dict[str, Any]) -> str:
    """Short hash of the canonical (sorted-key) schema: equal candidate sets share one id."""
    return hashlib.sha256(canonical_json(schema).encode()).hexdigest()[:16]


def backend_schema(schema_json: str, backend: str) -> str:
    """The compact, order-kept schema with the bounds `backend` compiles cheaply."""
    return compact_json(bounded(json.loads(schema_json), backend))


def bounded(schema: Any, backend: str) -> Any:
    """A copy of `schema` with value bounds the given backend compiles cheaply."""
    if isinstance(schema, list):
        return [bounded(s, backend) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: bounded(v, backend) for k, v in schema.items()}
    kind = out.get("type")
    if backend == "outlines":
        return _outlines_bounds(out) if kind in ("integer", "number") else out
    if kind == "string" and "pattern" in out:
        pass  # a pattern carries its own bound; xgrammar refuses a pattern with a length bound
    elif kind == "string":
        out["maxLength"] = min(out.get("maxLength", MAX_STRING_CHARS), MAX_STRING_CHARS)
    elif kind == "object" and isinstance(out.get("additionalProperties"), dict):
        out.setdefault("maxProperties", MAX_OPEN_PROPERTIES)
    elif kind == "array":
        out.setdefault("maxItems", MAX_OPEN_PROPERTIES)
    elif kind in ("integer", "number"):
        out.update(minimum=-(10 ** MAX_NUMBER_DIGITS - 1), maximum=10 ** MAX_NUMBER_DIGITS - 1)
    return out


def _outlines_bounds(schema: dict[str, Any]) -> dict[str, Any]:
    integer = {"type": "integer", "minDigits": 1, "maxDigits": MAX_NUMBER_DIGITS}
    if schema["type"] == "integer":
        return integer
    # outlines_core 0.2.14 turns minDigitsInteger=1 into "at least two digits" for a
    # non-zero number, so single-digit integers come from the integer branch.
    number = {"type": "number", "minDigitsInteger": 1, "maxDigitsInteger": MAX_NUMBER_DIGITS,
              "minDigitsFraction": 1, "maxDigitsFraction": 8,
              "minDigitsExponent": 1, "maxDigitsExponent": 3}
    return {"anyOf": [integer, number]}


@lru_cache(maxsize=4096)
def outlines_regex(schema_json: str) -> str:
    """From an order-kept schema (`compact_json`), the compact (no optional whitespace) regex Outlines builds for a canonical schema.

    vLLM's own outlines backend allows a space between tokens (`{ "tool_name"`), which the
    official tool-name regex (grading.parsers) rejects, and it refuses `disable_any_whitespace`;
    building the regex here with an empty whitespace pattern gives the compact form.
    """
    from outlines_core.json_schema import build_regex_from_schema

    return build_regex_from_schema(backend_schema(schema_json, "outlines"), whitespace_pattern="")
