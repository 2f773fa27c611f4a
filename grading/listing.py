"""Lists and long texts in messages and pages: the first few items (characters) and how many
more, so an error or a report stays readable however long the input, and still says how much
there is."""

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


def truncated(text: object, limit: int) -> str:
    """`text` (None: "") cut at `limit` characters, saying how many more there were."""
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[:limit] + f" ... ({len(text) - limit} more characters)"
