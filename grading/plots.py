"""Metrics against training step, one panel per setting, from leaderboard rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import polars as pl

from grading.errors import GradingError
from grading.files import atomic_write
from grading.metrics import POOLED
from grading.scoring import direction_note, get_scorer, primary_reading
from grading.sweep import override_key
from grading.tables import shown_metrics

_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")
# One marker and line style per configuration (variant) of the sweep.
_MARKERS = "osD^v<>p*h"
_LINESTYLES = ("-", "--", ":", "-.")
# Overrides that pick the checkpoint (or a racing sweep's round: dataset.subsample); the rest of a
# job's overrides tell its series apart.
_CHECKPOINT_KEYS = ("model.path", "model.lora", "model.name", "dataset.subsample")
SCORED = ("complete", "stopped")
"""Job statuses with metrics: finished, or stopped by a racing sweep (on the records it has)."""


def plot_by_step(board: pl.DataFrame, metrics: list[Any], path: Path, title: str) -> Path:
    """Write a PNG of `metrics` (grading.scoring.Metric, with CIs) against step, each job under
    its scorer's primary reading (`official` where it has one, else its first);
    returns `path`. Shares are drawn in percent, scores as they are.

    `board` holds leaderboard rows; rows without a step or of other readings are ignored.
    Jobs that differ in more than the checkpoint (e.g. also in decoding.constraint) get one
    line each, so points of different configurations are never joined.
    """
    fig = step_figure(board, metrics, title, path.name)
    return atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120))


def new_figure(width: float, height: float) -> Any:
    """A matplotlib Figure on its own Agg canvas, laid out with constrained layout.

    Imported here: matplotlib is only needed when there is something to plot, and the object
    API with an Agg canvas leaves pyplot's global backend alone.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def primary_rows(board: pl.DataFrame) -> pl.DataFrame:
    """The board rows under each job's scorer's primary reading (grading.scoring.primary_reading)."""
    names = board["scorer"].drop_nulls().unique(maintain_order=True).to_list()
    readings = {name: primary_reading(get_scorer(name)) for name in names}
    primary = pl.col("scorer").replace_strict(readings, default=None, return_dtype=pl.String)
    return board.filter(pl.col("parser") == primary)


def plottable(board: pl.DataFrame, scorers: list[Any]) -> list[Any]:
    """The metrics to draw against step: the board's shown metrics (headline first, with CIs),
    then the scorers' others, those that some complete job with a step has a value of under its
    primary reading. A sweep without a judge has no judge scores: its plot shows what it has."""
    rows = primary_rows(board.filter(pl.col("status").is_in(SCORED) & pl.col("step").is_not_null()))
    candidates = {m.name: m for m in [*shown_metrics(scorers), *(m for s in scorers for m in s.metrics)]}
    return [m for m in candidates.values() if m.name in rows.columns and rows[m.name].drop_nulls().len() > 0]


def step_figure(board: pl.DataFrame, metrics: list[Any], title: str, what: str = "the plot") -> Any:
    """The figure `plot_by_step` writes (a matplotlib Figure); `what` names it in the error
    raised when no row has a step."""
    first = metrics[0].name if metrics else None
    rows = primary_rows(board).filter(pl.col("step").is_not_null() & pl.col(first).is_not_null()) \
        if first else board.clear()
    if rows.height == 0:
        raise GradingError(f"nothing to plot in {what}: no complete job has a step and a value of {first} under "
                           "its scorer's primary reading; name model folders like checkpoint-500 to plot against step")
    reading = ", ".join(rows["parser"].unique(maintain_order=True).to_list())
    rows = with_variant(rows).sort("step")
    settings = ordered_settings(rows)
    # Up to three panels side by side; more (p, r, c and all) wrap into two columns.
    ncols = len(settings) if len(settings) <= 3 else 2
    nrows = -(-len(settings) // ncols)
    fig = new_figure(5.0 * ncols, 3.6 * nrows + 0.8)
    grid = fig.subplots(nrows, ncols, sharey=True, squeeze=False)
    axes = list(grid.flat)
    for spare in axes[len(settings):]:
        spare.set_visible(False)
    for ax, setting in zip(axes, settings):
        _draw_panel(ax, rows, setting, metrics)
    shares = all(m.scale == "share" for m in metrics)
    for row in grid:
        row[0].set_ylabel(f"{reading} reading" + (" (%)" if shares else ""))
    handles, labels = axes[0].get_legend_handles_labels()
    # Labels naming a configuration are long: two columns keep them inside the figure.
    legend_cols = min(len(labels), 3 if rows["_variant"].n_unique() == 1 else 2)
    fig.legend(handles, labels, loc="outside lower center", ncols=legend_cols, frameon=False)
    fig.suptitle(title)
    return fig


def _draw_panel(ax: Any, rows: pl.DataFrame, setting: str, metrics: list[Any]) -> None:
    from matplotlib.ticker import MaxNLocator

    variants = rows["_variant"].unique(maintain_order=True).to_list()
    steps = rows["step"].unique().sort().to_list()
    dodge = _dodge(rows)
    for v, variant in enumerate(variants):
        points = rows.filter((pl.col("setting") == setting) & (pl.col("_variant") == variant))
        style = (_MARKERS[v % len(_MARKERS)], _LINESTYLES[v % len(_LINESTYLES)])
        for k, metric in enumerate(metrics):
            name = metric.name + ("" if metric.higher_is_better else f" ({direction_note(metric)})")
            label = name if len(variants) == 1 else f"{name} | {_shorten(variant or 'default')}"
            _draw(ax, points, metric.name, 100.0 if metric.scale == "share" else 1.0, (k - 1) * dodge,
                  _COLOURS[k % len(_COLOURS)], style, label)
    ax.set_title(_panel_title(setting))
    ax.set_xlabel("training step")
    if len(steps) <= 8:
        ax.set_xticks(steps)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if all(m.scale == "share" for m in metrics):
        # A little room past 0 and 100 so markers and CI caps at the limits stay whole.
        ax.set_ylim(-3, 103)
    ax.margins(x=0.08)
    ax.grid(alpha=0.3)


def _draw(ax: Any, points: pl.DataFrame, metric: str, factor: float, offset: float, colour: str,
          style: tuple[str, str], label: str) -> None:
    if points.height == 0:
        return
    y = points[metric].to_numpy() * factor
    errors = None
    if f"{metric}_low" in points.columns:  # a metric without a CI (mean_turns) is drawn bare
        low = points[f"{metric}_low"].to_numpy() * factor
        high = points[f"{metric}_high"].to_numpy() * factor
        errors = [y - low, high - y]
    ax.errorbar(points["step"].to_numpy() + offset, y, yerr=errors, color=colour,
                marker=style[0], linestyle=style[1], markersize=5, capsize=3, linewidth=1.2, label=label)
    if "status" in points.columns and (stopped := (points["status"] == "stopped").to_numpy()).any():
        # stopped by a racing sweep: a hollow marker, its value on the records it has (partial)
        ax.plot(points["step"].to_numpy()[stopped] + offset, y[stopped], linestyle="none", marker=style[0],
                markersize=8, markerfacecolor="white", markeredgecolor=colour, zorder=3)


def _panel_title(setting: str) -> str:
    if setting == POOLED:
        return "all settings (pooled)"
    if setting.startswith(f"{POOLED}/"):
        return f"all settings (pooled), {setting.split('/', 1)[1]}"
    return f"setting {setting}"


def ordered_settings(rows: pl.DataFrame) -> list[str]:
    """The settings of `rows` (metrics row labels) as found (a metrics table lists them in the
    benchmark's order), the pooled row and its subsets (`all/clean`) last."""
    found = rows["setting"].unique(maintain_order=True).to_list()
    pooled = [s for s in found if s == POOLED or s.startswith(f"{POOLED}/")]
    return [*(s for s in found if s not in pooled), *pooled]


def _dodge(rows: pl.DataFrame) -> float:
    # Shift the three metrics apart by 1.5% of the step range so their CI bars do not overlap.
    steps = rows["step"]
    span = (steps.max() - steps.min()) if steps.len() else 0
    return 0.015 * span if span else 0.05


def variant_of(overrides: Sequence[str] | None) -> str:
    """A job's overrides but those naming its checkpoint: the jobs of one training curve share it."""
    return " ".join(o for o in overrides or () if override_key(o) not in _CHECKPOINT_KEYS)


def with_variant(rows: pl.DataFrame) -> pl.DataFrame:
    """Board rows with `_variant`, each row's variant_of its overrides."""
    return rows.with_columns(pl.Series("_variant", [variant_of(o) for o in rows["overrides"].to_list()],
                                       dtype=pl.String))


def _shorten(text: str, limit: int = 48) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."
