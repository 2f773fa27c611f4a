"""cases.html: every case of a multi-turn run, readable offline (linked from report.html).

A scorer that declares a `CaseView` gets it when its run wrote a side table of messages (run.json's
`side_tables`, kind `messages`, grading.views: one row per message with sample_id, turn, role,
content, tool_calls, tool_error, ordered as the table declares) and, where there is one, a side
table of judge answers (kind `judge_answers`). The page has an index (the declared columns,
narrowed by end reason and score band with radio buttons and CSS alone: no script) and, per
case, its query, each turn (the model's
text, its calls, the observations, reminders marked as such), the final answer and the judge's
score and analysis for every key point.

A view may instead declare `episode`, a function reading a case from its own samples.parquet row
(for a loop that keeps each case's record in sample columns): per user turn what opened it, each
step's text with the calls it ran and their results, why the turn ended and the reference's calls;
then the grade's facts and, for a failed case, what differed from the reference.
Every text is cut at MESSAGE_CHARS.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional

import polars as pl

from grading.listing import truncated
from grading.views import JUDGE_ANSWERS, MESSAGES, SideTable, side_table_of

CASES = "cases.html"
MESSAGE_CHARS = 2000
BANDS = (("0-1", 0.0, 2.0), ("2-3", 2.0, 4.0), ("4-5", 4.0, 5.01))
"""The default bands, for scores on a 0-5 scale: (label, low, high), low <= mean < high."""
UNSCORED = "unscored"
OUTSIDE = "other"
"""The band of a case whose mean score lies in none of the declared bands."""


@dataclass(frozen=True)
class Call:
    """A call a step ran, and what it returned."""

    text: str
    result: Optional[str] = None


@dataclass(frozen=True)
class Step:
    """One model output within a user turn."""

    text: str
    calls: tuple[Call, ...] = ()
    note: Optional[str] = None
    """What became of it (its finish reason, why it ended the turn)."""


@dataclass(frozen=True)
class Turn:
    """One user turn of an episode."""

    opened: tuple[tuple[str, str], ...]
    """(who, text) of each message that opened it: the user's query, or what the loop announced."""
    steps: tuple[Step, ...] = ()
    ended: Optional[str] = None
    """Why it ended."""
    expected: Optional[tuple[str, ...]] = None
    """The reference's calls for this turn (None: no reference shown)."""
    ran: bool = True
    """False for a turn the run never reached (the case ended before it)."""
    failed: bool = False
    """The turn the grade failed the case at."""


@dataclass(frozen=True)
class Difference:
    """One thing the grade found different from the reference."""

    where: str
    model: str
    expected: str


@dataclass(frozen=True)
class Episode:
    """A case as a view's `episode` function reads it from its sample row."""

    turns: tuple[Turn, ...]
    passed: Optional[bool] = None
    facts: tuple[tuple[str, str], ...] = ()
    """(label, value) of the grade and of how the case ended, in order."""
    differences: tuple[Difference, ...] = ()
    differences_title: str = "Differences from the reference"


@dataclass(frozen=True)
class CaseView:
    """How a multi-turn benchmark's cases are shown."""

    columns: tuple[str, ...]
    """samples.parquet columns of the index, after the sample id and setting."""
    scores: tuple[str, ...]
    """Integer score columns; a case's band is their mean (unscored when any is null)."""
    end_column: str = "end_reason"
    judge_column: str | None = None
    """The column of the run's judge-answers side table holding the judge's raw answer (None: none shown)."""
    error_column: str | None = None
    """The sample column saying why a case has no judge answer (None: none shown)."""
    bands: tuple[tuple[str, float, float], ...] = BANDS
    """The score bands the page filters by: (label, low, high), a case in the first whose
    low <= its mean score < high; the default is for a 0-5 scale."""
    band_name: str = "score band"
    """What the page calls the bands."""
    band_note: str = "the mean of the judge's scores"
    """What a case's band is, as the page says it."""
    episode: Optional[Callable[[Mapping[str, Any]], Optional[Episode]]] = None
    """A case read from its samples.parquet row (inputs, outputs and grade columns), for a run
    that keeps each case's record in sample columns rather than a side table of messages; None
    for a row that is no such case (left out). None: the messages side table is read."""


def case_page(run_dir: Path, samples: pl.DataFrame, view: CaseView, facts: Mapping[str, Any]) -> dict[str, Any] | None:
    """The page's data, or None when the run (its facts: run.json) lists no side table of messages
    (with a view's `episode`: when no sample is a case it reads)."""
    if view.episode is not None:
        return _episode_page(samples, view)
    table = side_table_of(facts, MESSAGES)
    if table is None or not (run_dir / table.name).is_file():
        return None
    messages = pl.read_parquet(run_dir / table.name).sort(table.key, *table.order, maintain_order=True)
    by_case = {sid: group.to_dicts() for (sid,), group in messages.group_by(table.key, maintain_order=True)}
    answers = _judge_answers(run_dir, view, side_table_of(facts, JUDGE_ANSWERS))
    rows = samples.to_dicts()
    cases = [_case(number, row, by_case.get(row["sample_id"], []), answers.get(row["sample_id"]), view)
             for number, row in enumerate(rows, 1)]
    return _page(cases, view)


def _page(cases: list[dict[str, Any]], view: CaseView) -> dict[str, Any]:
    ends = sorted({(c["end_class"], c["end"]) for c in cases})
    return {"cases": cases, "columns": ["case", "setting", *view.columns], "ends": ends,
            "bands": [*(b[0] for b in view.bands), *([OUTSIDE] if any(c["band"] == OUTSIDE for c in cases) else []),
                      UNSCORED], "band_name": view.band_name, "band_note": view.band_note}


def _episode_page(samples: pl.DataFrame, view: CaseView) -> dict[str, Any] | None:
    read = [(row, view.episode(row)) for row in samples.to_dicts()]
    cases = [{**_index_entry(number, row, view), "episode": _shown(episode)}
             for number, (row, episode) in enumerate(((r, e) for r, e in read if e is not None), 1)]
    return _page(cases, view) if cases else None


def _shown(episode: Episode) -> dict[str, Any]:
    """An episode as the template reads it, every text cut at MESSAGE_CHARS."""
    differences = [{"where": _cut(d.where), "model": _cut(d.model), "expected": _cut(d.expected)}
                   for d in episode.differences]
    return {"turns": [_shown_turn(t) for t in episode.turns], "passed": episode.passed,
            "facts": [(k, _cut(v)) for k, v in episode.facts], "differences": differences,
            "differences_title": episode.differences_title,
            "differences_at_turn": any(t.failed for t in episode.turns)}


def _shown_turn(turn: Turn) -> dict[str, Any]:
    steps = [{"text": _cut(step.text), "note": _cut(step.note),
              "calls": [{"text": _cut(c.text), "result": None if c.result is None else _cut(c.result)}
                        for c in step.calls]} for step in turn.steps]
    return {"opened": [(who, _cut(text)) for who, text in turn.opened], "steps": steps, "ended": _cut(turn.ended),
            "expected": None if turn.expected is None else [_cut(c) for c in turn.expected], "ran": turn.ran,
            "failed": turn.failed}


def _judge_answers(run_dir: Path, view: CaseView, source: SideTable | None) -> dict[str, Any]:
    if source is None or not (run_dir / source.name).is_file():
        return {}
    table = pl.read_parquet(run_dir / source.name)
    if view.judge_column is None or view.judge_column not in table.columns:
        return {}
    return {sid: _json(text) for sid, text in table.select(source.key, view.judge_column).iter_rows()}


_FENCED = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _json(text: str | None) -> Any:
    """A judge's answer as JSON: the whole text, else its first fenced block (a free judge wraps
    its answer in prose and a fence); None when neither reads."""
    for candidate in (text, *(_FENCED.findall(text) if text else ())):
        try:
            return json.loads(candidate) if candidate else None
        except ValueError:
            continue
    return None


def _case(number: int, row: Mapping[str, Any], messages: list[dict[str, Any]], answer: Any,
          view: CaseView) -> dict[str, Any]:
    return {**_index_entry(number, row, view),
            "query": _query(messages), "turns": list(_turns(messages)), "answer": _cut(row.get("output")),
            "points": list(judge_points(answer)) if answer is not None else [],
            "judge_error": row.get(view.error_column) if view.error_column else None}


def _index_entry(number: int, row: Mapping[str, Any], view: CaseView) -> dict[str, Any]:
    """A case's id, end reason, band and index cells."""
    end = str(row.get(view.end_column) or "none")
    return {"id": f"case-{number}", "sample_id": row["sample_id"], "end": end, "end_class": _token(end),
            "band": _band(row, view), "episode": None,
            "cells": [row["sample_id"], row.get("setting"), *(_cell(row.get(c)) for c in view.columns)]}


def _token(text: str) -> str:
    """A value usable in a class name and an id."""
    return "".join(ch if ch.isalnum() else "-" for ch in text)


def _band(row: Mapping[str, Any], view: CaseView) -> str:
    values = [row.get(c) for c in view.scores]
    if not values or any(v is None for v in values):
        return UNSCORED
    mean = sum(values) / len(values)
    return next((name for name, low, high in view.bands if low <= mean < high), OUTSIDE)


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _cut(text: Any) -> str:
    return truncated(text, MESSAGE_CHARS)


def _query(messages: list[dict[str, Any]]) -> str:
    """The first user message: the case's request."""
    return next((_cut(m["content"]) for m in messages if m["role"] == "user"), "")


def _turns(messages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every message after the system prompt and the query, each with what it is."""
    seen_query = False
    for message in messages:
        if message["role"] == "system":
            continue
        if message["role"] == "user" and not seen_query:
            seen_query = True
            continue
        yield {"turn": message.get("turn"), "kind": _kind(message), "text": _cut(message.get("content")),
               "calls": _calls(message.get("tool_calls")), "error": bool(message.get("tool_error"))}


def _kind(message: Mapping[str, Any]) -> str:
    # After the query, a user message is the loop speaking: a reminder (or E-ReAct's execute turn).
    return {"assistant": "model", "tool": "observation", "user": "reminder"}.get(message["role"], message["role"])


def _calls(text: str | None) -> list[str]:
    calls = _json(text) or []
    return [f"{c.get('name') or '(no action)'}({c.get('arguments')})" for c in calls if isinstance(c, dict)]


def judge_points(answer: Any, path: tuple[str, ...] = ()) -> Iterator[dict[str, Any]]:
    """(where, analysis, score) for every scored object in a judge's answer, in its order: any
    object with a `score` is one point, its other string values its analysis."""
    if not isinstance(answer, dict):
        return
    if "score" in answer:
        analysis = " ".join(str(v) for k, v in answer.items() if k != "score" and isinstance(v, str))
        yield {"where": " / ".join(path), "analysis": _cut(analysis), "score": answer["score"]}
        return
    for key, value in answer.items():
        yield from judge_points(value, (*path, str(key)))
