"""report.html: one page a person opens, per run, per sweep and per comparison.

The page is a single self-contained file: CSS inline, figures as base64 PNG data URIs, no script
and no link to anything outside it, so it opens offline and survives being mailed. Its tables
are the cells of the Markdown reports (grading.report, grading.tables), so a number reads the
same in metrics.md and report.html; its layout is the Jinja2 templates in grading/templates/.
"""

from __future__ import annotations

import base64
import io
import json
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

import jinja2
import polars as pl

from grading.case_view import CASES, case_page
from grading.figures import ablation_figure, outcome_figure, slice_figure
from grading.files import atomic_write_text, read_facts, run_name, samples_file
from grading.listing import truncated
from grading.metrics import POOLED, setting_order
from grading.plots import SCORED, ordered_settings, plottable, primary_rows, step_figure
from grading.race import race_table
from grading.repeats import record_level
from grading.report import metrics_cells
from grading.scoring import Metric, Scorer, direction_note, primary_reading, scorer_of
from grading.tables import (board_axis, board_overrides, board_scorers, comparison_cells, job_label_parts,
                            job_labels, leaderboard_cells, override_pairs, shown_metrics)
from grading.views import UNDIAGNOSED, AblationAxis, outcome_view

REPORT = "report.html"
AGAINST_FIRST = "against_first.parquet"
"""A sweep's jobs against its first (grading.leaderboard.write_against_first writes it)."""
FLIPS_SHOWN = 20
OUTPUT_CHARS = 600
_DPI = 100


def write_run_report(run_dir: Path, facts: Mapping[str, Any] | None = None, scorer: Scorer | None = None) -> Path:
    """RUN_DIR/report.html from samples.parquet, metrics.parquet, run.json and, when present,
    slices.parquet. `facts` stands in for run.json, which a run writes after its reports;
    `scorer` for the one samples.parquet names, which a run has already looked up."""
    run_dir = Path(run_dir)
    samples = pl.read_parquet(run_dir / "samples.parquet")
    metrics = pl.read_parquet(run_dir / "metrics.parquet")
    scorer = scorer or scorer_of(samples)
    facts = dict(facts) if facts is not None else read_facts(run_dir / "run.json")
    slices_path = run_dir / "slices.parquet"
    slices = pl.read_parquet(slices_path) if slices_path.is_file() else None
    model = (facts.get("model") or {}).get("name") or run_dir.name
    page = {"title": f"{model} on {scorer.name}", "where": str(run_dir.resolve()),
            "facts": run_facts(facts, scorer.name, samples),
            "headline": _table("headline", *metrics_cells(metrics, scorer)),
            "definitions": [(m.name, definition(m)) for m in scorer.metrics],
            "outcomes": _outcomes(samples, scorer), "slices": _slices(slices, scorer),
            "cases": _cases(run_dir, samples, scorer, facts, page_title=f"{model} on {scorer.name}: cases")}
    return _render("run.html.j2", page, run_dir / REPORT)


def _cases(run_dir: Path, samples: pl.DataFrame, scorer: Scorer, facts: Mapping[str, Any],
           page_title: str) -> dict[str, Any] | None:
    """cases.html beside the report for a scorer with a case view and a run that lists a side table
    of messages; what the report says of it."""
    view = getattr(scorer, "cases", None)
    cases = case_page(run_dir, samples, view, facts) if view is not None else None
    if cases is None:
        return None
    _render("cases.html.j2", {"title": page_title, "where": str(run_dir.resolve()), **cases}, run_dir / CASES)
    ends = Counter(case["end"] for case in cases["cases"])
    return {"href": CASES, "count": len(cases["cases"]), "ends": sorted(ends.items()),
            "judged": view.judge_column is not None}


def definition(metric: Metric) -> str:
    """A metric's line in a run report: what it measures and which way is better."""
    return "; ".join(t for t in (metric.description, direction_note(metric)) if t)


def write_sweep_report(sweep_dir: Path) -> Path:
    """SWEEP_DIR/report.html from leaderboard.parquet: the board with each job named by its
    differing overrides, metrics against step, and the ablation its scorer declares when jobs vary it."""
    sweep_dir = Path(sweep_dir)
    board = pl.read_parquet(sweep_dir / "leaderboard.parquet")
    jobs = board.unique("job", maintain_order=True).sort("job")
    overridden = board_overrides(jobs)
    parts = dict(zip(jobs["job"].to_list(), job_label_parts(overridden)))
    labels = dict(zip(jobs["job"].to_list(), job_labels(overridden)))
    header, rows = leaderboard_cells(board)
    failed = ["failed" if s == "failed" else "" for s in board["status"].to_list()]
    metrics = shown_metrics(board_scorers(board))
    where = sweep_dir.resolve()
    figures = []
    stepped = board.filter(pl.col("status").is_in(SCORED) & pl.col("step").is_not_null())
    if plotted := plottable(stepped, board_scorers(board))[:3]:
        title = f"{where.parent.name}/{where.name}: metrics by training step (95% bootstrap CI)"
        figures.append(_figure("by_step", step_figure(stepped, plotted, title, REPORT),
                               f"{', '.join(m.name for m in plotted)} against training step per setting"))
    axis = board_axis(board)
    if metrics and axis is not None and (ablation := _ablation(board, parts, metrics[0], axis)) is not None:
        figures.append(ablation)
    page = {"title": f"sweep {where.parent.name}/{where.name}", "where": str(where),
            "n_jobs": jobs.height, "failed_jobs": jobs.filter(pl.col("status") == "failed")["job"].to_list(),
            "jobs": [(job, labels[job]) for job in labels],
            "board": _table("leaderboard", header, rows, failed),
            "race": _race_table(sweep_dir), "against_first": _against_first(sweep_dir, labels),
            "first_not_complete": _first_not_complete(jobs), "figures": figures,
            "suite": _suite(sweep_dir, board)}
    return _render("sweep.html.j2", page, sweep_dir / REPORT)


def _suite(sweep_dir: Path, board: pl.DataFrame) -> dict[str, Any] | None:
    """The suite table (grading.suite) and one figure per benchmark, where the jobs span several."""
    from grading.suite import benchmarks_of, suite_cells, suite_figures, suite_header, suite_rows
    from grading.sweep import find_jobs

    cells, notes = suite_cells(board, find_jobs(sweep_dir))
    if len(benchmarks_of(cells)) < 2:
        return None
    rows = suite_rows(cells)
    classes = ["failed" if any(c.startswith("failed") for c in row[2:]) else "" for row in rows]
    figures = [_figure(f"suite-{k}", fig, f"{benchmark}: {metric.name} on the pooled setting against training "
                                          "step, one line per configuration")
               for k, (benchmark, metric, fig) in enumerate(suite_figures(board, cells))]
    marked = [[f"{c[2:-2]} ★" if c.startswith("**") else c for c in row] for row in rows]  # Markdown's bold
    return {"table": _table("suite", suite_header(cells), marked, classes), "notes": notes, "figures": figures}


def _first_not_complete(jobs: pl.DataFrame) -> str | None:
    """Job 0's status where it did not complete and other jobs exist (then nothing is compared
    against it), else None."""
    first = jobs.filter(pl.col("job") == 0)
    if jobs.height < 2 or first.height == 0 or first["status"][0] == "complete":
        return None
    return first["status"][0]


def _against_first(sweep_dir: Path, labels: Mapping[int, str]) -> dict[str, Any] | None:
    """Each job against the first (against_first.parquet, written with the leaderboard), or None."""
    from grading.report import read_metadata
    from grading.scoring import get_scorer

    path = sweep_dir / AGAINST_FIRST
    if not path.is_file():
        return None
    table = pl.read_parquet(path)
    # the scorer the table was computed under, as its writer recorded it
    scorer = get_scorer(read_metadata(path)["toolsweep_against_first"]["scorer"])
    header, rows = comparison_cells(table.drop("job"), scorer,
                                    ("first job", "this job", "vs first", "first only", "job only"))
    rows = [[str(job), labels.get(job, ""), *row] for job, row in zip(table["job"].to_list(), rows)]
    return _table("against_first", ["job", "configuration", *header], rows, [""] * len(rows))


def _race_table(sweep_dir: Path) -> dict[str, Any] | None:
    """A racing sweep's rounds (race.json): each survivor's value, the job that shows it worse most
    strongly with its lead and one-sided p, that p adjusted for every comparison, stopped or not;
    None for other sweeps."""
    rows = race_table(sweep_dir)
    if not rows:
        return None
    header = ["round", "records", "leader", "job", "value", "against", "its lead", "one-sided p", "adjusted p",
              "stopped"]
    cells = [[str(r["round"]), str(r["records"]), str(r["leader"]), str(r["job"]),
              "" if r["value"] is None else f"{r['value']:.4f}", "" if r["against"] is None else str(r["against"]),
              "" if r["lead"] is None else f"{r['lead']:+.4f}", f"{r['p']:.2g}",
              "" if r["adjusted_p"] is None else f"{r['adjusted_p']:.2g}", "stopped" if r["stopped"] else ""]
             for r in rows]
    return _table("race", header, cells, ["failed" if r["stopped"] else "" for r in rows])


def write_compare_report(comparison: pl.DataFrame, flips: pl.DataFrame, out_dir: Path,
                         run_a: Path, run_b: Path) -> Path:
    """OUT_DIR/report.html: the paired comparison and the most instructive flips, both outputs side by side."""
    samples_a, samples_b = (pl.read_parquet(samples_file(Path(r))) for r in (run_a, run_b))
    scorer = scorer_of(samples_a)
    samples_a, samples_b = record_level(samples_a, scorer), record_level(samples_b, scorer)
    shown = instructive_flips(flips, samples_a, samples_b, scorer)
    page = {"title": f"{run_name(Path(run_b))} vs {run_name(Path(run_a))}", "run_a": str(run_a),
            "run_b": str(run_b), "scorer": scorer.name, "n_samples": samples_a.height,
            "comparison": _table("comparison", *comparison_cells(comparison, scorer)),
            "n_flipped": flips["sample_id"].n_unique(), "flips": shown, "output_chars": OUTPUT_CHARS}
    return _render("compare.html.j2", page, Path(out_dir) / REPORT)


def write_agreement_report(cells: tuple[Sequence[str], Sequence[Sequence[str]]], ranked: pl.DataFrame | None,
                           warnings: Sequence[str], out_dir: Path, run_a: Path, run_b: Path) -> Path:
    """OUT/report.html of toolsweep agreement: the agreement table (its header and text rows)
    and, for sweeps, the ranking."""
    header, rows = cells
    ranking = None
    if ranked is not None:
        row = ranked.row(0, named=True)
        flips = ", ".join(f"{a} / {b}" for a, b in json.loads(row["flips"])) or "none"
        ranking = {"metric": row["metric"], "table": _table("ranking", ["checkpoints", "tau", "p", "flipped pairs"],
                                                            [[str(row["jobs"]), f"{row['tau']:.3f}",
                                                              f"{row['p_value']:.3f}", flips]])}
    page = {"title": f"judges {run_a.name} vs {run_b.name}", "run_a": str(run_a), "run_b": str(run_b),
            "warnings": list(warnings), "agreement": _table("agreement", header, rows), "ranking": ranking}
    return _render("agreement.html.j2", page, out_dir / REPORT)


def instructive_flips(flips: pl.DataFrame, samples_a: pl.DataFrame, samples_b: pl.DataFrame,
                      scorer: Scorer, limit: int = FLIPS_SHOWN) -> list[dict[str, Any]]:
    """Up to `limit` flipped samples, one entry each, the most telling first: those where one run
    got the grade fully right (1) and the other wrong (0), then those that flipped in the most
    readings and metrics. Each entry has both outputs, truncated to OUTPUT_CHARS."""
    if flips.height == 0:
        return []
    flipped = flips["sample_id"].unique().to_list()
    rows_a = {r["sample_id"]: r for r in samples_a.filter(pl.col("sample_id").is_in(flipped)).iter_rows(named=True)}
    rows_b = {r["sample_id"]: r for r in samples_b.filter(pl.col("sample_id").is_in(flipped)).iter_rows(named=True)}
    sources = {m.name: m.sources[0] for m in scorer.metrics if m.per_sample}
    found: dict[str, dict[str, Any]] = {}
    for flip in flips.iter_rows(named=True):
        column = f"{flip['parser']}_{sources.get(flip['metric'], '')}"
        a, b = rows_a[flip["sample_id"]].get(column), rows_b[flip["sample_id"]].get(column)
        entry = found.setdefault(flip["sample_id"], {"sample_id": flip["sample_id"], "setting": flip["setting"],
                                                      "directions": set(), "flipped": [], "decisive": False})
        entry["directions"].add(flip["direction"])
        entry["flipped"].append((flip["parser"], flip["metric"]))
        entry["decisive"] |= {_number(a), _number(b)} == {0.0, 1.0}
    ranked = sorted(found.values(), key=lambda e: (not e["decisive"], -len(e["flipped"]), e["sample_id"]))
    return [{"sample_id": e["sample_id"], "setting": e["setting"], "decisive": e["decisive"],
             "direction": " and ".join(sorted(e["directions"])), "flipped": _flipped(e["flipped"]),
             "output_a": _truncated(rows_a[e["sample_id"]].get("output")),
             "output_b": _truncated(rows_b[e["sample_id"]].get("output"))} for e in ranked[:limit]]


def _flipped(pairs: list[tuple[str, str]]) -> str:
    """(reading, metric) pairs as `official, json: tool_acc, call_acc` (readings with the same metrics merged)."""
    by_reading: dict[str, list[str]] = {}
    for reading, metric in pairs:
        by_reading.setdefault(reading, []).append(metric)
    merged: dict[tuple[str, ...], list[str]] = {}
    for reading, metrics in by_reading.items():
        merged.setdefault(tuple(metrics), []).append(reading)
    return "; ".join(f"{', '.join(readings)}: {', '.join(metrics)}" for metrics, readings in merged.items())


def run_facts(facts: Mapping[str, Any], scorer: str, samples: pl.DataFrame) -> list[tuple[str, str]]:
    """(name, value) lines about a run from its run.json; absent facts are left out."""
    model, prompt = facts.get("model") or {}, facts.get("prompt") or {}
    walls, speed = facts.get("wall_s") or {}, facts.get("throughput") or {}
    failed = int(samples["failure"].is_not_null().sum()) if "failure" in samples.columns else 0
    lines = [("model", model.get("name")), ("model path", model.get("path")), *_weights_lines(model),
             ("scorer", facts.get("scorer") or scorer),
             ("engine", facts.get("engine")), ("constraint", facts.get("constraint")),
             ("structured-output backend", facts.get("backend")), ("prompt format", prompt.get("format")),
             ("samples", f"{samples.height} ({failed} failed)"),
             ("wall time", _walls(walls)), ("throughput", _speed(speed)), ("commit", facts.get("commit"))]
    # lines a solver declared (e.g. whose prompt texts ran, how the judge was read)
    declared = list((facts.get("report_facts") or {}).items())
    return [(name, str(value)) for name, value in [*lines[:2], *_role_lines(facts), *lines[2:], *declared]
            if value not in (None, "")]


def _weights_lines(model: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The weights' and KV cache's quantization, where run.json records them (runs since they were)."""
    if "quantization" not in model:
        return []
    kv = model.get("kv_cache_dtype")
    return [("quantization", f"{model.get('quantization') or 'none'}"
             f"{'' if not model.get('quantization') else ' (' + str(model.get('quantization_source')) + ')'}"
             f"; KV cache {kv or 'n/a'}; load format {model.get('load_format')}")]


def _role_lines(facts: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Every other model the numbers depend on (a judge role's): scores compare only under it."""
    lines = []
    for name, role in (facts.get("roles") or {}).items():
        if name != "model" and isinstance(role, Mapping):
            model = role.get("model") or {}
            lines.append((f"{name} model", f"{model.get('name')} ({model.get('path')}; engine {role.get('engine')}, "
                                           f"constraint {role.get('constraint')})"))
    return lines


def _walls(walls: Mapping[str, Any]) -> str:
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in walls.items() if k != "total" and isinstance(v, (int, float)))
    total = walls.get("total")
    return ((f"{total:.1f} s" if isinstance(total, (int, float)) else "") + (f" ({phases})" if phases else "")).strip()


def _speed(speed: Mapping[str, Any]) -> str:
    units = (("prompts_per_s", "prompts/s"), ("output_tokens_per_s", "output tokens/s"))
    return ", ".join(f"{speed[k]} {unit}" for k, unit in units if speed.get(k) is not None)


def _outcomes(samples: pl.DataFrame, scorer: Scorer) -> dict[str, Any] | None:
    """The taxonomy of the scorer's outcome view, per setting and reading; None where it declares none."""
    view = outcome_view(scorer)
    readings = [r for r in scorer.readings if view is not None and f"{r}_{view.field}" in samples.columns]
    if not readings:
        return None
    settings = setting_order(samples)
    counts = {r: [_outcome_counts(samples, s, f"{r}_{view.field}") for s in settings] for r in readings}
    outcomes = [o for o in (*view.outcomes, UNDIAGNOSED) if any(c.get(o) for cs in counts.values() for c in cs)]
    shares = {r: {o: [c.get(o, 0) / max(1, sum(c.values())) for c in counts[r]] for o in outcomes} for r in readings}
    rows = [[r, s, str(sum(c.values())), *(f"{c.get(o, 0)} ({100 * c.get(o, 0) / max(1, sum(c.values())):.1f}%)"
                                           for o in outcomes)]
            for r in readings for s, c in zip(settings, counts[r])]
    figure = _figure("outcomes", outcome_figure(shares, settings, outcomes, view.colours),
                     f"share of samples per {view.field.replace('_', ' ')}, per setting and reading")
    return {"figure": figure, "table": _table("outcomes", ["reading", "setting", "n", *outcomes], rows)}


def _outcome_counts(samples: pl.DataFrame, setting: str, column: str) -> dict[str, int]:
    frame = samples if setting == POOLED else samples.filter(pl.col("setting") == setting)
    values = frame[column].fill_null(UNDIAGNOSED)
    return dict(values.value_counts().iter_rows())


def _slices(slices: pl.DataFrame | None, scorer: Scorer) -> list[dict[str, str]]:
    """One figure per slice dimension: the headline metric per band, pooled settings, one reading."""
    metric = next((m for m in scorer.metrics if m.headline), scorer.metrics[0] if scorer.metrics else None)
    if slices is None or slices.height == 0 or metric is None or metric.name not in slices.columns:
        return []
    reading = primary_reading(scorer)
    pooled = slices.filter((pl.col("setting") == POOLED) & (pl.col("parser") == reading))
    figures = []
    for name in pooled["slice"].unique(maintain_order=True).to_list():
        rows = pooled.filter(pl.col("slice") == name)
        caption = f"{name}: {metric.name} per band ({reading} reading, settings pooled, 95% CI)"
        figures.append(_figure(f"slice-{name}", slice_figure(rows, metric, name), caption))
    return figures


def _ablation(board: pl.DataFrame, parts: Mapping[int, Sequence[tuple[str, str]]], metric: Metric,
              axis: AblationAxis) -> dict[str, str] | None:
    """Grouped bars of `metric` per setting per value of the axis's option, one panel per job label
    without it (`parts`: job_label_parts by job); None unless jobs differ in it."""
    complete = board.filter(pl.col("status") == "complete")
    history = {job: override_pairs(o or []).get(axis.option, "(default)")
               for job, o in zip(complete["job"].to_list(), complete["overrides"].to_list())}
    if len(set(history.values())) < 2 or metric.name not in board.columns:
        return None
    rows = primary_rows(complete)
    reading = ", ".join(rows["parser"].unique(maintain_order=True).to_list())
    rows = rows.with_columns(
        pl.col("job").replace_strict(history, return_dtype=pl.String).alias("ablation"),
        pl.col("job").replace_strict({j: " ".join(f"{k}={v}" for k, v in parts[j] if k != axis.option)
                                      for j in history}, return_dtype=pl.String).alias("variant"))
    panels = {v: rows.filter(pl.col("variant") == v) for v in rows["variant"].unique(maintain_order=True)}
    histories = list(dict.fromkeys(history.values()))
    fig = ablation_figure(panels, metric, ordered_settings(rows), histories, reading, axis.name)
    return _figure(axis.name, fig, f"{axis.name} ablation: {metric.name} per setting for each {axis.option} value")


def _table(name: str, header: Sequence[str], rows: Sequence[Sequence[str]],
           row_classes: Sequence[str] | None = None) -> dict[str, Any]:
    classes = list(row_classes) if row_classes is not None else [""] * len(rows)
    return {"id": name, "header": list(header),
            "rows": [{"class": c, "cells": [{"text": t, "num": _numeric(t)} for t in cells]}
                     for cells, c in zip(rows, classes)]}


def _numeric(text: str) -> bool:
    return bool(text) and (text[0].isdigit() or (text[0] in "+-<" and text[1:2].isdigit()))


def _figure(name: str, fig: Any, alt: str) -> dict[str, str]:
    """A figure as a base64 PNG data URI: the page needs no file beside it."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=_DPI)
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return {"id": name, "alt": alt, "src": f"data:image/png;base64,{encoded}"}


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    # Autoescaping: model outputs are arbitrary text and must never become markup.
    return jinja2.Environment(loader=jinja2.PackageLoader("grading", "templates"), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def _render(template: str, page: Mapping[str, Any], path: Path) -> Path:
    return atomic_write_text(path, _environment().get_template(template).render(**page))


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _truncated(text: str | None) -> str:
    return truncated(text, OUTPUT_CHARS)
