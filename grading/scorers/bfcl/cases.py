"""How cases.html shows a BFCL multi-turn case (the scorer's `cases` view).

The loop's record of a case (inference/benchmarks/bfcl/multi_turn.py) is kept in samples.parquet
(TRACE_INPUTS, optional inputs of the scorer): `trace`, per turn `{"query": [messages], "steps":
[{"text", "finish_reason", "calls"?, "results"?, "ends_turn"?}]}`. A case is shown turn by turn
from it: what opened the turn (the user's query, or BFCL's announcement of a held-out turn's
functions), each step with its calls and their results, why the turn ended, and the ground
truth's calls for the turn (`possible_answer`); then BFCL's verdict, the turn it failed at and,
for a failed case, the state difference (attribute by attribute) or the ground truth's results
the model's lacked. A run written without `trace` shows each step's text (`output`) alone.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional

import polars as pl

from grading.case_view import Call, CaseView, Difference, Episode, Step, Turn
from grading.scorers.bfcl.multi_turn import MULTI_TURN

READING = "official"
TRACE_INPUTS = ("trace", "turns_run", "model_calls")
"""The loop's columns samples.parquet keeps for the view: the trace, turns run, model calls."""
TRACE_TYPES: dict[str, pl.DataType] = {"turns_run": pl.Int64, "model_calls": pl.Int64}
FINISHED = "finished"
ANNOUNCED = "held-out functions announced"


def episode(row: Mapping[str, Any]) -> Optional[Episode]:
    """A multi-turn case's turns and verdict from its sample row; None for any other category."""
    if row.get("setting") not in MULTI_TURN:
        return None
    recorded = _json(row.get("trace"))
    recorded = recorded if isinstance(recorded, list) else _untraced(row.get("output"))
    truth = _json(row.get("possible_answer")) or []
    asked = _json(row.get("turns")) or []
    held_out = _json(row.get("held_out")) or {}
    failed = row.get(f"{READING}_failed_turn")
    end = row.get("finish_reason")
    turns = []
    for number in range(max(len(recorded), len(truth))):
        expected = tuple(truth[number]) if number < len(truth) else None
        if number < len(recorded):
            last = number == len(recorded) - 1
            turns.append(_turn(recorded[number], str(number) in held_out, expected, end if last else None,
                               failed == number))
        else:
            query = asked[number] if number < len(asked) else []
            turns.append(Turn(_opened(query, str(number) in held_out), expected=expected, ran=False,
                              failed=failed == number))
    differences, title = _differences(row.get(f"{READING}_state_difference"))
    return Episode(tuple(turns), row.get(f"{READING}_correct"), _facts(row, len(truth)), differences, title)


def _turn(record: Mapping[str, Any], held_out: bool, expected: Optional[tuple[str, ...]], case_end: Optional[str],
          failed: bool) -> Turn:
    steps = [_step(s) for s in record.get("steps") or []]
    ended = next((s.get("ends_turn") for s in reversed(record.get("steps") or []) if s.get("ends_turn")), None)
    if case_end and case_end != FINISHED and not ended:
        ended = f"the case ended ({case_end})"
    return Turn(_opened(record.get("query") or [], held_out), tuple(steps), ended, expected, failed=failed)


def _opened(messages: list[Any], held_out: bool) -> tuple[tuple[str, str], ...]:
    """(who, text) per message; a held-out turn's only message is BFCL's announcement."""
    shown = []
    for message in messages:
        message = message if isinstance(message, dict) else {"content": message}
        who = ANNOUNCED if held_out else str(message.get("role") or "user")
        shown.append((who, str(message.get("content") or "")))
    return tuple(shown)


def _step(record: Mapping[str, Any]) -> Step:
    calls = record.get("calls") or []
    results = list(record.get("results") or [])
    results += [None] * (len(calls) - len(results))
    notes = [f"finish: {record['finish_reason']}" if record.get("finish_reason") else None,
             "ends the turn" if record.get("ends_turn") else None]
    return Step(str(record.get("text") or ""), tuple(Call(str(c), r) for c, r in zip(calls, results)),
                "; ".join(n for n in notes if n) or None)


def _untraced(output: Optional[str]) -> list[dict[str, Any]]:
    """Turns from the steps' texts alone (a run written before samples.parquet kept the trace)."""
    texts = _json(output)
    if not isinstance(texts, list):
        return []
    return [{"query": [], "steps": [{"text": t} for t in turn]} for turn in texts if isinstance(turn, list)]


def _facts(row: Mapping[str, Any], truth_turns: int) -> tuple[tuple[str, str], ...]:
    correct = row.get(f"{READING}_correct")
    facts = [("verdict", "unknown" if correct is None else "right" if correct else "wrong"),
             ("error type", row.get(f"{READING}_error_type")),
             ("failed at turn", row.get(f"{READING}_failed_turn")),
             ("end reason", row.get("finish_reason")),
             ("turns run", f"{row['turns_run']} of {truth_turns}" if row.get("turns_run") is not None else None),
             ("model calls", row.get("model_calls")),
             ("error", row.get("error"))]
    return tuple((name, str(value)) for name, value in facts if value is not None)


def _differences(text: Optional[str]) -> tuple[tuple[Difference, ...], str]:
    """BFCL's state difference ({class: {attribute: {model, ground_truth}}}) attribute by
    attribute, or the ground truth's results missing from the model's."""
    found = _json(text)
    if not isinstance(found, dict):
        return (), ""
    if "missing_items" in found:
        missing = tuple(Difference("missing result", "(not among the model's results)", str(item))
                        for item in found["missing_items"] or [])
        return missing, "Ground-truth results the model's results lack"
    rows = tuple(Difference(f"{name}.{attribute}", str(values.get("model")), str(values.get("ground_truth")))
                 for name, attributes in found.items() if isinstance(attributes, dict)
                 for attribute, values in attributes.items() if isinstance(values, dict))
    return rows, "State difference: the model's instances against the ground truth's"


def _json(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


VIEW = CaseView(columns=("finish_reason", "turns_run", "model_calls", f"{READING}_correct",
                         f"{READING}_error_type", f"{READING}_failed_turn"),
                scores=(f"{READING}_correct",), end_column="finish_reason",
                bands=(("wrong", 0.0, 0.5), ("right", 0.5, 1.01)), band_name="verdict",
                band_note="BFCL's check of each turn's state and results", episode=episode)
"""BFCL's multi-turn cases in cases.html; a run of single-call categories alone gets no page."""
