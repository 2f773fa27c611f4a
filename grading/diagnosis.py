"""Why a tool call missed: the tool outcome and the parameter outcome of one answer.

For a benchmark whose records give each query a set of same-function tools, two failures that one
tool accuracy mixes up come apart: a **preference miss** (a tool that does the job, from the
record's same-function set, but not the one this user prefers: the personalization failed) and a
**function miss** (a candidate that does something else: tool use failed). Parameter outcomes say
how a right tool's arguments went wrong. A scorer that grades with these declares them in its
outcome view (grading.views.OutcomeView: TOOL_OUTCOMES, OUTCOME_COLOURS).
"""

from __future__ import annotations

from typing import Any

CORRECT, PREFERENCE_MISS, FUNCTION_MISS = "correct", "preference_miss", "function_miss"
NOT_A_CANDIDATE, UNPARSED, FAILED = "not_a_candidate", "unparsed", "failed"
PRIOR_CHOICE = "prior_choice"
"""Under dataset.history=swap: the gold of the unswapped record, so the answer did not follow the
history (the model kept the provider it prefers anyway)."""
TOOL_OUTCOMES = (CORRECT, PRIOR_CHOICE, PREFERENCE_MISS, FUNCTION_MISS, NOT_A_CANDIDATE, UNPARSED, FAILED)
MISSING_KEY, EXTRA_KEY, WRONG_VALUE, TYPE_ONLY = "missing_key", "extra_key", "wrong_value", "type_only"
PARAM_OUTCOMES = (CORRECT, MISSING_KEY, EXTRA_KEY, WRONG_VALUE, TYPE_ONLY)
OUTCOME_COLOURS = {CORRECT: "#2ca02c", PRIOR_CHOICE: "#bcbd22", PREFERENCE_MISS: "#ff7f0e", FUNCTION_MISS: "#d62728",
                   NOT_A_CANDIDATE: "#9467bd", UNPARSED: "#7f7f7f", FAILED: "#1f1f1f"}
"""Each tool outcome's colour in report.html's figure."""


def tool_outcome(tool: Any, gold: str | None, same_function: list[str] | None,
                 candidates: list[str] | None, prior_gold: str | None = None) -> str | None:
    """The outcome of a parsed answer's tool; None when the record lacks the sets to tell
    (a run written before the loader added them). `prior_gold`: the unswapped gold of a
    dataset.history=swap sample."""
    if tool == gold:
        return CORRECT
    if prior_gold is not None and tool == prior_gold:
        return PRIOR_CHOICE
    if same_function is None or candidates is None:
        return None
    if tool in same_function:
        return PREFERENCE_MISS
    return FUNCTION_MISS if tool in candidates else NOT_A_CANDIDATE


def param_outcome(params: Any, gold: dict[str, Any]) -> tuple[str, list[str]]:
    """(outcome, the keys involved) of a right tool's parameters: missing keys first, then extra
    keys, then values; `type_only` when every differing value is equal after `str()` ("10" vs 10)."""
    if params == gold:
        return CORRECT, []
    if not isinstance(params, dict):
        return WRONG_VALUE, []
    missing = sorted(k for k in gold if k not in params)
    if missing:
        return MISSING_KEY, missing
    extra = sorted(k for k in params if k not in gold)
    if extra:
        return EXTRA_KEY, extra
    differing = sorted(k for k in gold if params[k] != gold[k])
    if all(str(params[k]) == str(gold[k]) for k in differing):
        return TYPE_ONLY, differing
    return WRONG_VALUE, differing
