"""The one "first N ... and M more" list of the error messages (grading and inference)."""

from __future__ import annotations

import pytest

from grading.listing import list_first

# (id, items, limit, separator, expected, reason)
CASES = [
    ("none", [], 3, ", ", "", "nothing to list"),
    ("fewer", ["a", "b"], 3, ", ", "a, b", "all shown, no tail"),
    ("exactly", ["a", "b", "c"], 3, ", ", "a, b, c", "the limit itself has no tail"),
    ("more", ["a", "b", "c", "d", "e"], 3, ", ", "a, b, c, ... and 2 more", "the rest counted"),
    ("lines", ["x: bad", "y: bad", "z: bad"], 2, "\n  ", "x: bad\n  y: bad\n  ... and 1 more",
     "raise_problems' indented lines"),
    ("generator", (f"'{i}'" for i in range(4)), 1, ", ", "'0', ... and 3 more", "any iterable"),
]


@pytest.mark.parametrize("items,limit,separator,expected", [c[1:5] for c in CASES], ids=[c[0] for c in CASES])
def test_list_first(items, limit, separator, expected):
    assert list_first(items, limit, separator) == expected


def test_a_limit_below_one_is_refused():
    with pytest.raises(ValueError, match="limit must be at least 1, got 0"):
        list_first(["a"], 0)
