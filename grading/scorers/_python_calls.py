"""Pieces BFCL's and ACEBench's checkers share, the same in both benchmarks' code: the string
normal form their values are compared in, and the dotted name of a call read with `ast`.

Private (a leading underscore): not a scorer, so `grading.scoring.scorer_names` leaves it out.
"""

from __future__ import annotations

import ast
import re

_STRIPPED = re.compile(r"[ ,./\-_*^]")


def standardize(text: str) -> str:
    """BFCL's `standardize_string`, ACEBench's too: spaces and `,./-_*^` removed, lower case, `'` as `"`."""
    return _STRIPPED.sub("", text).lower().replace("'", '"')


def dotted_name(func: ast.AST) -> str:
    """A call's function as written, `module.sub.name`: the attribute chain down to a plain name
    (parts that are neither, such as a call or a subscript, are left out)."""
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))
