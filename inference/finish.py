"""The end of every run: grade, write the reports and run.json's facts, apply the error budget.

Shared by `toolsweep` and `toolsweep judge`; the grading and writing part is grading's own
(`grading.outputs.write_graded`), which `toolsweep grade` calls too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from grading.outputs import write_graded
from grading.report import format_table
from grading.views import SIDE_TABLES
from inference import console
from inference.cache import model_digest
from inference.config import ToolsweepConfig
from inference.console import marker
from inference.errors import ToolsweepError
from inference.failures import ERROR_CLASSES
from inference.generation import MODEL_ROLE
from inference.models import cache_root, declared_quantization
from inference.runinfo import Timer, git_commit, machine, package_versions, write_run_json

REPO_ROOT = Path(__file__).resolve().parent.parent
_META_KEYS = ("model", "backend", "prompt", "roles", "commit", "packages", "config")


class RunFailed(ToolsweepError):
    """More samples errored than max_error_rate allows (outputs are still written)."""


def finish_run(table: pl.DataFrame, cfg: ToolsweepConfig, run_dir: Path, resolved: dict[str, Any], timer: Timer,
               solved: dict[str, Any]) -> dict[str, Any]:
    """Grade the solved table, write every report; returns run.json's facts. Raises RunFailed
    (after writing) when more than max_error_rate of the samples errored."""
    marker("grading and writing reports")
    facts = run_facts(cfg, resolved, table, timer, solved)
    meta = {"toolsweep_run": {k: facts.get(k) for k in _META_KEYS}}
    with timer.phase("grade"):
        graded, metrics, scorer = write_graded(table, run_dir, meta, facts=facts, progress=console.progress,
                                               written=lambda name: marker(f"wrote {name}", shown=False))
    facts["scorer"] = scorer.name
    facts["wall_s"] = {**timer.phases, "total": timer.total()}
    _print_summary(facts, format_table(metrics, scorer), run_dir)
    try:
        check_error_rate(graded, cfg.max_error_rate)
    except RunFailed as exc:
        # The outputs are written: run.json says so too, so toolsweep grade and -judge can read the run.
        write_run_json(run_dir, {**facts, "status": "failed", "reason": str(exc)})
        raise
    return facts


REPORT_FACTS = "report_facts"
"""A solver's facts under this key ({name: value}) are lines of the report's facts, kept from every
solver (other keys of a later solver replace an earlier one's)."""


def solver_facts(solved: dict[str, Any]) -> dict[str, Any]:
    """Every solver's facts, flattened, their report lines gathered."""
    extra: dict[str, Any] = {}
    for step in (solved.get("solvers") or {}).values():
        for key, value in step.items():
            if key == REPORT_FACTS:
                extra.setdefault(key, {}).update(value)
            else:
                extra[key] = value
    return extra


def run_facts(cfg: ToolsweepConfig, resolved: dict[str, Any], table: pl.DataFrame, timer: Timer,
              solved: dict[str, Any]) -> dict[str, Any]:
    """What run.json records: config, models by role, generation counts, samples, times, versions."""
    roles = dict(solved.get("roles") or {})
    main = roles.get(MODEL_ROLE, {})
    generation = main.get("generation") or {"engine_calls": 0, "stored_hits": 0, "shards": 0, "backend": None}
    extra = solver_facts(solved)
    return {
        "status": "complete", "config": resolved, "model": _model_facts(cfg),
        "engine": cfg.engine.name, "constraint": cfg.decoding.constraint,
        "prompt": {"format": None}, **extra,
        "backend": generation.get("backend"),
        "generation": {k: generation.get(k, 0) for k in ("engine_calls", "stored_hits", "shards")},
        "dtype": main.get("dtype"), "roles": roles, SIDE_TABLES: list(solved.get(SIDE_TABLES) or []),
        "decoding": {"greedy": cfg.decoding.temperature == 0, "temperature": cfg.decoding.temperature,
                     "max_new_tokens": cfg.decoding.max_new_tokens, "seed": cfg.decoding.seed,
                     "samples_per_record": cfg.decoding.samples},
        "samples": sample_facts(table), "wall_s": {**timer.phases, "total": timer.total()},
        "throughput": _throughput(table, main),
        "packages": package_versions(), "commit": git_commit(REPO_ROOT), "machine": machine(),
    }


def _model_facts(cfg: ToolsweepConfig) -> dict[str, Any]:
    path = Path(cfg.model.path)
    return {"path": str(path), "name": cfg.model.name or path.name,
            "fingerprint": model_digest(path, cache_root() / "digests")[:16] if (path / "config.json").is_file()
            else None,
            # what the numbers were computed at: a quantized twin is compared by these
            "quantization": cfg.model.quantization or declared_quantization(path),
            "quantization_source": "model.quantization" if cfg.model.quantization else "checkpoint config.json",
            "load_format": cfg.model.load_format, "kv_cache_dtype": getattr(cfg.engine, "kv_cache_dtype", None)}


def sample_facts(table: pl.DataFrame) -> dict[str, Any]:
    """run.json's sample counts: total, generated, failed and the failures by class."""
    generated = table.filter(pl.col("output_tokens").is_not_null())
    failures = table["failure"].drop_nulls()
    return {"total": table.height, "generated": generated.height, "failed": failures.len(),
            "failures": dict(sorted(failures.value_counts().iter_rows())), "errors": error_summary(table)}


def _throughput(table: pl.DataFrame, main: dict[str, Any]) -> dict[str, Any]:
    generated = table.filter(pl.col("output_tokens").is_not_null())
    prompt_tokens = int(main.get("prompt_tokens") or 0)
    output_tokens = int(main.get("output_tokens") or 0)
    work = max(float(main.get("work_s") or 0.0), 1e-9)
    return {"prompts_per_s": round(generated.height / work, 3), "prompt_tokens_per_s": round(prompt_tokens / work, 1),
            "output_tokens_per_s": round(output_tokens / work, 1), "prompt_tokens": prompt_tokens,
            "output_tokens": output_tokens}


def _print_summary(facts: dict[str, Any], table: str, run_dir: Path) -> None:
    prompt = facts.get("prompt") or {}
    print(f"scorer: {facts['scorer']}; prompt format: {prompt.get('format')}"
          + (f" (tool parser {prompt['tool_parser']}; tools given in {prompt['tools_in']})" if "tool_parser" in prompt
             else ""))
    print(table)
    speed = facts["throughput"]
    print(f"\nrun dir: {run_dir}  ({facts['wall_s']['total']:.1f}s"
          + (f", {speed['prompts_per_s']} prompts/s, {speed['output_tokens_per_s']} output tokens/s"
             if facts["generation"]["engine_calls"] else ", nothing generated") + ")")


def error_summary(table: pl.DataFrame) -> dict[str, int]:
    """Counts of the failure classes that are errors of the run, not of the model."""
    counts = table.get_column("failure").drop_nulls().value_counts().rows()
    return {name: n for name, n in sorted(counts) if name in ERROR_CLASSES}


def check_error_rate(table: pl.DataFrame, max_error_rate: float) -> None:
    """Raise RunFailed when more than `max_error_rate` of the samples errored."""
    errors = error_summary(table)
    rate = sum(errors.values()) / max(table.height, 1)
    if rate > max_error_rate:
        listing = ", ".join(f"{name}: {n}" for name, n in errors.items())
        raise RunFailed(f"{sum(errors.values())} of {table.height} samples errored ({rate:.1%} > "
                        f"max_error_rate {max_error_rate:.1%}): {listing}. See the `error` column of "
                        "samples.parquet; raise max_error_rate to accept such a run.")
