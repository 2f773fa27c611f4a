"""Lists in messages: the first few items and how many more, so an error stays readable however
many records are bad, and still says how many there are."""

from __future__ import annotations

from typing import Iterable


def list_first(items: Iterable[str], limit: int, separator: str = ", ") -> str:
    """The first `limit` of `items` joined by `separator`, then `... and N more` (after one more
    separator) when there are more: `a, b, ... and 3 more`."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit!r}; it is how many items a message lists")
    items = list(items)
    shown = separator.join(items[:limit])
    return shown + (f"{separator}... and {len(items) - limit} more" if len(items) > limit else "")
