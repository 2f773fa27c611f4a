"""The exception grading raises on purpose: a problem the user can fix, said without a traceback."""

from __future__ import annotations


class GradingError(ValueError):
    """Bad input to a grading tool (a missing file, mismatched runs, a bad argument).

    Subclasses ValueError so callers that already catch ValueError keep working; each
    message says what was wrong, the value, and the fix.
    """
