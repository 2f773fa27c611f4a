"""The cells of the sweep and comparison tables, shared by their Markdown and HTML reports.

Each function returns (header, rows) of preformatted strings, so a number reads the same in
leaderboard.md and report.html: shares as `41.2% [35.0, 47.1]`, scores as `4.20 [3.90, 4.45]`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import polars as pl

from grading.repeats import PASS_AT, PASS_HAT, pass_metrics
from grading.report import pass_heading, percent, percent_ci, repeated_samples, value_ci, with_sd
from grading.scoring import Metric, Scorer, format_value, get_scorer
from grading.sweep import override_key, override_text
from grading.views import AblationAxis, ablation_axis

Cells = tuple[list[str], list[list[str]]]


def board_scorers(board: pl.DataFrame) -> list[Scorer]:
    """The scorers of a board's complete jobs, in job order."""
    return [get_scorer(n) for n in board["scorer"].drop_nulls().unique(maintain_order=True)]


def board_axis(board: pl.DataFrame) -> AblationAxis | None:
    """The ablation axis of the board's first scorer that declares one."""
    return next((a for s in board_scorers(board) if (a := ablation_axis(s)) is not None), None)


def shown_metrics(scorers: list[Scorer]) -> list[Metric]:
    """The metrics a board shows: each scorer's headline metrics, then its other CI metrics."""
    ordered = [m for s in scorers for m in sorted(s.metrics, key=lambda m: not m.headline) if m.ci]
    return list({m.name: m for m in ordered}.values())


def leaderboard_cells(board: pl.DataFrame) -> Cells:
    """The leaderboard's header and rows: each job named by the overrides that differ between the
    jobs (`configuration`), metrics with their 95% bootstrap CI, failed jobs with their reason; a
    judge model column only where a judge scored, an ablation column (headed by the scorer's axis)
    only where a job ablated it."""
    metrics = shown_metrics(board_scorers(board))
    jobs = board.unique("job", maintain_order=True).sort("job")
    names = dict(zip(jobs["job"].to_list(), job_labels(board_overrides(jobs))))
    judged = board["judge_model"].null_count() < board.height
    axis = board_axis(board)
    ablated = axis is not None and board["ablation"].drop_nulls().unique().to_list() not in ([], [axis.baseline])
    repeated = repeated_samples(board)
    passes = _pass_columns(board, board_scorers(board)) if repeated else []
    header = ["job", "configuration", "model", *(["judge model"] if judged else []), *([axis.name] if ablated else []),
              "step", "setting", "parser", *(["samples"] if repeated else []), *(m.name for m in metrics),
              *(pass_heading(c) for c in passes),
              "status", "reason"]
    rows = [[str(r["job"]), names[r["job"]], r["model"] or "", *([r["judge_model"] or ""] if judged else []),
             *([r["ablation"] or ""] if ablated else []),
             "" if r["step"] is None else str(r["step"]), r["setting"], r["parser"] or "",
             *([_count(r["samples"])] if repeated else []),
             *(with_sd(m, value_ci(m, r[m.name], r[f"{m.name}_low"], r[f"{m.name}_high"]),
                       r.get(f"{m.name}_sd") if repeated else None) for m in metrics),
             *(percent(r[c]) for c in passes), r["status"], r["reason"] or ""]
            for r in board.iter_rows(named=True)]
    return header, rows


def _pass_columns(board: pl.DataFrame, scorers: list[Scorer]) -> list[str]:
    """The pass@k / pass^k columns of a board's headline pass metrics that some row has."""
    names = [c for s in scorers for m in pass_metrics(s) if m.headline or m.ci
             for c in (f"{m.name}_{PASS_AT}", f"{m.name}_{PASS_HAT}")]
    return [c for c in dict.fromkeys(names) if c in board.columns and board[c].null_count() < board.height]


def board_overrides(jobs: pl.DataFrame) -> list[list[str]]:
    """Each row's overrides (the board's `overrides` list; none where a row has none)."""
    return [list(o or []) for o in jobs["overrides"].to_list()]


def job_labels(overrides: Sequence[Sequence[str]]) -> list[str]:
    """A name per job (from its list of overrides): the `key=value` overrides that are not the same
    in every job (a path shortened to its last part when that still tells the jobs apart, a key a
    job lacks shown as `key=(default)`); a job that differs in nothing is named by all its overrides."""
    return [" ".join(f"{k}={v}" for k, v in parts) or "(defaults)" for parts in job_label_parts(overrides)]


def job_label_parts(overrides: Sequence[Sequence[str]]) -> list[list[tuple[str, str]]]:
    """job_labels' (key, value shown) pairs per job, for a caller that leaves a key out."""
    parsed = [override_pairs(o) for o in overrides]
    keys = list(dict.fromkeys(k for pairs in parsed for k in pairs))
    differing = [k for k in keys if len({pairs.get(k) for pairs in parsed}) > 1]
    short = {k: _shortened({pairs[k] for pairs in parsed if k in pairs}) for k in differing}
    return [[(k, short[k][pairs[k]] if k in pairs else "(default)") for k in differing] or list(pairs.items())
            for pairs in parsed]


def override_pairs(overrides: Sequence[str]) -> dict[str, str]:
    """Hydra overrides (key=value, +key=value, ++key=value, ~key) as key -> the value Hydra reads
    (`my\\ runs/ckpt` is `my runs/ckpt`), `(removed)` for a deleted key."""
    return {override_key(item): override_text(item.partition("=")[2]) if "=" in item and not item.startswith("~")
            else "(removed)" for item in overrides}


def _shortened(values: set[str]) -> dict[str, str]:
    """Each value, or its last path part when those tell the values apart."""
    tails = {v: Path(v.rstrip("/")).name or v for v in values}
    return tails if len(set(tails.values())) == len(values) else {v: v for v in values}


COMPARED = ("a", "b", "B vs A", "a_only", "b_only")
"""The default labels of the two sides' columns: their values, the verdict, the discordant counts."""


def comparison_cells(comparison: pl.DataFrame, scorer: Scorer, labels: tuple[str, ...] = COMPARED) -> Cells:
    """The comparison's header and rows, each metric on its own scale (shares in percent), with
    whether B is better or worse as the metric's direction says (`B vs A`); `labels` name the
    sides' columns (COMPARED's five, in its order)."""
    a, b, verdict, a_only, b_only = labels
    header = ["setting", "parser", "metric", "n", a, b, "diff [95% CI]", verdict, a_only, b_only, "p_value"]
    metrics = {m.name: m for m in scorer.metrics}
    rows = [[r["setting"], r["parser"], r["metric"], str(r["n"]),
             format_value(metrics[r["metric"]], r["acc_a"]), format_value(metrics[r["metric"]], r["acc_b"]),
             _signed(metrics[r["metric"]], r["diff"], r["ci_low"], r["ci_high"]), r.get("verdict") or "",
             _count(r["a_only"]), _count(r["b_only"]), _p_value(r["p_value"])]
            for r in comparison.iter_rows(named=True)]
    return header, rows


def _signed(metric: Metric, diff: float | None, low: float | None, high: float | None) -> str:
    if metric.scale == "share":
        return percent_ci(diff, low, high, signed=True)
    return value_ci(metric, diff, low, high)


def _count(value: int | None) -> str:
    return "" if value is None else str(value)


def _p_value(p: float | None) -> str:
    if p is None:
        return ""
    return "<0.001" if p < 0.001 else f"{p:.3f}"
