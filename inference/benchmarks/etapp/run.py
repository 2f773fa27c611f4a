"""An ETAPP run: check everything, agent phase, judge phase (each model in its own process),
then grading and reports from the Parquet files the phases wrote.

Every input is checked before a model loads. Rerunning into the same run dir resumes: each
phase takes its finished generations from the run's store, so nothing finished is generated
again; a finished run re-judged (`toolsweep-judge RUN_DIR`) makes no agent call.
"""

from __future__ import annotations

import ctypes
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl

from grading.grades import grade
from grading.html_report import write_run_report
from grading.metrics import POOLED, summarize
from grading.report import format_table, write_markdown, write_metrics, write_samples
from grading.scoring import get_scorer
from inference import console, pipeline
from .cases import case_problems, case_table, load_cases
from .phases import CONFIG, agent_phase, travelplanner_path
from inference.config import ToolsweepConfig
from inference.errors import ConfigError, DatasetError, ToolsweepError
from inference.models import check_model_dir, is_embedded_path, prepare_embedded_model
from inference.runinfo import Timer, git_commit, machine, package_versions

SCORER = "etapp_judge"
CLEAN = "clean"


class PhaseFailed(ToolsweepError):
    """A phase's process exited with an error (its message is above, and in run.log)."""


def check_inputs(cfg: ToolsweepConfig) -> None:
    """One error listing every problem with the options, the data and the judge model."""
    root = Path(cfg.dataset.path).expanduser()
    problems = [*cfg.etapp.problems(), *case_problems(root, cfg.etapp.users, cfg.etapp.instructions)]
    problems += sandbox_problems(cfg, root)
    if cfg.etapp.upstream:
        problems += upstream_problems(cfg)
    if cfg.judge.enabled:
        problems += judge_model_problems(cfg)
    if problems:
        raise DatasetError("cannot run ETAPP; nothing was run:\n  " + "\n  ".join(problems))


def sandbox_problems(cfg: ToolsweepConfig, root: Path) -> list[str]:
    """Every missing or unreadable table of the selected users (all users when unreadable)."""
    from .cases import read_profiles
    from .sandbox import SandboxData

    try:
        users = list(cfg.etapp.users or read_profiles(root))
    except DatasetError:
        return []  # the profiles file itself is already reported
    return SandboxData.problems(root, travelplanner_path(cfg), users)


def upstream_problems(cfg: ToolsweepConfig) -> list[str]:
    from .upstream import read_upstream

    if len(cfg.dataset.settings) != 1 or len(cfg.etapp.methods) != 1:
        return [f"etapp.upstream: name the one setting and method that made the files (dataset.settings=[...] "
                f"etapp.methods=[...]), got {list(cfg.dataset.settings)} and {list(cfg.etapp.methods)}"]
    cases = load_cases(Path(cfg.dataset.path).expanduser(), cfg.etapp.users, cfg.etapp.instructions)
    return read_upstream(Path(cfg.etapp.upstream).expanduser(), sorted({c.user for c in cases}),
                         sorted({c.instruction for c in cases}))[1]


def judge_model_problems(cfg: ToolsweepConfig) -> list[str]:
    model = cfg.judge.model
    if model.embedded and is_embedded_path(model.path):
        prepare_embedded_model()
    try:
        check_model_dir(model.path, weights=True)
    except ConfigError as exc:
        return [f"judge.model: {exc}"]
    return []


def run(cfg: ToolsweepConfig, run_dir: Path, resolved: dict[str, Any], timer: Timer) -> dict[str, Any]:
    check_inputs(cfg)
    (run_dir / CONFIG).parent.mkdir(parents=True, exist_ok=True)
    (run_dir / CONFIG).write_text(json.dumps(resolved, indent=2, default=str), encoding="utf-8")
    with timer.phase("agent"):
        if cfg.engine.loads_model and not cfg.etapp.upstream:
            run_phase("agent", run_dir)
        else:  # a scripted agent loads no model: no process to free
            _write_phase_facts(run_dir, "agent", agent_phase(cfg, run_dir))
    if cfg.judge.enabled:
        with timer.phase("judge"):
            run_phase("judge", run_dir)
    return finish(cfg, run_dir, resolved, timer)


def run_phase(phase: str, run_dir: Path) -> None:
    """One phase in a child process (its model's memory is freed when it exits); the child dies
    with this process, so a killed run leaves no orphan holding the GPU."""
    pipeline.marker(f"{phase} phase")
    command = [sys.executable, "-m", "inference.benchmarks.etapp.phases", phase, str(run_dir)]
    code = subprocess.call(command, preexec_fn=_die_with_parent)
    if code != 0:
        raise PhaseFailed(f"the {phase} phase failed (exit {code}); its error is printed above and in "
                          f"{run_dir / 'run.log'}. Rerun the same command with hydra.run.dir={run_dir} to resume.")


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass  # not Linux: a killed parent may leave the child running


def _write_phase_facts(run_dir: Path, phase: str, facts: dict[str, Any]) -> None:
    (run_dir / "etapp" / f"{phase}.json").write_text(json.dumps(facts, indent=2, default=str), encoding="utf-8")


def phase_facts(run_dir: Path, phase: str) -> dict[str, Any] | None:
    path = run_dir / "etapp" / f"{phase}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def sample_table(cfg: ToolsweepConfig, run_dir: Path) -> pl.DataFrame:
    """One row per case: the case, how its episode went, the judge's scores."""
    cases = load_cases(Path(cfg.dataset.path).expanduser(), cfg.etapp.users, cfg.etapp.instructions)
    table = case_table(cases, cfg.dataset.settings, cfg.etapp.methods)
    episodes = pl.read_parquet(run_dir / "episodes.parquet")
    table = table.join(episodes, on="sample_id", how="left", maintain_order="left")
    judged = run_dir / "judgements.parquet"
    if judged.is_file():
        table = table.join(pl.read_parquet(judged), on="sample_id", how="left", maintain_order="left")
    else:
        table = table.with_columns(
            *[pl.lit(None, dtype=pl.Int64).alias(f"judge_{d}") for d in ("procedure", "personalization",
                                                                        "proactivity")],
            pl.lit(None, dtype=pl.String).alias("judge_keypoints"),
            pl.lit("not judged: judge.enabled=false (judge it with toolsweep-judge RUN_DIR)").alias("judge_error"))
    failure = pl.when(pl.col("end_reason").is_in(["engine_error", "too_long"])).then(pl.col("end_reason"))
    return table.with_columns(
        pl.lit(SCORER).alias("scorer"), pl.col("final_answer").alias("output"),
        failure.otherwise(None).alias("failure"),
        pl.col("agent_prompt_tokens").alias("prompt_tokens"), pl.col("agent_output_tokens").alias("output_tokens"),
        pl.col("judge_error").alias("error"))


def metrics_with_clean(graded: pl.DataFrame) -> pl.DataFrame:
    """Metrics on all instructions and, beside each row, on the clean subset (no data substitute)."""
    whole = summarize(graded)
    clean = graded.filter(pl.col("clean"))
    if clean.is_empty():
        return whole
    part = summarize(clean).with_columns(pl.format("{}/{}", pl.col("setting"), pl.lit(CLEAN)).alias("setting"))
    order = {s: i for i, s in enumerate(whole["setting"].to_list())}
    both = pl.concat([whole.with_columns(pl.lit(0).alias("_c")), part.with_columns(pl.lit(1).alias("_c"))])
    key = pl.col("setting").str.replace(f"/{CLEAN}$", "").replace_strict(order, default=len(order))
    return both.sort(key, "_c", maintain_order=True).drop("_c")


def finish(cfg: ToolsweepConfig, run_dir: Path, resolved: dict[str, Any], timer: Timer) -> dict[str, Any]:
    """Grade the run's Parquet files and write samples, metrics and the Markdown report."""
    with timer.phase("grade"):
        graded = grade(sample_table(cfg, run_dir), progress=console.progress)
        metrics = metrics_with_clean(graded)
    scorer = get_scorer(SCORER)
    facts = run_facts(cfg, run_dir, resolved, graded, timer)
    meta = {"toolsweep_run": {k: facts[k] for k in ("model", "judge", "commit", "packages", "config")}}
    write_samples(graded, run_dir, meta)
    write_metrics(metrics, scorer, run_dir, meta)
    write_markdown(metrics, scorer, run_dir)
    write_run_report(run_dir, facts)
    print(format_table(metrics, scorer))
    print(f"\nrun dir: {run_dir}  ({timer.total():.1f}s)")
    return facts


def run_facts(cfg: ToolsweepConfig, run_dir: Path, resolved: dict[str, Any], graded: pl.DataFrame,
              timer: Timer) -> dict[str, Any]:
    from .sandbox import SUBSTITUTE_VERSIONS

    agent, judge = phase_facts(run_dir, "agent"), phase_facts(run_dir, "judge")
    ends = dict(sorted(graded["end_reason"].fill_null("missing").value_counts().iter_rows()))
    return {
        "status": "complete", "config": resolved, "scorer": SCORER, "engine": cfg.engine.name,
        "model": {"path": cfg.model.path, "name": cfg.model.name or Path(cfg.model.path).name},
        "judge": (judge or {}).get("model") if cfg.judge.enabled else None,
        "constraint": cfg.decoding.constraint, "backend": ((agent or {}).get("generation") or {}).get("backend"),
        "prompt": {"format": "etapp", "methods": list(cfg.etapp.methods)},
        "etapp": {"state": cfg.etapp.state, "max_turns": cfg.etapp.max_turns, "substitutes": SUBSTITUTE_VERSIONS,
                  "end_reasons": ends},
        "phases": {"agent": agent, "judge": judge},
        "samples": {"total": graded.height, "failed": int(graded["failure"].is_not_null().sum()),
                    "judge_failed": int(graded["judge_error"].is_not_null().sum())},
        "wall_s": {**timer.phases, "total": timer.total()},
        "packages": package_versions(), "commit": git_commit(Path(__file__).resolve().parents[3]),
        "machine": machine(),
    }
