"""ETAPP's scoring: the local judge's three 0-5 scores, averaged per setting, plus process facts.

The judge has already read each episode when grading runs (`grading/scorers/etapp_judge/rubric.py` builds
its prompt and reads its answer); this scorer reads the judge's columns and the episode's
process columns, nothing else. One reading, `judge`.

- `procedure`, `personalization`, `proactivity`: upstream's score, the mean Final Assessment
  over the judged cases. A case the judge could not score (its answer unreadable, or the judge
  engine failed) is null: it is left out of these means, as upstream averages only the cases
  it evaluated, and it is counted by `judge_failed`. A case that was never sent to the judge
  (`judge.enabled=false`: its `judge_status` is `not_judged`, or it has no judge row at all) is
  no failure: `judged` is null and `judge_failed` leaves it out (a run judged not at all has no
  `judge_failed`). An agent episode that failed (turn cap, too long) is still judged, as upstream
  judges its "Cannot solve" answer; one ended by an engine error says nothing about the model:
  the judge skips it, and it is left out of every judge metric (even where a judge scored it)
  and counted by `engine_error`.
- `overall` (the paper's headline): per method, the mean of the three scores in each of the two
  settings, six numbers, on that method's `both/<method>` row (its cases in both settings, every
  other metric pooled over them); absent where the method ran in one setting only, and on every
  row that is not one method in both settings. The pooled `all` row pools settings and methods
  alike: toolsweep's own, not the paper's (it has `overall` only in a run of one method).
- `passed_procedure`, `passed_personalization`, `passed_proactivity`: the share of judged cases whose
  score is at least `dataset.pass_score` (the sample column `pass_score`); Boolean per case, so
  a run of several episodes per case (decoding.samples) gets their pass@k and pass^k.
- `personal_keypoints`, `proactive_keypoints`: the mean key-point score over 2 (a key point
  half achieved counts half), per case, then averaged. Upstream reports no such number.
- Process: valid calls and tool errors per call (pooled), mean turns and nudges per case, the
  share of episodes cut at the turn cap, and, in the tool-given setting only, the share of the
  listed tools the agent called at least once.
- Every metric also on the `clean` subset (`{setting}/clean` rows): the cases whose observations
  are all upstream's data: no substituted tool listed (the loader's sample column `clean`) nor
  called (`called_tools`); `SUBSTITUTED_TOOLS` names the tools that run on substitute data (the
  grade field `clean`, so a re-grade applies it to tables written before it).

Sample-table inputs are written to samples.parquet as text, so every count here is read from an
int or from its decimal string (a re-graded table gives the same grades).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import polars as pl

from grading.case_view import CaseView
from grading.errors import GradingError
from grading.scorers.etapp_judge.rubric import METHODS
from grading.scoring import SCORE, SHARE, Metric, RowScorer, mean, ratio
from grading.views import (JUDGE_FAILED, JUDGE_STATUS, JUDGE_TOO_LONG, JUDGED, NOT_JUDGED, JudgeView,
                           check_judge_status)

READING = "judge"
JUDGE_ROLE = "judge"
"""The model role whose model judges (the benchmark's `roles`, conf/dataset/etapp.yaml's `roles.judge`)."""
TOOL_GIVEN = "tool_given"
"""The `setting` segment (settings look like `tool_given/fc`) where a case lists its tools."""
SETTINGS = (TOOL_GIVEN, "tool_retrieval")
"""The two settings whose scores `overall` averages."""
BOTH = "both"
"""The first segment of a method's row over both settings (`both/fc`), where `overall` is."""
DIMENSIONS = ("procedure", "personalization", "proactivity")
NOT_JUDGED_TEXT = "not judged"
"""How a judge error begins when the case was never sent to the judge (judging switched off, or
an agent episode ended by an engine error). The judge's `judge_status` column says so; tables
written before it are read by this prefix."""
ENGINE_ERROR = "engine_error"
"""The end reason of an episode cut by an engine error: left out of every judge metric."""
SUBSTITUTED_TOOLS = frozenset({"play_music", "find_restaurants", "find_flight",
                               "search_products_in_shopping_manager", "search_from_wikipedia"})
"""The tools whose data upstream never published: the sandbox runs them on substitutes, so a case
that lists or calls one is not `clean`. Declared here, with the subset it defines; the sandbox
imports it (inference/benchmarks/etapp/apps.py), so the two cannot drift."""
TOO_LONG_TEXT = "too_long"
"""How a judge error begins when the judge prompt did not fit the judge's context (status
`too_long`; tables written before `judge_status` are read by this prefix)."""
COUNTS = ("turns", "n_calls", "valid_calls", "tool_errors", "nudges")
MODEL_CALLS = "model_calls"
"""Generations per episode, E-ReAct's plan included; tables written before it lack the column."""

FIELDS: dict[str, pl.DataType] = {
    # `_score`: grade columns are `judge_<field>`, and `judge_procedure` etc. are the inputs.
    "procedure_score": pl.Float64, "personalization_score": pl.Float64, "proactivity_score": pl.Float64,
    **{f"{d}_pass": pl.Boolean for d in DIMENSIONS},
    "judged": pl.Boolean, "judge_too_long": pl.Boolean, "personal_hit": pl.Float64, "proactive_hit": pl.Float64,
    "n_calls": pl.Int64, "valid_calls": pl.Int64, "tool_errors": pl.Int64, "turns": pl.Int64, MODEL_CALLS: pl.Int64,
    "nudges": pl.Int64, "at_turn_cap": pl.Boolean, "listed_tools_called": pl.Float64,
    "engine_error": pl.Boolean, "clean": pl.Boolean,
    # Where the case sits for `overall`: its setting's place in SETTINGS, its method's in METHODS.
    "setting_index": pl.Int64, "method_index": pl.Int64,
}
INPUTS = (
    "judge_procedure", "judge_personalization", "judge_proactivity", "judge_keypoints", "judge_error",
    *COUNTS, "end_reason", "listed_tools", "called_tools",
    # The loader's `clean` (no substituted tool listed), which the `clean` grade field (the subset's
    # column, SCORER.subsets) narrows by the tools called; an input so samples.parquet keeps it.
    "clean",
)


def _count(row: dict[str, Any], column: str) -> int | None:
    """An integer column's value, from an int or its decimal string (null stays None)."""
    value = row.get(column)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value)
    raise GradingError(f"sample {row.get('sample_id')!r}: column {column!r} must hold an integer or null, "
                       f"got {value!r}; rewrite the sample table with toolsweep")


def _json(row: dict[str, Any], column: str, kind: type) -> Any:
    """A JSON-text column decoded and checked to be `kind` (null stays None)."""
    text = row.get(column)
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        value = None
    if not isinstance(value, kind):
        raise GradingError(f"sample {row.get('sample_id')!r}: column {column!r} must be JSON text of a "
                           f"{kind.__name__} or null, got {text!r}; rewrite the sample table with toolsweep")
    return value


def _hit(scores: Any) -> float | None:
    """Mean key-point score over 2: 1.0 when every key point is fully achieved; None without any."""
    values = list(scores.values()) if isinstance(scores, dict) else []
    return float(np.mean(values)) / 2 if values else None


def judge_status(row: dict[str, Any], finals: dict[str, int | None]) -> str:
    """The case's judge status (grading.views.JUDGE_STATUSES): its `judge_status` column; in a
    table written before it, read from the judge error's prefix. No judge row at all (no status,
    no error, no judge output): not judged."""
    status = row.get(JUDGE_STATUS)
    if status is not None:
        check_judge_status([status])
        return status
    error = row.get("judge_error")
    if error is None:
        output = any(v is not None for v in finals.values()) or row.get("judge_keypoints") is not None
        return JUDGED if output else NOT_JUDGED
    if str(error).startswith(NOT_JUDGED_TEXT):
        return NOT_JUDGED
    return JUDGE_TOO_LONG if str(error).startswith(TOO_LONG_TEXT) else JUDGE_FAILED


def judge_fields(row: dict[str, Any]) -> dict[str, Any]:
    """The judge's scores of one case, all null where the judge failed (`judged` False) or the case
    was not judged (`judged` null: judging off, or an episode ended by an engine error)."""
    finals = {d: _count(row, f"judge_{d}") for d in DIMENSIONS}
    status = judge_status(row, finals)
    judged = status == JUDGED and all(v is not None for v in finals.values())
    if not judged or row.get("end_reason") == ENGINE_ERROR:
        sent = status != NOT_JUDGED and row.get("end_reason") != ENGINE_ERROR
        return {**{f"{d}_score": None for d in DIMENSIONS}, **{f"{d}_pass": None for d in DIMENSIONS},
                "judged": False if sent else None, "judge_too_long": status == JUDGE_TOO_LONG if sent else None,
                "personal_hit": None, "proactive_hit": None}
    points = _json(row, "judge_keypoints", dict) or {}
    threshold = _threshold(row)
    return {**{f"{d}_score": float(v) for d, v in finals.items()},
            **{f"{d}_pass": None if threshold is None else float(v) >= threshold for d, v in finals.items()},
            "judged": True, "judge_too_long": False,
            "personal_hit": _hit(points.get("personal")), "proactive_hit": _hit(points.get("proactive"))}


def _threshold(row: dict[str, Any]) -> float | None:
    """The run's dataset.pass_score (None in a table written before it: no pass grades)."""
    value = row.get("pass_score")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        raise GradingError(f"sample {row.get('sample_id')!r}: column 'pass_score' must hold a number, got "
                           f"{value!r}; rewrite the sample table with toolsweep") from None


def _listed_called(row: dict[str, Any]) -> float | None:
    # Retrieval cases declare only the search tools: the share means nothing there.
    if TOOL_GIVEN not in str(row.get("setting", "")).split("/"):
        return None
    # A set: instruction 6 lists one tool twice. Names that are not text name no listed tool.
    listed = {t for t in _json(row, "listed_tools", list) or [] if isinstance(t, str)}
    called = {t for t in _json(row, "called_tools", list) or [] if isinstance(t, str)}
    return len(listed & called) / len(listed) if listed else None


def _clean(row: dict[str, Any]) -> bool | None:
    """No substituted tool listed (the loader's `clean`) nor called."""
    if row.get("clean") is None:
        return None
    called = _json(row, "called_tools", list) or []
    return bool(row["clean"]) and not SUBSTITUTED_TOOLS.intersection(t for t in called if isinstance(t, str))


def _place(row: dict[str, Any]) -> dict[str, int | None]:
    """The case's setting and method as positions in SETTINGS and METHODS (None: another setting)."""
    setting, _, method = str(row.get("setting", "")).partition("/")
    return {"setting_index": SETTINGS.index(setting) if setting in SETTINGS else None,
            "method_index": list(METHODS).index(method) if method in METHODS else None}


def process_fields(row: dict[str, Any]) -> dict[str, Any]:
    """How the episode went, whatever the judge made of it."""
    end = row.get("end_reason")
    return {**{c: _count(row, c) for c in COUNTS}, MODEL_CALLS: _count(row, MODEL_CALLS),
            "at_turn_cap": None if end is None else end == "turn_cap",
            "listed_tools_called": _listed_called(row),
            "engine_error": None if end is None else end == ENGINE_ERROR, "clean": _clean(row), **_place(row)}


def grade(reading: str, row: dict[str, Any]) -> dict[str, Any]:
    """The grade fields of one ETAPP case (the one reading is the judge's)."""
    return {**judge_fields(row), **process_fields(row)}


def _failed_share(judged: np.ndarray) -> float | None:
    # Null (nan) is a case not sent to the judge: neither judged nor failed.
    sent = judged[~np.isnan(judged)]
    return float(1 - sent.mean()) if sent.size else None


def _overall(procedure: np.ndarray, personalization: np.ndarray, proactivity: np.ndarray, setting: np.ndarray,
             method: np.ndarray) -> float | None:
    """The mean of the six numbers (each dimension's mean over the judged cases of each setting),
    over one method's cases in both settings; None for any other set of cases."""
    if np.isnan(setting).any() or np.isnan(method).any() or np.unique(method).size != 1:
        return None
    means = []
    for index in range(len(SETTINGS)):
        for scores in (procedure, personalization, proactivity):
            kept = scores[(setting == index) & ~np.isnan(scores)]
            if not kept.size:
                return None
            means.append(kept.mean())
    return float(np.mean(means))


def _both_settings(setting: str) -> str | None:
    """`tool_given/fc` -> `both/fc`: the row of a method over both settings, where `overall` is."""
    first, _, method = setting.partition("/")
    return f"{BOTH}/{method}" if first in SETTINGS and method in METHODS else None


SCORER = RowScorer(
    name="etapp_judge",
    readings=(READING,),
    inputs=INPUTS,
    fields=FIELDS,
    metrics=(
        mean("procedure", "procedure_score", higher_is_better=True, scale=SCORE,
             description="judge's Procedure score, 0-5, judged cases"),
        mean("personalization", "personalization_score", higher_is_better=True, scale=SCORE, headline=True,
             description="judge's Personalization score, 0-5, judged cases"),
        mean("proactivity", "proactivity_score", higher_is_better=True, scale=SCORE,
             description="judge's Proactivity score, 0-5, judged cases"),
        # A mean of per-setting means, not of cases: no per-case CI or paired test applies.
        Metric("overall", (*(f"{d}_score" for d in DIMENSIONS), "setting_index", "method_index"), _overall, SCORE,
               ci=False, higher_is_better=True,
               description="the paper's Overall: the three scores' means in both settings (six numbers), averaged; "
                           "per method, on its both/<method> row"),
        *(mean(f"passed_{d}", f"{d}_pass", higher_is_better=True,
               description=f"judged cases whose {d.capitalize()} score is at least dataset.pass_score")
          for d in DIMENSIONS),
        Metric("judge_failed", ("judged",), _failed_share, SHARE, ci=False, higher_is_better=False,
               description="cases sent to the judge that it could not score (left out of the three scores)"),
        # Usually the longest trajectories, so the worst: a high share flatters the three scores.
        mean("judge_too_long", "judge_too_long", higher_is_better=False, ci=False,
             description="cases sent to the judge whose prompt did not fit its context (part of judge_failed)"),
        mean("personal_keypoints", "personal_hit", higher_is_better=True,
             description="personalization key points: mean score / 2"),
        mean("proactive_keypoints", "proactive_hit", higher_is_better=True,
             description="proactivity key points: mean score / 2"),
        ratio("valid_call_rate", "valid_calls", "n_calls", higher_is_better=True,
              description="valid_calls / calls, pooled over episodes"),
        ratio("tool_error_rate", "tool_errors", "n_calls", higher_is_better=False,
              description="tool_errors / calls: calls answered with an error"),
        # More turns can be thoroughness or flailing: a change in them is neither gained nor lost.
        mean("mean_turns", "turns", higher_is_better=None, scale=SCORE, ci=False,
             description="model calls per episode"),
        mean("mean_model_calls", MODEL_CALLS, higher_is_better=None, scale=SCORE, ci=False,
             description="generations per episode, E-ReAct's plan call included"),
        mean("mean_nudges", "nudges", higher_is_better=False, scale=SCORE, ci=False,
             description="format reminders per episode"),
        mean("turn_cap", "at_turn_cap", higher_is_better=False, ci=False,
             description="episodes stopped at the turn cap"),
        mean("listed_tools_called", "listed_tools_called", higher_is_better=True, ci=False,
             description="tool-given: share of the listed tools called at least once"),
        mean("engine_error", "engine_error", higher_is_better=False, ci=False,
             description="episodes ended by an engine error (not judged: out of every judge metric)"),
    ),
    grade=grade,
    # judge_status: tables written before it read the judge error's prefix instead (judge_status()).
    optional_inputs=(MODEL_CALLS, "pass_score", JUDGE_STATUS),
    input_types={**{f"judge_{d}": pl.Int64 for d in DIMENSIONS}, **{c: pl.Int64 for c in (*COUNTS, MODEL_CALLS)},
                 "clean": pl.Boolean, "pass_score": pl.Float64},
    subsets={"clean": f"{READING}_clean"},
    pools=_both_settings,
    # Multi-turn, no gold tool and no tool schema: gold_schema_coverage does not apply.
    count_columns=("n_failed", "n_too_long"),
    cases=CaseView(columns=("end_reason", "turns", *(f"judge_{d}" for d in DIMENSIONS)),
                   scores=tuple(f"judge_{d}" for d in DIMENSIONS), judge_column="judge_output",
                   error_column="judge_error"),
    judge_view=JudgeView(role=JUDGE_ROLE, dimensions={d: f"judge_{d}" for d in DIMENSIONS}, scale=tuple(range(6)),
                         headline="personalization", points="judge_keypoints", point_scale=(0, 1, 2)),
    description="ETAPP: a local judge's 0-5 Procedure, Personalization and Proactivity (not comparable "
                "with the paper's GPT-4o numbers), with key-point and process measures",
)
