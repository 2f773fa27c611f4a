"""Canonical JSON: the one string form of tool arguments stored in every table."""

from __future__ import annotations

import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Sorted keys, compact separators, UTF-8 kept as is: equal values give equal strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
