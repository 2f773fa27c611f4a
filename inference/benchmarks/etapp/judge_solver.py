"""ETAPP's judge solver: one guided-JSON judge call per case through the `judge` role, with
bounded retries.

Reads RUN_DIR/trajectories.parquet (the agent solver's), builds each case's judge prompt
(grading/etapp_rubric.py: the project's own wording, upstream's structure and key names) and
its per-case JSON schema, runs the judge through the run's generation store (resume, cache),
and adds the judge's columns to the sample table (also written as judgements.parquet).

Under guided decoding no answer is cut by its token budget: each case's analysis cap is lowered
until the schema's longest answer fits roles.judge.decoding.max_new_tokens
(`etapp_rubric.fitting_analysis_chars`), and recorded as `judge_analysis_chars`. An answer that
still does not parse after `dataset.judge_retries` retries (each with analysis strings half as
long) is a failure row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from grading import etapp_rubric as jt
from grading.files import atomic_write
from grading.scorers.etapp_judge import JUDGE_TOO_LONG, NOT_JUDGED
from inference.console import marker
from inference.engines import Request
from inference.errors import DatasetError
from inference.schemas import compact_json
from inference.solvers import SolveContext
from .agent_solver import TRAJECTORIES, sample_cases, travelplanner_path
from .cases import Case
from .episodes import Context
from .options import EtappOptions

JUDGE_ROLE = "judge"
JUDGEMENT_SCHEMA = {
    "sample_id": pl.String, "judge_procedure": pl.Int64, "judge_personalization": pl.Int64,
    "judge_proactivity": pl.Int64, "judge_keypoints": pl.String, "judge_error": pl.String,
    "judge_attempts": pl.Int64, "judge_prompt_tokens": pl.Int64, "judge_output_tokens": pl.Int64,
    "judge_analysis_chars": pl.Int64, "judge_output": pl.String}


@dataclass
class Item:
    """One case to judge."""

    sample_id: str
    prompt: str
    personal: list[str]
    proactive: list[str]
    result: dict[str, Any] | None = None
    analysis_chars: int | None = None
    """The analysis cap of the latest request (the option's cap, or less so the answer fits)."""


def read_messages(trajectories: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """sample_id -> its record in upstream's message format (tool_calls back as lists)."""
    messages: dict[str, list[dict[str, Any]]] = {}
    for row in trajectories.sort("sample_id", "index", maintain_order=True).iter_rows(named=True):
        message = {"role": row["role"], "content": row["content"]}
        if row["tool_calls"] is not None:
            message["tool_calls"] = json.loads(row["tool_calls"])
        messages.setdefault(row["sample_id"], []).append(message)
    return messages


def build_items(samples: pl.DataFrame, options: EtappOptions, messages: dict[str, list[dict[str, Any]]]) -> list["Item"]:
    """One judge item per sample with a trajectory, in sample order."""
    world = Context.load(Path(options.path).expanduser(), travelplanner_path(options))
    items = []
    for slot in sample_cases(samples, options):
        if slot.sample_id in messages:
            record = messages[slot.sample_id]
            items.append(_item(slot.sample_id, slot.method, slot.case, world, record, named_tools(record)))
    return items


def named_tools(record: list[dict[str, Any]]) -> list[str]:
    """Every tool the agent named in a call, run or not (upstream's judge takes the preference
    domains of every named call), in order; the finish call and empty names are no tool."""
    return [c["name"] for m in record for c in (m.get("tool_calls") or [])
            if isinstance(c, dict) and isinstance(c.get("name"), str) and c["name"] not in ("", "finish")]


def _item(sample_id: str, method: str, case: Case, world: Context, record: list[dict[str, Any]],
          called: list[str]) -> "Item":
    preferences = jt.preferences_for(list(case.available_tools), called, world.concrete[case.user], world.domains)
    personal, proactive = jt.keypoints(case.personal, case.proactive)
    prompt = jt.judge_prompt(case.query, world.profiles[case.user], preferences, jt.render_trajectory(record, method),
                             personal, proactive)
    return Item(sample_id, prompt, personal, proactive)


class JudgeSolver:
    """The judge's scores of every episode (procedure, personalization, proactivity, key points)."""

    role = JUDGE_ROLE

    def solve(self, samples: pl.DataFrame, context: SolveContext) -> pl.DataFrame:
        options: EtappOptions = context.cfg.dataset
        items = build_items(samples, options, read_messages(read_trajectories(context.run_dir)))
        generator = context.generator(self.role)
        decoding = generator.role.decoding
        with context.timer.phase("generate"):
            run_judge(items, generator, decoding.max_new_tokens, options)
        results = [i.result for i in items]
        context.facts["judge_failed"] = sum(r["judge_error"] is not None for r in results)
        table = pl.DataFrame(results, schema=JUDGEMENT_SCHEMA)
        atomic_write(context.run_dir / "judgements.parquet", table.write_parquet)
        return with_judgements(samples, table)

    def skip(self, samples: pl.DataFrame, context: SolveContext) -> pl.DataFrame:
        reason = f"{NOT_JUDGED}: roles.judge.enabled=false (judge it with toolsweep-judge RUN_DIR)"
        empty = pl.DataFrame({"sample_id": samples["sample_id"]}).with_columns(
            *[pl.lit(None, dtype=t).alias(c) for c, t in JUDGEMENT_SCHEMA.items() if c != "sample_id"])
        return with_judgements(samples, empty.with_columns(pl.lit(reason).alias("judge_error")))


def with_judgements(samples: pl.DataFrame, judgements: pl.DataFrame) -> pl.DataFrame:
    """The sample table with the judge's columns (replacing earlier ones: a re-judged run)."""
    kept = samples.drop([c for c in JUDGEMENT_SCHEMA if c != "sample_id" and c in samples.columns])
    table = kept.join(judgements, on="sample_id", how="left", maintain_order="left")
    return table.with_columns(pl.col("judge_error").alias("error"))


def read_trajectories(run_dir: Path) -> pl.DataFrame:
    """The run's trajectories, or a DatasetError saying what is wrong with the file."""
    path = run_dir / TRAJECTORIES
    if not path.is_file():
        raise DatasetError(f"{path} does not exist: run the agent first (toolsweep dataset=etapp ...)")
    try:
        table = pl.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - polars raises many types for a damaged file
        raise DatasetError(f"{path} is not a readable Parquet file ({type(exc).__name__}: {str(exc)[:200]}); "
                           "delete it and rerun the run (finished turns come from the generation store)") from None
    missing = [c for c in ("sample_id", "index", "role", "content", "tool_calls") if c not in table.columns]
    if missing:
        raise DatasetError(f"{path} lacks columns {missing}: it was not written by toolsweep's ETAPP agent")
    return table


def run_judge(items: list[Item], generator: Any, max_new: int, options: EtappOptions) -> None:
    """Judge every item, retrying unparsable answers with shorter analyses; fills `item.result`."""
    chars = options.judge_analysis_chars
    max_len = generator.max_model_len or 1 << 30
    pending = items
    for attempt in range(options.judge_retries + 1):
        asked = []
        for item in pending:
            request = _request(item, attempt, chars, generator, max_len, max_new)
            if isinstance(request, str):
                item.result = _failure(item, request, attempt)
            else:
                asked.append((item, request))
        marker(f"judge attempt {attempt + 1}/{options.judge_retries + 1}: {len(asked)} cases")
        for (item, request), generation in zip(asked, generator.generate([r for _, r in asked])):
            item.result = _read(item, generation, attempt, len(request.prompt_token_ids))
        pending = [i for i, _ in asked if i.result["judge_error"] is not None]
        chars = max(chars // 2, 1)
        if not pending:
            break


def _request(item: Item, attempt: int, chars: int, generator: Any, max_len: int, max_new: int) -> Request | str:
    """The judge request, or why there is none (a JUDGE_TOO_LONG failure)."""
    rendered = generator.render([{"role": "user", "content": item.prompt}])
    if len(rendered.token_ids) + max_new > max_len:
        return (f"{JUDGE_TOO_LONG}: the judge prompt does not fit roles.judge.model's context ({max_len} tokens) "
                f"with roles.judge.decoding.max_new_tokens={max_new}")
    # Under guided decoding the longest possible answer fits max_new by construction, so none is cut.
    fitting = jt.fitting_analysis_chars(item.personal, item.proactive, max_new, chars)
    if fitting < 1:
        return (f"{JUDGE_TOO_LONG}: an answer for {len(item.personal)}+{len(item.proactive)} key points needs more "
                f"than roles.judge.decoding.max_new_tokens={max_new} tokens even with empty analyses; raise it")
    item.analysis_chars = fitting
    schema = compact_json(jt.judge_schema(item.personal, item.proactive, fitting))
    return Request(sample_id=f"judge/{item.sample_id}@{attempt}", prompt=rendered.prompt,
                   prompt_token_ids=rendered.token_ids, schema_json=schema)


def _read(item: Item, generation: Any, attempt: int, prompt_tokens: int) -> dict[str, Any]:
    base = {"sample_id": item.sample_id, "judge_attempts": attempt + 1, "judge_prompt_tokens": prompt_tokens,
            "judge_output_tokens": generation.output_tokens, "judge_analysis_chars": item.analysis_chars,
            "judge_output": generation.output}
    if generation.output is None:
        return {**_failure(item, generation.error or "the judge engine returned no output", attempt), **base}
    parsed = jt.parse_judgement(generation.output, item.personal, item.proactive)
    if isinstance(parsed, str):
        reason = f"{parsed} (finish_reason {generation.finish_reason})"
        return {**_failure(item, reason, attempt), **base}
    return {**base, "judge_procedure": parsed.procedure, "judge_personalization": parsed.personalization,
            "judge_proactivity": parsed.proactivity, "judge_keypoints": json.dumps(parsed.keypoint_scores()),
            "judge_error": None}


def _failure(item: Item, reason: str, attempt: int) -> dict[str, Any]:
    return {"sample_id": item.sample_id, "judge_procedure": None, "judge_personalization": None,
            "judge_proactivity": None, "judge_keypoints": None, "judge_error": reason, "judge_attempts": attempt + 1,
            "judge_prompt_tokens": None, "judge_output_tokens": None, "judge_analysis_chars": item.analysis_chars,
            "judge_output": None}


SOLVER = JudgeSolver()
