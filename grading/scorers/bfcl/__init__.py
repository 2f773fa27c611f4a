"""BFCL's AST scoring: the answer read as BFCL reads it, checked as BFCL's AST checker checks it.

`official` reading. Benchmark format: BFCL's prompt-mode decoding of the Python call list
(grading/scorers/bfcl/decoding.py). Native format: BFCL's Hermes-style FC reader for the hermes family,
vLLM's parser of the family otherwise (the `call_reader` column says which). Then, per category:

- AST categories (simple_python, multiple, parallel, parallel_multiple and their live forms):
  right when the answer decodes, is in the call format, and passes BFCL's checker against the
  possible answer (grading/scorers/bfcl/checker.py); an answer that does not decode is wrong;
- irrelevance, live_irrelevance: right when the answer holds no call (it does not decode, or
  decodes to `[]`);
- live_relevance: right when it holds at least one call.

An empty answer, or one cut at max_new_tokens, is graded on its text as BFCL grades it. A sample
with no text at all (its prompt too long for the context, an engine error) is graded as BFCL
grades its error message: no call (right for irrelevance). A replayed sample with no stored answer
is wrong everywhere.

Metrics: `accuracy` per category (correct / cases, BFCL's per-category score), and the pooled rows
of BFCL's summary figures: `non_live_ast` (the unweighted mean of simple_python, multiple,
parallel and parallel_multiple: BFCL's Non-Live AST, where simple is the mean of Python, Java
and JavaScript simple, and toolsweep has Python's only), `live_ast` (the four live AST
categories weighted by their cases, as BFCL weighs them) and `irrelevance_all` (the unweighted
mean of irrelevance and live_irrelevance, BFCL's Irrelevance Detection). `bfcl_summary` is that
figure on a pooled row (and the accuracy on a category's row). `leaderboard_figures` computes every
figure of BFCL's score table from category accuracies, with BFCL's treatment of missing ones.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Optional

import numpy as np
import polars as pl

from grading.scorers.bfcl import cases, multi_turn
from grading.scorers.bfcl.checker import check
from grading.scorers.bfcl.decoding import Decoded, decode_hermes_fc, decode_listed, decode_prompting, has_call, is_call_format
from grading.errors import GradingError
from grading.readings import is_native
from grading.scoring import Metric, RowScorer, mean

NON_LIVE_AST = ("simple_python", "multiple", "parallel", "parallel_multiple")
LIVE_AST = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
IRRELEVANCE = ("irrelevance", "live_irrelevance")
RELEVANCE = ("live_relevance",)
MULTI_TURN = multi_turn.MULTI_TURN
CATEGORIES = (*NON_LIVE_AST, "irrelevance", *LIVE_AST, "live_irrelevance", "live_relevance", *MULTI_TURN)
POOLS = {**{c: "non_live_ast" for c in NON_LIVE_AST}, **{c: "live_ast" for c in LIVE_AST},
         **{c: "irrelevance_all" for c in IRRELEVANCE}, **{c: "multi_turn" for c in MULTI_TURN}}
WEIGHTED = {"live_ast"}
"""Pools BFCL averages weighted by cases; the others are unweighted means of their categories."""
CODES = {c: i for i, c in enumerate(CATEGORIES)}
HERMES_READER = "bfcl_hermes"
"""The `call_reader` naming BFCL's own Hermes-style reader (the BFCL solver writes it)."""
MISSING = "missing"

FIELDS: dict[str, pl.DataType] = {
    "valid": pl.Boolean, "n_calls": pl.Int64, "calls": pl.String, "correct": pl.Boolean,
    "error_type": pl.String, "category": pl.Int64, "failed_turn": pl.Int64, "state_difference": pl.String,
}
MULTI_TURN_INPUTS = ("turns", "initial_config", "involved_classes", "held_out", "bfcl_code")
"""Columns of a multi-turn case: its user turns, the classes' starting state, the classes, the
held-out functions per turn, and where BFCL's environment code was read from (the solver writes it)."""


@lru_cache(maxsize=8192)
def _json(text: Optional[str]) -> Any:
    return None if text is None else json.loads(text)


def read_answer(row: dict[str, Any]) -> Decoded:
    """The row's answer read into calls as BFCL reads it (see the module docstring)."""
    if row["failure"] == MISSING:
        return Decoded(None, "missing: no stored answer")
    text = row["output"]
    if text is None:
        return Decoded(None, f"no answer text ({row['failure']}): BFCL grades its error message")
    if not is_native(row):
        return decode_prompting(text)
    reader = row.get("call_reader") or HERMES_READER
    if reader == HERMES_READER:
        return decode_hermes_fc(text)
    return decode_listed(_json(row.get("calls")))


def verdict(row: dict[str, Any], decoded: Decoded) -> tuple[bool, str | None]:
    """(right, BFCL's error type) of one read answer in its category."""
    category = row["setting"]
    if row["failure"] == MISSING:
        return False, "missing"
    if category in (*IRRELEVANCE, *RELEVANCE):
        called = has_call(decoded)
        if "irrelevance" in category:
            return (not called), ("irrelevance_error:decoder_success" if called else None)
        return called, (None if called else "relevance_error:decoder_failed")
    if not decoded.ok:
        return False, "ast_decoder:decoder_failed"
    if not is_call_format(decoded.calls):
        return False, "ast_decoder:decoder_wrong_output_format"
    result = check(category, _json(row["functions"]), decoded.calls, _json(row["possible_answer"]))
    return result.valid, result.error_type


def grade(reading: str, row: dict[str, Any]) -> dict[str, Any]:
    """The grade fields of one BFCL sample."""
    if row["setting"] in MULTI_TURN:
        return grade_multi_turn(row)
    decoded = read_answer(row)
    right, error_type = verdict(row, decoded)
    return {"valid": decoded.ok and is_call_format(decoded.calls),
            "n_calls": len(decoded.calls) if decoded.ok else None,
            "calls": _calls_text(decoded.calls) if decoded.ok else None,
            "correct": right, "error_type": error_type, "category": CODES.get(row["setting"]),
            "failed_turn": None, "state_difference": None}


def grade_multi_turn(row: dict[str, Any]) -> dict[str, Any]:
    """BFCL's multi-turn verdict (multi_turn.py): the answer is the steps' texts per turn (JSON)."""
    from grading.scorers.bfcl.environments import load

    if row["failure"] == MISSING:
        verdict = multi_turn.Verdict(False, "missing")
    else:
        code = row.get("bfcl_code")
        if not code:
            raise GradingError(f"{row['sample_id']}: no bfcl_code column: a multi-turn case is graded with BFCL's "
                               "environment code, whose location the run records; rerun it with dataset.bfcl_eval set")
        turns = _turns(row["output"])
        case = multi_turn.Case(row.get("bfcl_id") or row["sample_id"], row["setting"], _json(row["initial_config"]),
                               _json(row["involved_classes"]), _json(row["possible_answer"]))
        verdict = multi_turn.evaluate(turns, case, load(code).classes, is_native(row))
    calls = [c for turn in verdict.decoded for step in turn for c in step]
    return {"valid": verdict.error_type != multi_turn.INFERENCE_ERROR, "n_calls": len(calls),
            "calls": json.dumps(verdict.decoded, ensure_ascii=False) if verdict.decoded else None,
            "correct": verdict.valid, "error_type": verdict.error_type, "category": CODES.get(row["setting"]),
            "failed_turn": verdict.turn,
            "state_difference": json.dumps(verdict.differences, ensure_ascii=False) if verdict.differences else None}


def _turns(output: Optional[str]) -> Any:
    """The steps' texts per turn, or None (no answer: an engine error, a prompt too long)."""
    if output is None:
        return None
    try:
        return json.loads(output)
    except ValueError:
        return None


def _calls_text(calls: list[dict[str, Any]]) -> str:
    """The decoded calls as JSON text (a value JSON cannot hold, as Python writes it)."""
    try:
        return json.dumps(calls, ensure_ascii=False, default=repr)
    except ValueError:  # an integer past Python's digit limit for text
        return "<calls holding an integer too large to write>"


def pool_of(category: str) -> str | None:
    """The BFCL summary row a category is pooled into (None: live_relevance, its own figure)."""
    return POOLS.get(category)


def _summary(correct: np.ndarray, codes: np.ndarray) -> float | None:
    """BFCL's figure over the samples: a category's accuracy; over a pool, its categories' mean
    (unweighted, or weighted by cases for live AST); None across pools (BFCL has no such figure)."""
    keep = ~np.isnan(codes)
    correct, codes = np.nan_to_num(correct[keep]), codes[keep].astype(int)
    present = sorted(set(codes.tolist()))
    if not present:
        return None
    pools = {POOLS.get(CATEGORIES[c], CATEGORIES[c]) for c in present}
    if len(pools) != 1:
        return None
    if len(present) == 1 or pools <= WEIGHTED:
        return float(correct.mean())
    return float(np.mean([correct[codes == c].mean() for c in present]))


# --- BFCL's score table (eval_runner_helper.py), for category accuracies -------------------------

def _unweighted(scores: list[dict[str, Any]], na_if_missing: bool = True) -> dict[str, Any]:
    value = sum(s["accuracy"] for s in scores) / len(scores)
    missing = any(s["missing"] for s in scores)
    return {"accuracy": value, "count": sum(s["count"] for s in scores), "missing": missing and na_if_missing}


def _weighted(scores: list[dict[str, Any]], na_if_missing: bool = True) -> dict[str, Any]:
    total = sum(s["count"] for s in scores)
    value = sum(s["accuracy"] * s["count"] for s in scores) / total if total else 0.0
    missing = any(s["missing"] for s in scores)
    return {"accuracy": value, "count": total, "missing": missing and na_if_missing}


def _shares(scores: list[dict[str, Any]], weights: list[float]) -> dict[str, Any]:
    value = sum(s["accuracy"] * w / sum(weights) for s, w in zip(scores, weights))
    return {"accuracy": value, "count": sum(s["count"] for s in scores), "missing": False}


OVERALL_WEIGHTS = (10, 10, 10, 30, 40)
"""BFCL's Overall Acc: non-live, live, irrelevance, multi-turn, agentic."""
ABSENT = ("simple_java", "simple_javascript", "web_search_base", "web_search_no_snippet", "memory_kv", "memory_vector",
          "memory_rec_sum")
"""BFCL's categories toolsweep does not run (every figure that uses one shows N/A in BFCL)."""
WEB_SEARCH, MEMORY = ABSENT[2:4], ABSENT[4:]


def leaderboard_figures(accuracies: dict[str, tuple[float, int]]) -> dict[str, Optional[float]]:
    """BFCL's score-table figures from `{category: (accuracy, cases)}`, as its
    `generate_leaderboard_csv` computes them: a category not given counts as 0 and makes every
    figure that averages it N/A (None here), except the "overall" figures, which BFCL shows with
    the missing ones as 0 (Overall Acc always lacks the agentic categories here: treat it as such)."""
    def score(category: str) -> dict[str, Any]:
        if category in accuracies:
            value, count = accuracies[category]
            return {"accuracy": value, "count": count, "missing": False}
        return {"accuracy": 0.0, "count": 0, "missing": True}

    simple = _unweighted([score("simple_python"), score("simple_java"), score("simple_javascript")])
    non_live = [simple, score("multiple"), score("parallel"), score("parallel_multiple")]
    live = [score(c) for c in LIVE_AST]
    irrelevance = _unweighted([score("irrelevance"), score("live_irrelevance")])
    multi_turn = _unweighted([score(c) for c in MULTI_TURN], na_if_missing=False)
    agentic = _unweighted([_unweighted([score(c) for c in WEB_SEARCH]), _unweighted([score(c) for c in MEMORY])],
                          na_if_missing=False)
    figures = {
        "non_live_ast_summary": _unweighted(non_live), "non_live_simple": simple,
        "non_live_overall": _unweighted(non_live, na_if_missing=False),
        "live_ast_summary": _weighted(live), "live_overall": _weighted(live, na_if_missing=False),
        "irrelevance": irrelevance, "relevance": score("live_relevance"), "multi_turn_overall": multi_turn,
    }
    figures["overall"] = _shares([figures["non_live_overall"], figures["live_overall"], irrelevance, multi_turn,
                                  agentic], list(OVERALL_WEIGHTS))
    return {name: None if f["missing"] else f["accuracy"] for name, f in figures.items()}


SCORER = RowScorer(
    name="bfcl",
    readings=("official",),
    inputs=("functions", "possible_answer"),
    optional_inputs=("bfcl_id", "gold_calls", "call_reader", *MULTI_TURN_INPUTS, *cases.TRACE_INPUTS),
    input_types=cases.TRACE_TYPES,
    cases=cases.VIEW,
    fields=FIELDS,
    metrics=(
        mean("accuracy", "correct", higher_is_better=True, headline=True,
             description="BFCL's verdict: AST check, or (ir)relevance by whether a call decodes"),
        Metric("bfcl_summary", ("correct", "category"), _summary, ci=False, headline=True,
               description="a category's accuracy; on a pooled row, BFCL's summary figure (non_live_ast and "
                           "irrelevance_all unweighted over categories, live_ast weighted by cases)",
               higher_is_better=True),
        mean("decodable", "valid", higher_is_better=True, ci=False,
             description="answers that decode into calls (BFCL's decoder)"),
    ),
    grade=grade,
    pools=pool_of,
    count_columns=("gold_schema_coverage", "n_failed", "n_too_long"),
    description="BFCL AST categories: BFCL's decoding and AST checker, reimplemented",
)
