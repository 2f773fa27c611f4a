"""BFCL's case ids: `<category>_<n>`, or live, `<category>_<n>-<doc>-<prompt>`."""

from __future__ import annotations

import re
from typing import Any

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
