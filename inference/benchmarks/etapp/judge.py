"""The ETAPP judge phase: one guided-JSON judge call per case, with bounded retries.

Reads trajectories.parquet, builds each case's judge prompt (grading/etapp_judge.py: the
project's own wording, upstream's structure and key names) and its per-case JSON schema, runs
the judge model through the run's generation store (resume, cache), and writes
judgements.parquet. An answer that still does not parse after `judge.retries` retries (each
with analysis strings half as long, so a cut-off answer fits) is a failure row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from grading import etapp_judge as jt
from grading.files import atomic_write
from inference import pipeline
from .cases import Case
from .episodes import Context
from .phases import phase_facts, selected_cases, travelplanner_path
from inference.config import DecodingConfig, ToolsweepConfig
from inference.engines import Request
from inference.errors import DatasetError
from inference.runinfo import Timer
from inference.schemas import compact_json

JUDGEMENT_SCHEMA = {
    "sample_id": pl.String, "judge_procedure": pl.Int64, "judge_personalization": pl.Int64,
    "judge_proactivity": pl.Int64, "judge_keypoints": pl.String, "judge_error": pl.String,
    "judge_attempts": pl.Int64, "judge_prompt_tokens": pl.Int64, "judge_output_tokens": pl.Int64,
    "judge_output": pl.String}


@dataclass
class Item:
    """One case to judge."""

    sample_id: str
    prompt: str
    personal: list[str]
    proactive: list[str]
    result: dict[str, Any] | None = None


def judge_config(cfg: ToolsweepConfig) -> ToolsweepConfig:
    """The run config as the judge's engine sees it: the judge's model, engine and decoding."""
    judge = cfg.judge
    decoding = DecodingConfig(constraint=judge.constraint, max_new_tokens=judge.max_new_tokens, temperature=0.0,
                              compile_timeout_s=cfg.decoding.compile_timeout_s)
    return replace(cfg, model=judge.model, engine=judge.engine, decoding=decoding)


def read_messages(trajectories: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """sample_id -> its record in upstream's message format (tool_calls back as lists)."""
    messages: dict[str, list[dict[str, Any]]] = {}
    for row in trajectories.sort("sample_id", "index", maintain_order=True).iter_rows(named=True):
        message = {"role": row["role"], "content": row["content"]}
        if row["tool_calls"] is not None:
            message["tool_calls"] = json.loads(row["tool_calls"])
        messages.setdefault(row["sample_id"], []).append(message)
    return messages


def build_items(cfg: ToolsweepConfig, context: Context, cases: dict[str, Case],
                messages: dict[str, list[dict[str, Any]]], called: dict[str, list[str]]) -> list[Item]:
    items = []
    for sample_id, record in messages.items():
        setting, method, case_id = sample_id.split("/")
        case = cases[case_id]
        preferences = jt.preferences_for(list(case.available_tools), called.get(sample_id, []),
                                         context.concrete[case.user], context.domains)
        personal, proactive = jt.keypoints(case.personal, case.proactive)
        prompt = jt.judge_prompt(case.query, context.profiles[case.user], preferences,
                                 jt.render_trajectory(record, method), personal, proactive)
        items.append(Item(sample_id, prompt, personal, proactive))
    return items


def judge_phase(cfg: ToolsweepConfig, run_dir: Path) -> dict[str, Any]:
    """Judge every trajectory of the run; write judgements.parquet."""
    timer = Timer()
    trajectories = read_trajectories(run_dir)
    jcfg = judge_config(cfg)
    dtype = pipeline.resolve_dtype(jcfg)
    with timer.phase("setup"):
        cases = {c.case_id: c for c in selected_cases(cfg)}
        context = Context.load(Path(cfg.dataset.path).expanduser(), travelplanner_path(cfg))
        called = _called_tools(run_dir)
        items = build_items(cfg, context, cases, read_messages(trajectories), called)
        tokenizer = pipeline.load_tokenizer(jcfg.model.path)
        max_len = pipeline.context_length(jcfg)
    generate, stats = pipeline.store_generator(jcfg, run_dir, max_len, [i.sample_id for i in items], timer)
    with timer.phase("judge"):
        tokens = run_judge(items, generate, tokenizer, max_len, cfg.judge)
    table = pl.DataFrame([i.result for i in items], schema=JUDGEMENT_SCHEMA)
    atomic_write(run_dir / "judgements.parquet", table.write_parquet)
    facts = phase_facts("judge", timer, stats, tokens, dtype)
    facts["model"] = {"path": jcfg.model.path, "name": jcfg.model.name or Path(jcfg.model.path).name}
    return facts


def read_trajectories(run_dir: Path) -> pl.DataFrame:
    """The run's trajectories, or a DatasetError saying what is wrong with the file."""
    path = run_dir / "trajectories.parquet"
    if not path.is_file():
        raise DatasetError(f"{path} does not exist: run the agent phase first (toolsweep dataset=etapp ...)")
    try:
        table = pl.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - polars raises many types for a damaged file
        raise DatasetError(f"{path} is not a readable Parquet file ({type(exc).__name__}: {str(exc)[:200]}); "
                           "delete it and rerun the run (finished turns come from the generation store)") from None
    missing = [c for c in ("sample_id", "index", "role", "content", "tool_calls") if c not in table.columns]
    if missing:
        raise DatasetError(f"{path} lacks columns {missing}: it was not written by toolsweep's agent phase")
    return table


def _called_tools(run_dir: Path) -> dict[str, list[str]]:
    path = run_dir / "episodes.parquet"
    if not path.is_file():
        return {}
    return {sid: json.loads(tools) for sid, tools in pl.read_parquet(path).select("sample_id", "called_tools").iter_rows()}


def run_judge(items: list[Item], generate: Any, tokenizer: Any, max_len: int, judge: Any) -> dict[str, int]:
    """Judge every item, retrying unparsable answers with shorter analyses; fills `item.result`."""
    tokens = {"prompt_tokens": 0, "output_tokens": 0}
    chars = judge.analysis_chars
    pending = items
    for attempt in range(judge.retries + 1):
        asked = []
        for item in pending:
            request = _request(item, attempt, chars, tokenizer, max_len, judge.max_new_tokens)
            if request is None:
                item.result = _failure(item, f"too_long: the judge prompt does not fit judge.model's context "
                                             f"({max_len} tokens) with judge.max_new_tokens={judge.max_new_tokens}",
                                       attempt)
            else:
                asked.append((item, request))
        pipeline.marker(f"judge attempt {attempt + 1}/{judge.retries + 1}: {len(asked)} cases")
        for (item, request), generation in zip(asked, generate([r for _, r in asked])):
            tokens["prompt_tokens"] += len(request.prompt_token_ids)
            tokens["output_tokens"] += generation.output_tokens or 0
            item.result = _read(item, generation, attempt, len(request.prompt_token_ids))
        pending = [i for i, _ in asked if i.result["judge_error"] is not None]
        chars = max(chars // 2, 1)
        if not pending:
            break
    return tokens


def _request(item: Item, attempt: int, chars: int, tokenizer: Any, max_len: int, max_new: int) -> Request | None:
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": item.prompt}], tokenize=False,
                                           add_generation_prompt=True)
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    if len(ids) + max_new > max_len:
        return None
    schema = compact_json(jt.judge_schema(item.personal, item.proactive, chars))
    return Request(sample_id=f"judge/{item.sample_id}@{attempt}", prompt=prompt, prompt_token_ids=tuple(ids),
                   schema_json=schema)


def _read(item: Item, generation: Any, attempt: int, prompt_tokens: int) -> dict[str, Any]:
    base = {"sample_id": item.sample_id, "judge_attempts": attempt + 1, "judge_prompt_tokens": prompt_tokens,
            "judge_output_tokens": generation.output_tokens, "judge_output": generation.output}
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
            "judge_prompt_tokens": None, "judge_output_tokens": None, "judge_output": None}
