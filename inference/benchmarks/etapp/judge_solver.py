"""ETAPP's judge solver: one judge call per case through the `judge` role, with bounded retries.

Reads RUN_DIR/trajectories.parquet (the agent solver's), builds each case's judge prompt
(upstream's template from the ETAPP copy, filled as upstream's evaluator fills it,
grading/scorers/etapp_judge/upstream.py; or the project's own wording, rubric.py beside it), runs
the judge through the run's generation store (resume, cache), and adds the judge's columns to the
sample table (also written as judgements.parquet, with the messages the judge read).

Two protocols, by `roles.judge.decoding.constraint`:
- `none` (the default): upstream's. The judge decodes freely and its answer is read as upstream's
  evaluator reads it (upstream.read_upstream_answer). At temperature 0 a retry would repeat
  the answer, so an unreadable one is recorded at once; above it, each retry draws again.
- a grammar backend: the guided JSON answer, for small local judges (below).

Under guided decoding no answer is cut by its token budget: each case's analysis cap is lowered
until the schema's longest answer fits roles.judge.decoding.max_new_tokens
(`rubric.fitting_analysis_chars`), and recorded as `judge_analysis_chars`. An answer that
still does not parse after `dataset.judge_retries` retries (each with analysis strings half as
long) is a failure row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from grading.scorers.etapp_judge import rubric as jt, upstream
from grading.files import atomic_write
from grading.views import JUDGE_ANSWERS, JUDGE_FAILED, JUDGE_STATUS, JUDGE_TOO_LONG, JUDGED, NOT_JUDGED, SideTable
from grading.scorers.etapp_judge import ENGINE_ERROR, NOT_JUDGED_TEXT, TOO_LONG_TEXT
from inference.console import marker
from inference.engines import Request, prompt_tokens
from inference.errors import DatasetError
from inference.schemas import compact_json
from inference.solvers import SolveContext
from .agent_solver import TRAJECTORIES, prompt_source, sample_cases, travelplanner_path
from .cases import Case
from .episodes import Context
from .options import EtappOptions

JUDGE_ROLE = "judge"
JUDGEMENT_SCHEMA = {
    "sample_id": pl.String, "judge_procedure": pl.Int64, "judge_personalization": pl.Int64,
    "judge_proactivity": pl.Int64, "judge_keypoints": pl.String, "judge_error": pl.String,
    "judge_attempts": pl.Int64, "judge_prompt_tokens": pl.Int64, "judge_output_tokens": pl.Int64,
    "judge_analysis_chars": pl.Int64, "judge_output": pl.String, "judge_messages": pl.String,
    JUDGE_STATUS: pl.String}
"""The judge's columns; `judge_status` is one of grading.views.JUDGE_STATUSES (the error text says why)."""
JUDGEMENTS = SideTable("judgements.parquet", JUDGE_ANSWERS, schema=JUDGEMENT_SCHEMA,
                       description="the judge's answer, scores and the messages it read, per case")
GUIDED, UPSTREAM = "guided", "upstream"
PROTOCOL_LINES = {UPSTREAM: "upstream's: free decoding, the answer read as upstream's evaluator reads it",
                  GUIDED: "guided JSON (roles.judge.decoding.constraint), not upstream's free answer"}


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

    @property
    def messages(self) -> list[dict[str, str]]:
        """What the judge reads: one user message (upstream's evaluator sends no system turn)."""
        return [{"role": "user", "content": self.prompt}]


def read_messages(trajectories: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """sample_id -> its record in upstream's message format (tool_calls back as lists)."""
    messages: dict[str, list[dict[str, Any]]] = {}
    for row in trajectories.sort("sample_id", "index", maintain_order=True).iter_rows(named=True):
        message = {"role": row["role"], "content": row["content"]}
        if row["tool_calls"] is not None:
            message["tool_calls"] = json.loads(row["tool_calls"])
        messages.setdefault(row["sample_id"], []).append(message)
    return messages


def build_items(samples: pl.DataFrame, options: EtappOptions, messages: dict[str, list[dict[str, Any]]],
                shown: bool = False) -> list["Item"]:
    """One judge item per sample with a trajectory, in sample order. An episode ended by an engine
    error says nothing about the model: its item is not judged, its result saying why (the scorer
    leaves such episodes out of every judge metric)."""
    world = Context.load(Path(options.path).expanduser(), travelplanner_path(options),
                         prompt_source(options, shown))
    ended = (set(samples.filter(pl.col("end_reason") == ENGINE_ERROR)["sample_id"])
             if "end_reason" in samples.columns else set())
    items = []
    for slot in sample_cases(samples, options):
        if slot.sample_id in ended:
            items.append(Item(slot.sample_id, "", [], [], result=_not_judged(slot.sample_id)))
        elif slot.sample_id in messages:
            record = messages[slot.sample_id]
            items.append(_item(slot.sample_id, slot.method, slot.case, world, record, named_tools(record)))
    return items


def _not_judged(sample_id: str) -> dict[str, Any]:
    reason = f"{NOT_JUDGED_TEXT}: the agent's episode ended by an engine error (its record says nothing about the model)"
    return {**{c: None for c in JUDGEMENT_SCHEMA}, "sample_id": sample_id, "judge_error": reason, "judge_attempts": 0,
            JUDGE_STATUS: NOT_JUDGED}


def named_tools(record: list[dict[str, Any]]) -> list[str]:
    """Every tool the agent named in a call, run or not (upstream's judge takes the preference
    domains of every named call), in order; the finish call and empty names are no tool."""
    return [c["name"] for m in record for c in (m.get("tool_calls") or [])
            if isinstance(c, dict) and isinstance(c.get("name"), str) and c["name"] not in ("", "finish")]


def _item(sample_id: str, method: str, case: Case, world: Context, record: list[dict[str, Any]],
          called: list[str]) -> "Item":
    preferences = jt.preferences_for(list(case.available_tools), called, world.concrete[case.user], world.domains)
    personal, proactive = jt.keypoints(case.personal, case.proactive)
    trajectory, profile = jt.render_trajectory(record, method), world.profiles[case.user]
    if world.upstream is None:
        prompt = jt.judge_prompt(case.query, profile, preferences, trajectory, personal, proactive)
    else:
        skeleton = upstream.upstream_skeleton(personal, proactive, world.upstream.judge_hints)
        prompt = upstream.upstream_judge_prompt(world.upstream.judge_template, skeleton, case.query, profile, preferences,
                                          trajectory, list(case.personal), list(case.proactive))
    return Item(sample_id, prompt, personal, proactive)


class JudgeSolver:
    """The judge's scores of every episode (procedure, personalization, proactivity, key points)."""

    role = JUDGE_ROLE
    side_tables = (JUDGEMENTS,)

    def solve(self, samples: pl.DataFrame, context: SolveContext) -> pl.DataFrame:
        options: EtappOptions = context.cfg.dataset
        items = build_items(samples, options, read_messages(read_trajectories(context.run_dir)), shown=True)
        generator = context.generator(self.role)
        decoding = generator.role.decoding
        with context.timer.phase("generate"):
            run_judge(items, generator, decoding.max_new_tokens, options)
        results = [i.result for i in items]
        context.facts["judge_failed"] = sum(r[JUDGE_STATUS] in (JUDGE_FAILED, JUDGE_TOO_LONG) for r in results)
        context.facts["judge_protocol"] = protocol(decoding)
        context.facts["report_facts"] = {"judge protocol": PROTOCOL_LINES[protocol(decoding)]}
        table = pl.DataFrame(results, schema=JUDGEMENT_SCHEMA)
        atomic_write(context.run_dir / JUDGEMENTS.name, table.write_parquet)
        return with_judgements(samples, table)

    def skip(self, samples: pl.DataFrame, context: SolveContext) -> pl.DataFrame:
        reason = f"{NOT_JUDGED_TEXT}: roles.judge.enabled=false (judge it with toolsweep judge RUN_DIR)"
        empty = pl.DataFrame({"sample_id": samples["sample_id"]}).with_columns(
            *[pl.lit(None, dtype=t).alias(c) for c, t in JUDGEMENT_SCHEMA.items() if c != "sample_id"])
        return with_judgements(samples, empty.with_columns(pl.lit(reason).alias("judge_error"),
                                                           pl.lit(NOT_JUDGED).alias(JUDGE_STATUS)))


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


def protocol(decoding: Any) -> str:
    """upstream: free decoding, upstream's reader; guided: the guided JSON answer."""
    return UPSTREAM if decoding.constraint == "none" else GUIDED


def run_judge(items: list[Item], generator: Any, max_new: int, options: EtappOptions) -> None:
    """Judge every item, retrying unreadable answers; fills `item.result`. Guided retries ask
    for shorter analyses; free ones draw again, so at temperature 0 there is none to make."""
    decoding = generator.role.decoding
    guided = protocol(decoding) == GUIDED
    retries = options.judge_retries if guided or decoding.temperature > 0 else 0
    chars = options.judge_analysis_chars
    max_len = generator.max_model_len or 1 << 30
    pending = [i for i in items if i.result is None]  # build_items settled the episodes it does not judge
    for attempt in range(retries + 1):
        asked = []
        for item in pending:
            request = _request(item, attempt, chars if guided else None, generator, max_len, max_new)
            if isinstance(request, str):
                item.result = _failure(item, request, attempt, JUDGE_TOO_LONG)
            else:
                asked.append((item, request))
        marker(f"judge attempt {attempt + 1}/{retries + 1}: {len(asked)} cases")
        for (item, request), generation in zip(asked, generator.generate([r for _, r in asked])):
            item.result = _read(item, generation, attempt, prompt_tokens(request, generation), guided)
        pending = [i for i, _ in asked if i.result["judge_error"] is not None]
        chars = max(chars // 2, 1)
        if not pending:
            break


def _request(item: Item, attempt: int, chars: int | None, generator: Any, max_len: int, max_new: int) -> Request | str:
    """The judge request (guided when `chars` caps the analyses), or why there is none (a
    too-long failure)."""
    rendered = generator.render(item.messages)
    if len(rendered.token_ids) + max_new > max_len:
        return (f"{TOO_LONG_TEXT}: the judge prompt does not fit roles.judge.model's context ({max_len} tokens) "
                f"with roles.judge.decoding.max_new_tokens={max_new}")
    if chars is None:
        return Request(sample_id=f"judge/{item.sample_id}@{attempt}", prompt=rendered.prompt,
                       prompt_token_ids=rendered.token_ids, schema_json=None, sample_index=attempt,
                       chat_json=rendered.chat_json)
    # Under guided decoding the longest possible answer fits max_new by construction, so none is cut.
    fitting = jt.fitting_analysis_chars(item.personal, item.proactive, max_new, chars)
    if fitting < 1:
        return (f"{TOO_LONG_TEXT}: an answer for {len(item.personal)}+{len(item.proactive)} key points needs more "
                f"than roles.judge.decoding.max_new_tokens={max_new} tokens even with empty analyses; raise it")
    item.analysis_chars = fitting
    schema = compact_json(jt.judge_schema(item.personal, item.proactive, fitting))
    return Request(sample_id=f"judge/{item.sample_id}@{attempt}", prompt=rendered.prompt,
                   prompt_token_ids=rendered.token_ids, schema_json=schema, chat_json=rendered.chat_json)


def _read(item: Item, generation: Any, attempt: int, prompt_tokens: int, guided: bool) -> dict[str, Any]:
    base = {"sample_id": item.sample_id, "judge_attempts": attempt + 1, "judge_prompt_tokens": prompt_tokens,
            "judge_output_tokens": generation.output_tokens, "judge_analysis_chars": item.analysis_chars,
            "judge_output": generation.output, "judge_messages": json.dumps(item.messages, ensure_ascii=False)}
    if generation.output is None:
        return {**_failure(item, generation.error or "the judge engine returned no output", attempt), **base}
    read = jt.parse_judgement if guided else upstream.read_upstream_answer
    parsed = read(generation.output, item.personal, item.proactive)
    if isinstance(parsed, str):
        reason = f"{parsed} (finish_reason {generation.finish_reason})"
        return {**_failure(item, reason, attempt), **base}
    return {**base, "judge_procedure": parsed.procedure, "judge_personalization": parsed.personalization,
            "judge_proactivity": parsed.proactivity, "judge_keypoints": json.dumps(parsed.keypoint_scores()),
            "judge_error": None, JUDGE_STATUS: JUDGED}


def _failure(item: Item, reason: str, attempt: int, status: str = JUDGE_FAILED) -> dict[str, Any]:
    return {"sample_id": item.sample_id, "judge_procedure": None, "judge_personalization": None,
            "judge_proactivity": None, "judge_keypoints": None, "judge_error": reason, "judge_attempts": attempt + 1,
            "judge_prompt_tokens": None, "judge_output_tokens": None, "judge_analysis_chars": item.analysis_chars,
            "judge_output": None, "judge_messages": json.dumps(item.messages, ensure_ascii=False), JUDGE_STATUS: status}


SOLVER = JudgeSolver()
