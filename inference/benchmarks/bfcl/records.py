"""BFCL's records, as both kinds of question file hold them: case ids (`<category>_<n>`, or live,
`<category>_<n>-<doc>-<prompt>`) and function declarations in the schema form."""

from __future__ import annotations

import re
from typing import Any

# BFCL's declared types -> the schema form's (inference.schemas) for a native call's JSON schema
_SCHEMA_TYPES = {"string": "string", "integer": "integer", "float": "float", "boolean": "boolean",
                 "array": "array", "tuple": "array", "dict": "dict", "any": "any"}
ID = re.compile(r"^(?P<category>.+)_(?P<n>\d+)(-\d+-\d+)?$")


def id_problems(case: Any, category: str) -> list[str]:
    """What is wrong with a record's id for its category (empty when it is BFCL's form)."""
    if not isinstance(case, dict) or not isinstance(case.get("id"), str):
        return ["a record must be an object with a string id"]
    match = ID.match(case["id"])
    if not match or match["category"] != category:
        return [f"id {case['id']!r} is not <{category}>_<n> (BFCL's form)"]
    return []


def number(case_id: str) -> int:
    """The case's index in its file (the sample's `entry_id`)."""
    return int(ID.match(case_id)["n"])


def schema_tools(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The functions in the schema form (inference.schemas): required and optional parameters
    with their types, for a native call's JSON schema."""
    tools = []
    for function in functions:
        params = function["parameters"]
        required = set(params.get("required") or [])
        listed = [{"name": n, "type": _SCHEMA_TYPES.get(spec.get("type"), "any")}
                  for n, spec in params["properties"].items()]
        tools.append({"tool_name": function["name"], "description": function.get("description", ""),
                      "required_parameters": [p for p in listed if p["name"] in required],
                      "optional_parameters": [p for p in listed if p["name"] not in required]})
    return tools
