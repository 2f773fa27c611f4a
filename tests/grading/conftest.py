"""Synthetic runs and sweeps for the grading tests, written with the project's own writers.

Samples are graded by the real grader from real-looking outputs, so a test states what the
model answered ("call", "tool", ...) and the grade columns follow from it. ETAPP cases state
the judge's scores and the episode's counts, and the real ETAPP scorer grades them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import polars as pl
import pytest

from grading.canonical import canonical_json
from grading.grades import grade
from grading.metrics import summarize
from grading.report import sample_schema, write_markdown, write_metrics, write_samples
from grading.scoring import get_scorer, scorer_of

PETOOLBENCH = get_scorer("petoolbench")
ETAPP = get_scorer("etapp_judge")
ETAPP_JUDGE_SCORES = ("procedure", "personalization", "proactivity")
NOT_JUDGED = "not judged: roles.judge.enabled=false (judge it with toolsweep judge RUN_DIR)"
"""The judge error inference writes on every case of a run with judging switched off."""
SAMPLE_SCHEMA = sample_schema(PETOOLBENCH)

GOLD_TOOL = "<Travel>.<Trains>.<Search>"
GOLD_PARAMS = {"from": "Lyon", "to": "Paris"}
RUN_FACTS = {"toolsweep_run": {"backend": "outlines", "model": {"name": "tiny"}}}

# What the model answered -> (output text, failure). Grades follow from the real grader.
OUTCOMES: dict[str, tuple[str | None, str | None]] = {
    "call": (json.dumps({"tool_name": GOLD_TOOL, "parameters": GOLD_PARAMS}), None),
    "tool": (json.dumps({"tool_name": GOLD_TOOL, "parameters": {"from": "Lyon"}}), None),
    "params": (json.dumps({"tool_name": "<Travel>.<Buses>.<Search>", "parameters": GOLD_PARAMS}), None),
    "wrong": (json.dumps({"tool_name": "<Travel>.<Buses>.<Search>", "parameters": {}}), None),
    "invalid": ("I would search for trains.", None),
    "failed": (json.dumps({"tool_name": GOLD_TOOL, "parameters": GOLD_PARAMS}), "length"),
}


def make_samples(outcomes: dict[str, Sequence[str]]) -> pl.DataFrame:
    """A graded samples table with every SAMPLE_SCHEMA column: {setting: [outcome, ...]}."""
    rows = []
    for setting, answers in outcomes.items():
        for i, answer in enumerate(answers):
            output, failure = OUTCOMES[answer]
            rows.append({"sample_id": f"{setting}-{i}", "record_id": f"{setting}-{i}", "sample_index": 0,
                         "setting": setting, "entry_id": i,
                         "prompt_tokens": 100, "output_tokens": 20, "output": output,
                         "finish_reason": "length" if failure else "stop", "failure": failure,
                         "error": None, "gold_tool": GOLD_TOOL, "gold_params": canonical_json(GOLD_PARAMS),
                         "scorer": "petoolbench", "prompt_format": "benchmark", "calls": None,
                         "gold_in_schema": True, "schema_id": "s0", "history_dropped": 0,
                         "same_func_tools": None, "candidate_tools": None, "history_length": None,
                         "num_tools_combined": None, "prior_gold_tool": None})
    graded = grade(pl.DataFrame(rows))
    return graded.select([pl.col(c).cast(t) for c, t in SAMPLE_SCHEMA.items()])


def etapp_case(sample_id: str, setting: str, finals: tuple[int, int, int] | None, points: dict | None,
               counts: tuple[int, int, int, int, int], end: str, listed: list[str], called: list[str],
               error: str | None = None, clean: bool = True) -> dict[str, Any]:
    """One ETAPP sample row; `finals` (procedure, personalization, proactivity) or None (judge failed
    or not judged); `counts` (turns, calls, valid_calls, tool_errors, nudges)."""
    finals = finals or (None, None, None)
    return {"sample_id": sample_id, "setting": setting, "output": "answer", "failure": None, "scorer": "etapp_judge",
            **{f"judge_{d}": v for d, v in zip(ETAPP_JUDGE_SCORES, finals)},
            "judge_keypoints": None if points is None else json.dumps(points), "judge_error": error,
            **dict(zip(("turns", "n_calls", "valid_calls", "tool_errors", "nudges"), counts)),
            "end_reason": end, "listed_tools": json.dumps(listed), "called_tools": json.dumps(called), "clean": clean}


def etapp_points(personal: Sequence[int], proactive: Sequence[int]) -> dict[str, dict]:
    """The judge's key-point scores of one case (the procedure points all fully achieved)."""
    from grading.scorers.etapp_judge.rubric import PROCEDURE_KEYS

    return {"personal": dict(enumerate(personal)), "proactive": dict(enumerate(proactive)),
            "procedure": {k: 2 for k in PROCEDURE_KEYS}}


def etapp_table(cases: Sequence[dict[str, Any]]) -> pl.DataFrame:
    """ETAPP sample rows (`etapp_case`) as a table, the judge's scores typed as inference writes them."""
    return pl.DataFrame(list(cases), schema_overrides={f"judge_{d}": pl.Int64 for d in ETAPP_JUDGE_SCORES})


def write_run(run_dir: Path, samples: pl.DataFrame, model_name: str = "tiny",
              model_path: str = "/models/tiny") -> Path:
    """A finished run dir as toolsweep writes it: samples, metrics, slices, metrics.md, run.json."""
    from grading.report import write_slices
    from grading.slices import slice_table

    scorer = scorer_of(samples)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_samples(samples, run_dir, RUN_FACTS)
    write_metrics(summarize(samples), scorer, run_dir, RUN_FACTS)
    slices = slice_table(samples)
    write_slices(slices, scorer, run_dir, RUN_FACTS)
    write_markdown(summarize(samples), scorer, run_dir, slices)
    facts = {"status": "complete", "model": {"path": model_path, "name": model_name, "fingerprint": "f0"},
             "throughput": {"prompts_per_s": 2.5, "output_tokens_per_s": 50.0}, "wall_s": {"total": 12.0}}
    (run_dir / "run.json").write_text(json.dumps(facts), encoding="utf-8")
    return run_dir


def write_job(sweep_dir: Path, number: int, overrides: Sequence[str], samples: pl.DataFrame | None = None,
              job: dict[str, Any] | None = None) -> Path:
    """A sweep job dir: Hydra's overrides.yaml, a run when `samples` is given, job.json when `job` is."""
    job_dir = sweep_dir / str(number)
    (job_dir / ".hydra").mkdir(parents=True, exist_ok=True)
    (job_dir / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides), encoding="utf-8")
    if samples is not None:
        model_path = next((o.split("=", 1)[1] for o in overrides if o.startswith("model.path=")), "/models/tiny")
        write_run(job_dir, samples, model_name=Path(model_path).name, model_path=model_path)
    if job is not None:
        (job_dir / "job.json").write_text(json.dumps({"overrides": list(overrides), **job}), encoding="utf-8")
    return job_dir


def complete_job(model_path: str | None) -> dict[str, Any]:
    """job.json of a job that exited 0."""
    return {"status": "complete", "reason": None, "returncode": 0, "model_path": model_path, "wall_s": 30.0}


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Path:
    """A sweep: checkpoint-500 and checkpoint-1000 complete (1000 better), job 2 failed (OOM)."""
    root = tmp_path / "multirun" / "2026-01-01" / "12-00-00"
    root.mkdir(parents=True)
    (root / "multirun.yaml").write_text("hydra: {}\n", encoding="utf-8")
    early = make_samples({"p": ["call", "tool", "wrong", "invalid"], "r": ["tool", "wrong", "wrong", "params"]})
    late = make_samples({"p": ["call", "call", "tool", "call"], "r": ["call", "tool", "wrong", "call"]})
    for number, step, samples in ((0, 500, early), (1, 1000, late)):
        path = f"/ckpt/run/checkpoint-{step}"
        write_job(root, number, [f"model.path={path}"], samples, complete_job(path))
    write_job(root, 2, ["model.path=/ckpt/run/checkpoint-1500"], None,
              {"status": "failed", "reason": "CUDA out of memory", "returncode": 1,
               "model_path": "/ckpt/run/checkpoint-1500", "wall_s": 3.0})
    return root
