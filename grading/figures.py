"""The figures of report.html: error taxonomy, slices with CIs, and a sweep's ablation.

Each function returns a matplotlib Figure (object API on an Agg canvas, see grading/plots.py);
grading/html_report.py embeds them. Shares are drawn in percent, scores as they are.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import polars as pl

from grading.plots import new_figure
from grading.scoring import SHARE, Metric
from grading.views import UNDIAGNOSED

_UNDIAGNOSED_COLOUR = "#c7c7c7"
_SMALL_COLOUR, _COLOUR = "#8c8c8c", "tab:blue"
_ABLATION_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")


def outcome_figure(shares: dict[str, dict[str, list[float]]], settings: Sequence[str],
                   outcomes: Sequence[str], colours: Mapping[str, str]) -> Any:
    """Stacked horizontal bars, one per setting, one panel per reading: the share of samples in
    each outcome. `shares[reading][outcome]` holds one value in [0, 1] per setting; `colours`
    (outcome -> colour) are the outcome view's, the undiagnosed grey."""
    colours = {UNDIAGNOSED: _UNDIAGNOSED_COLOUR, **colours}
    readings = list(shares)
    fig = new_figure(4.2 * len(readings) + 0.6, 0.45 * len(settings) + 1.8)
    axes = fig.subplots(1, len(readings), sharey=True, squeeze=False)[0]
    labels = ["all (pooled)" if s == "all" else s for s in settings]
    for ax, reading in zip(axes, readings):
        left = np.zeros(len(settings))
        for outcome in outcomes:
            width = 100 * np.asarray(shares[reading][outcome])
            ax.barh(labels, width, left=left, color=colours.get(outcome), label=outcome, height=0.6)
            left += width
        ax.set_title(f"{reading} reading")
        ax.set_xlim(0, 100)
        ax.set_xlabel("samples (%)")
    axes[0].invert_yaxis()  # settings top to bottom in table order (the axes share y: once)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncols=min(len(names), 4), frameon=False)
    return fig


def slice_figure(rows: pl.DataFrame, metric: Metric, title: str) -> Any:
    """`metric` with its CI per band of one slice (rows of slices.parquet in band order); bands
    with few samples (`small`) are drawn hollow and grey, their tick labels starred."""
    factor = 100.0 if metric.scale == SHARE else 1.0
    x = np.arange(rows.height)
    y = rows[metric.name].cast(pl.Float64).to_numpy() * factor
    low, high = _bounds(rows, metric, y, factor)
    small = rows["small"].fill_null(False).to_numpy()
    errors = np.vstack([y - low, high - y])
    fig = new_figure(min(12.0, max(4.0, 0.38 * rows.height + 1.6)), 3.0)
    ax = fig.subplots()
    for mask, colour, face, label in ((~small, _COLOUR, _COLOUR, None),
                                      (small, _SMALL_COLOUR, "white", "fewer than 20 samples")):
        if mask.any():
            ax.errorbar(x[mask], y[mask], yerr=errors[:, mask], fmt="o", color=colour,
                        markerfacecolor=face, capsize=3, markersize=5, linewidth=1.2, label=label)
    ticks = [f"{b}{'*' if s else ''}\nn={n}" for b, n, s in zip(rows["band"], rows["n"], small)]
    ax.set_xticks(x, ticks, rotation=90 if rows.height > 8 else 0, fontsize=8)
    ax.set_ylabel(metric.name + (" (%)" if factor == 100.0 else ""))
    if factor == 100.0:
        ax.set_ylim(-3, 103)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    if small.any():
        ax.legend(loc="best", fontsize=8, frameon=False)
    return fig


def ablation_figure(panels: dict[str, pl.DataFrame], metric: Metric, settings: Sequence[str],
                    histories: Sequence[str], reading: str, axis: str) -> Any:
    """Grouped bars: `metric` (with its CI) per setting, one bar per value of the ablation `axis`,
    one panel per configuration; each panel's rows have `setting`, `ablation` and the metric columns."""
    factor = 100.0 if metric.scale == SHARE else 1.0
    ncols = min(len(panels), 2)
    nrows = -(-len(panels) // ncols)
    panel_width = min(8.0, max(4.5, 0.45 * len(settings) * len(histories) + 1.5))
    fig = new_figure(panel_width * ncols, 3.4 * nrows + 0.8)
    axes = list(fig.subplots(nrows, ncols, sharey=True, squeeze=False).flat)
    for spare in axes[len(panels):]:
        spare.set_visible(False)
    width = 0.8 / max(1, len(histories))
    for ax, (variant, rows) in zip(axes, panels.items()):
        for k, history in enumerate(histories):
            y, low, high = [], [], []
            for setting in settings:
                match = rows.filter((pl.col("setting") == setting) & (pl.col("ablation") == history))
                value = match[metric.name][0] if match.height else None
                y.append(np.nan if value is None else value * factor)
                low.append(_bound(match, f"{metric.name}_low", y[-1], factor))
                high.append(_bound(match, f"{metric.name}_high", y[-1], factor))
            y_arr = np.asarray(y)
            offsets = np.arange(len(settings)) + (k - (len(histories) - 1) / 2) * width
            ax.bar(offsets, y_arr, width=width * 0.95, label=f"{axis}={history}",
                   color=_ABLATION_COLOURS[k % len(_ABLATION_COLOURS)],
                   yerr=np.vstack([y_arr - np.asarray(low), np.asarray(high) - y_arr]), capsize=3, ecolor="#444")
        ax.set_xticks(np.arange(len(settings)), ["all (pooled)" if s == "all" else s for s in settings])
        ax.set_title(variant or "all jobs", fontsize=9)
        ax.set_ylabel(f"{metric.name}, {reading} reading" + (" (%)" if factor == 100.0 else ""))
        if factor == 100.0:
            ax.set_ylim(0, 103)
        ax.grid(alpha=0.3, axis="y")
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncols=min(len(names), 4), frameon=False)
    return fig


def _bounds(rows: pl.DataFrame, metric: Metric, y: np.ndarray, factor: float) -> tuple[np.ndarray, np.ndarray]:
    # A metric without a CI (or a band where it is undefined) gets a zero-length bar.
    if not metric.ci or f"{metric.name}_low" not in rows.columns:
        return y, y
    low = rows[f"{metric.name}_low"].cast(pl.Float64).fill_null(np.nan).to_numpy() * factor
    high = rows[f"{metric.name}_high"].cast(pl.Float64).fill_null(np.nan).to_numpy() * factor
    return np.where(np.isnan(low), y, low), np.where(np.isnan(high), y, high)


def _bound(match: pl.DataFrame, column: str, value: float, factor: float) -> float:
    if match.height == 0 or column not in match.columns or match[column][0] is None:
        return value
    return match[column][0] * factor
