"""BFCL's multi-turn loop (`inference_multi_turn_prompting` in BFCL's base_handler.py), batched.

Each case runs its user turns in order. A turn appends the turn's messages (a held-out turn of
`miss_func` instead announces its functions with BFCL's message), then the model steps: each step
is one generation; a step that fails to decode or decodes to no call ends the turn; otherwise its
calls run on the case's instances of BFCL's classes (grading/scorers/bfcl/execution.py: parsed
calls dispatched to public methods only, never `eval`) and every result is fed back as a `tool`
message named by the call. A turn's 21st call step (BFCL's `count > MAXIMUM_STEP_LIMIT`) force-
quits the case: its remaining turns never run. Every live case's next step is one request of a
batched generate on one engine, so many cases' steps share the engine.

Prompt mode (BFCL's system prompt with the function docs, Python call syntax) and native calls
(the Hermes family, as BFCL's `QwenFCHandler` runs them: functions as the chat template's tools,
`<tool_call>` blocks read, the assistant message kept as its calls). Under a constraint every
step is held to the call-list grammar over the functions offered so far (held-out ones added at
their turn), or `[]`, the answer that ends a turn.

The sample's `output` is every step's raw text per turn (`[[step, ...], ...]`, BFCL's
model_result_list), which the scorer decodes and executes again as BFCL's evaluation does; its
`trace` holds, per turn, the query and every step's text, calls and results (cases.html).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import polars as pl

from grading.scorers.bfcl.decoding import after_thinking, hermes_blocks
from grading.scorers.bfcl.execution import CaseEnvironment, Undecodable, is_empty
from grading.scorers.bfcl.multi_turn import MAX_STEPS, MULTI_TURN, is_long_context, reader
from inference.engines import Generation, Request, prompt_tokens
from inference.failures import ENGINE_ERROR, TOO_LONG

from .grammar import call_grammar
from .texts import PromptTexts

FINISHED, FORCE_QUIT = "finished", "force_quit"
NATIVE_FAMILY = "hermes"
"""The native call family the loop reads (BFCL's Hermes-style handler)."""
MAX_STEP_CALLS = 40
"""The most calls one constrained step may hold (the largest ground-truth turn has 34)."""
TRACE_CHARS = 4000
"""A result longer than this is shortened in the trace (the chat and the grading keep it whole)."""


@dataclass
class Case:
    """One multi-turn sample as the loop needs it."""

    sample_id: str
    case_id: str
    category: str
    turns: list[list[dict[str, Any]]]
    initial_config: dict[str, Any]
    involved: list[str]
    functions: list[dict[str, Any]]
    held_out: dict[str, list[dict[str, Any]]]
    system: Optional[str]
    sample_index: int = 0


@dataclass
class Episode:
    case: Case
    environment: CaseEnvironment
    chat: list[dict[str, Any]]
    tools: Optional[list[dict[str, Any]]]
    offered: list[dict[str, Any]]
    """The functions the model has been shown so far (the constraint's functions)."""
    constraint: tuple[Optional[str], Optional[str]] = (None, None)
    """(Lark grammar, native call schema) of every step until more functions are offered: built
    when the offer changes, not per step."""
    turn: int = 0
    steps_in_turn: int = 0
    model_calls: int = 0
    outputs: list[list[str]] = field(default_factory=list)
    trace: list[dict[str, Any]] = field(default_factory=list)
    end: Optional[str] = None
    failure: Optional[str] = None
    error: Optional[str] = None
    prompt_tokens: int = 0
    output_tokens: int = 0

    @property
    def live(self) -> bool:
        return self.end is None


@dataclass(frozen=True)
class Loop:
    """How steps are asked for and read."""

    native: bool
    texts: PromptTexts
    constrained: bool
    max_new_tokens: int
    max_model_len: int


def cases_of(samples: pl.DataFrame) -> list[Case]:
    """The multi-turn cases of a sample table (rows of the four categories), in table order."""
    index = samples["sample_index"] if "sample_index" in samples.columns else pl.repeat(0, samples.height, eager=True)
    rows = samples.with_columns(index.alias("sample_index")).iter_rows(named=True)
    return [Case(r["sample_id"], r["bfcl_id"], r["setting"], json.loads(r["turns"]), json.loads(r["initial_config"]),
                 json.loads(r["involved_classes"]), json.loads(r["functions"]), json.loads(r["held_out"]),
                 r["system"], r["sample_index"]) for r in rows if r["setting"] in MULTI_TURN]


def start(case: Case, classes: dict[str, type], loop: Loop) -> Episode:
    """A case before its first turn: its instances built as BFCL builds them."""
    environment = CaseEnvironment(classes, case.initial_config, case.involved, is_long_context(case.category),
                                  f"toolsweep_{case.case_id}")
    chat = [] if loop.native else [{"role": "system", "content": case.system}]
    tools = loop.texts.functions_with_hint(case.functions) if loop.native else None
    episode = Episode(case, environment, chat, tools, list(case.functions))
    episode.constraint = step_constraint(episode.offered, loop)
    _begin_turn(episode, loop)
    return episode


def step_constraint(functions: list[dict[str, Any]], loop: Loop) -> tuple[Optional[str], Optional[str]]:
    """A step's constraint over the offered functions: the call-list grammar (or `[]`) in prompt
    mode; natively an offered function's name and an arguments object (the family's wrapper, up to
    MAX_STEP_CALLS calls, or plain text that ends the turn); none when decoding freely."""
    if not loop.constrained:
        return None, None
    if loop.native:
        from inference.schemas import named_call_schema

        return None, named_call_schema([f["name"] for f in functions])
    return call_grammar(functions, MAX_STEP_CALLS), None


def _begin_turn(episode: Episode, loop: Loop) -> None:
    case, turn = episode.case, episode.turn
    messages = [dict(m) for m in case.turns[turn]]
    held = case.held_out.get(str(turn))
    if held is not None:
        messages = [{"role": "user", "content": loop.texts.held_out(held)}]
        episode.offered += held
        episode.constraint = step_constraint(episode.offered, loop)
    if turn == 0 and messages and messages[0]["role"] == "system" and episode.chat:
        episode.chat[0]["content"] += "\n\n" + messages.pop(0)["content"]  # BFCL's prompt, then the case's own
    episode.chat += messages
    episode.outputs.append([])
    episode.trace.append({"query": messages, "steps": []})
    episode.steps_in_turn = 0


def run(episodes: list[Episode], generate: Callable[[list[Request]], list[Generation]], render: Callable[..., Any],
        loop: Loop, progress: Callable[[str], None] = lambda message: None) -> None:
    """Every episode to its end: one batched generate per round over the live episodes."""
    round_ = 0
    while True:
        live = [e for e in episodes if e.live]
        if not live:
            return
        progress(f"multi-turn step {round_}: {len(live)} live cases")
        asked = [(e, r) for e in live if (r := _request(e, render, loop)) is not None]
        for (episode, request), generation in zip(asked, generate([r for _, r in asked])):
            absorb(episode, generation, prompt_tokens(request, generation), loop)
        round_ += 1


def _request(episode: Episode, render: Callable[..., Any], loop: Loop) -> Optional[Request]:
    rendered = render(episode.chat, episode.tools)
    if len(rendered.token_ids) + loop.max_new_tokens > loop.max_model_len:
        episode.end, episode.failure = TOO_LONG, TOO_LONG  # BFCL's request fails: the entry is an error
        episode.error = f"the prompt ({len(rendered.token_ids)} tokens) leaves no room for {loop.max_new_tokens} new tokens"
        return None
    grammar, schema = episode.constraint
    return Request(sample_id=f"{episode.case.sample_id}@{episode.model_calls}", prompt=rendered.prompt,
                   prompt_token_ids=rendered.token_ids, schema_json=schema, grammar=grammar,
                   call_format=NATIVE_FAMILY if schema else None, max_calls=MAX_STEP_CALLS,
                   calls_optional=schema is not None, sample_index=episode.case.sample_index,
                   chat_json=rendered.chat_json)


def absorb(episode: Episode, generation: Generation, prompt_count: int, loop: Loop) -> None:
    """One step: record the text, end the turn or run its calls (BFCL's loop body)."""
    episode.model_calls += 1
    episode.prompt_tokens += prompt_count
    episode.output_tokens += generation.output_tokens or 0
    if generation.finish_reason == "error" or generation.output is None:
        episode.end, episode.failure = ENGINE_ERROR, ENGINE_ERROR
        episode.error = generation.error or "the engine returned no output"
        return
    text = generation.output
    episode.outputs[-1].append(text)
    step: dict[str, Any] = {"text": text, "finish_reason": generation.finish_reason}
    episode.trace[-1]["steps"].append(step)
    episode.chat.append(_assistant(text, loop.native))
    try:
        calls = reader(loop.native)(text)
    except Undecodable as exc:
        step["ends_turn"] = f"does not decode ({exc})"
        _next_turn(episode, loop)
        return
    if is_empty(calls):
        step["ends_turn"] = "no call"
        _next_turn(episode, loop)
        return
    results = episode.environment.run(calls)
    step["calls"], step["results"] = calls, [_short(r) for r in results]
    for call, result in zip(calls, results):
        episode.chat.append({"role": "tool", "name": call, "content": result})
    episode.steps_in_turn += 1
    if episode.steps_in_turn > MAX_STEPS:
        step["ends_turn"] = f"force quit: more than {MAX_STEPS} call steps in one turn"
        episode.end = FORCE_QUIT


def _assistant(text: str, native: bool) -> dict[str, Any]:
    """The assistant message the next prompt shows: the text (prompt mode); the calls alone, or
    the text after any `</think>` when it holds none (native, as BFCL's Hermes handler keeps it)."""
    if not native:
        return {"role": "assistant", "content": text}
    cleaned = after_thinking(text)
    calls = [block for block in hermes_blocks(cleaned) if isinstance(block, dict)]
    if not calls:
        return {"role": "assistant", "content": cleaned}
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": c.get("name"), "arguments": c.get("arguments")}}
                           for c in calls]}


def _next_turn(episode: Episode, loop: Loop) -> None:
    episode.turn += 1
    if episode.turn >= len(episode.case.turns):
        episode.end = FINISHED
        return
    _begin_turn(episode, loop)


def _short(text: str) -> str:
    return text if len(text) <= TRACE_CHARS else text[:TRACE_CHARS] + f"... ({len(text)} characters)"


EPISODE_SCHEMA = {"sample_id": pl.String, "sample_index": pl.Int64, "output": pl.String, "trace": pl.String, "end_reason": pl.String,
                  "model_calls": pl.Int64, "turns_run": pl.Int64, "failure": pl.String, "error": pl.String,
                  "prompt_tokens": pl.Int64, "output_tokens": pl.Int64}


def episode_table(episodes: list[Episode]) -> pl.DataFrame:
    """One row per case: the steps' texts per turn (`output`: None where the run failed, as BFCL
    records an error instead of a result list), the trace and how the case ended."""
    return pl.DataFrame([{
        "sample_id": e.case.sample_id, "sample_index": e.case.sample_index, "output": None if e.failure else json.dumps(e.outputs, ensure_ascii=False),
        "trace": json.dumps(e.trace, ensure_ascii=False), "end_reason": e.end, "model_calls": e.model_calls,
        "turns_run": len(e.outputs), "failure": e.failure, "error": e.error, "prompt_tokens": e.prompt_tokens,
        "output_tokens": e.output_tokens} for e in episodes], schema=EPISODE_SCHEMA)
