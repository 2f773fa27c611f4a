"""ETAPP agent episodes: every turn one batched generate over all live episodes, then tools run.

An episode is one sample (a case under one setting and method) with its own sandbox. It keeps
two message lists: `chat`, what the model sees (rendered with its chat template), and `record`,
the trajectory in upstream's saved format (what the judge reads and trajectories.parquet holds).
Episodes end with a recorded reason, never an exception: finish, turn_cap, too_many_calls,
too_long (the prompt no longer fits), token_budget (over max_tokens_per_call), engine_error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from . import agent_text as text
from .cases import Case
from .fc_reading import Reader, read_hermes
from .prompt_files import Reminders
from inference.engines import Generation, Request, prompt_tokens
from inference.failures import ENGINE_ERROR, TOO_LONG
from inference.generation import Rendered

FINISH, TURN_CAP, TOO_MANY_CALLS = "finish", "turn_cap", "too_many_calls"
TOKEN_BUDGET = "token_budget"
PLAN_TURN = 0
"""E-ReAct's planning call: turn 0, not counted against the turn cap (as upstream)."""


@dataclass
class Episode:
    sample_id: str
    case: Case
    setting: str
    method: str
    sandbox: Any
    chat: list[dict[str, Any]]
    tools: Optional[list[dict[str, Any]]]
    """fc: the schemas given to the chat template; None for ReAct (they are in the prompt)."""
    sample_index: int = 0
    """Which of the case's `decoding.samples` episodes this is (its generations' seeds)."""
    record: list[dict[str, Any]] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    """trajectories.parquet rows, one per record message."""
    turn: int = 0
    calls: int = 0
    valid_calls: int = 0
    tool_errors: int = 0
    nudges: int = 0
    called: list[str] = field(default_factory=list)
    end_reason: Optional[str] = None
    answer: Optional[str] = None
    planned: bool = False
    prompt_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    """Every generation asked for, E-ReAct's plan included (`turn` leaves the plan out, as upstream's cap does)."""
    reminders: Reminders = text.REMINDERS
    """The reminders this episode's texts send after a malformed step (texts.py)."""
    execute_turn: Optional[str] = None
    """E-ReAct: the user turn after the plan."""

    @property
    def live(self) -> bool:
        return self.end_reason is None

    def add(self, message: dict[str, Any], **row: Any) -> None:
        """Append a message to the record, and its trajectories row."""
        self.record.append(message)
        calls = message.get("tool_calls")
        self.rows.append({"sample_id": self.sample_id, "case_id": self.case.case_id, "setting": self.setting,
                          "method": self.method, "index": len(self.record) - 1, "turn": self.turn,
                          "role": message["role"], "content": message["content"],
                          "tool_calls": None if calls is None else json.dumps(calls, ensure_ascii=False),
                          "tool_name": None, "arguments": None, "observation": None, "tool_error": None,
                          "finish_reason": None, "prompt_tokens": None, "output_tokens": None, **row})

    def end(self, reason: str, message: Optional[str] = None) -> None:
        if message is not None:
            self.add({"role": "assistant", "content": message, "tool_calls": []})
        self.end_reason = reason


Render = Callable[[list[dict[str, Any]], Optional[list[dict[str, Any]]]], Rendered]
"""(chat messages, tools or None) -> the prompt as the model's chat template renders it."""


@dataclass(frozen=True)
class Limits:
    max_turns: int
    max_new_tokens: int
    max_model_len: int
    max_calls_per_response: int
    max_calls_per_case: int
    max_tokens_per_call: int

@dataclass(frozen=True)
class Grammar:
    """How a turn is decoded and read: the constraint (none, or the FC call / ReAct step
    grammar) and the FC reader of the model's family."""

    constrained: bool
    fc_schema: Optional[str] = None
    react_regex: Optional[str] = None
    call_format: str = "hermes"
    """The family whose call wrapper a constrained FC turn's grammar adds."""
    read_fc: Reader = read_hermes
    reasoning: bool = False
    """dataset.reasoning: a ReAct step loses its `<think>` blocks before it is read (agent_text.step_text)."""


def run_turns(episodes: list[Episode], generate: Callable[[list[Request]], list[Generation]],
              render: Render, limits: Limits, grammar: Grammar,
              progress: Callable[[str], None] = lambda message: None) -> None:
    """Drive the episodes to their end: E-ReAct plans first, then one batched generate per turn."""
    planning = [e for e in episodes if e.live and e.method == "e_react" and not e.planned]
    if planning:
        progress(f"agent turn {PLAN_TURN} (e_react plan): {len(planning)} episodes")
        _step(planning, generate, render, limits, grammar)
    for turn in range(1, limits.max_turns + 1):
        live = [e for e in episodes if e.live]
        if not live:
            return
        for episode in live:
            episode.turn = turn
        progress(f"agent turn {turn}/{limits.max_turns}: {len(live)} live episodes")
        _step(live, generate, render, limits, grammar)
    for episode in episodes:  # a nudge on the last turn leaves nothing to answer it
        if episode.live:
            episode.end(TURN_CAP, text.ABORT_TURNS)


def _step(episodes: list[Episode], generate: Callable[[list[Request]], list[Generation]], render: Render,
          limits: Limits, grammar: Grammar) -> None:
    asked = []
    for episode in episodes:
        request = _request(episode, render, limits, grammar)
        if request is not None:
            asked.append((episode, request))
    for (episode, request), generation in zip(asked, generate([r for _, r in asked])):
        absorb(episode, generation, prompt_tokens(request, generation), limits, grammar.read_fc, grammar.reasoning)


def _request(episode: Episode, render: Render, limits: Limits, grammar: Grammar) -> Optional[Request]:
    """The episode's next request, or None after ending it because its prompt no longer fits."""
    rendered = render(episode.chat, episode.tools)
    if len(rendered.token_ids) + limits.max_new_tokens > limits.max_model_len:
        episode.turn = max(episode.turn - 1, 0)  # this turn made no model call: `turns` counts calls
        episode.end(TOO_LONG, text.ABORT_TOKENS)
        return None
    planning = episode.method == "e_react" and not episode.planned
    schema = regex = None
    if grammar.constrained and not planning:
        if episode.method == "fc":
            schema = grammar.fc_schema
        else:
            regex = grammar.react_regex
    # named by the episode's model call from 0 (E-ReAct's plan is call 0), as engine=script counts them
    return Request(sample_id=f"{episode.sample_id}@{episode.model_calls}", prompt=rendered.prompt,
                   prompt_token_ids=rendered.token_ids, schema_json=schema,
                   call_format=grammar.call_format if schema else None, max_calls=limits.max_calls_per_response,
                   calls_optional=schema is not None, regex=regex, sample_index=episode.sample_index,
                   chat_json=rendered.chat_json)


def absorb(episode: Episode, generation: Generation, prompt_tokens: int, limits: Limits,
           read_fc: Reader = read_hermes, reasoning: bool = False) -> None:
    """Act on one generation: record it, run its calls, nudge, or end the episode. Upstream
    checks the call limits, then the token budget, before it records the response: a response
    over either is not recorded, only the abort. The text read, and kept in the chat, is the
    output as upstream's loop takes it (`reasoning`: dataset.reasoning, agent_text.step_text)."""
    episode.prompt_tokens += prompt_tokens
    episode.output_tokens += generation.output_tokens or 0
    episode.model_calls += 1
    if generation.finish_reason == "error" or generation.output is None:
        episode.end(ENGINE_ERROR, generation.error or "the engine returned no output")
        return
    usage = {"finish_reason": generation.finish_reason, "prompt_tokens": prompt_tokens,
             "output_tokens": generation.output_tokens}
    output = text.step_text(generation.output, episode.method, reasoning)
    if episode.method == "e_react" and not episode.planned:
        if not _over_token_budget(episode, generation, prompt_tokens, limits):
            _plan(episode, output, usage)
    elif episode.method == "fc":
        reading = read_fc(output)
        if not _over_limits(episode, len(reading[1] or []), generation, prompt_tokens, limits):
            _fc(episode, output, reading, usage, limits)
    else:
        step = text.parse_react(output)
        calling = bool(step.action) and not step.finishes
        if not _over_limits(episode, int(calling), generation, prompt_tokens, limits):
            _react(episode, output, step, usage, limits)


def _over_limits(episode: Episode, calls: int, generation: Generation, prompt_tokens: int, limits: Limits) -> bool:
    return _over_call_limits(episode, calls, limits) or _over_token_budget(episode, generation, prompt_tokens, limits)


def _over_token_budget(episode: Episode, generation: Generation, prompt_tokens: int, limits: Limits) -> bool:
    if prompt_tokens + (generation.output_tokens or 0) > limits.max_tokens_per_call:
        episode.end(TOKEN_BUDGET, text.ABORT_TOKENS)  # upstream checks after generating, and discards it
        return True
    return False


def _plan(episode: Episode, output: str, usage: dict[str, Any]) -> None:
    execute = episode.execute_turn if episode.execute_turn is not None else text.e_react_execute_turn(episode.setting)
    episode.add({"role": "assistant", "content": output, "tool_calls": []}, **usage)
    episode.add({"role": "user", "content": execute})
    episode.chat += [{"role": "assistant", "content": output}, {"role": "user", "content": execute}]
    episode.planned = True


def _fc(episode: Episode, output: str, reading: tuple[str, Optional[list[dict[str, Any]]]], usage: dict[str, Any],
        limits: Limits) -> None:
    content, calls = reading
    if calls is None:
        episode.add({"role": "assistant", "content": content, "tool_calls": []}, **usage)
        _nudge(episode, output, episode.reminders.fc_format)
        return
    if not calls:
        episode.add({"role": "assistant", "content": "", "tool_calls": [{"name": "finish", "arguments": content}]},
                    **usage)
        _finish(episode, content, limits)
        return
    recorded = [{"name": c["name"], "arguments": text.shown_arguments(c["arguments"])} for c in calls]
    episode.add({"role": "assistant", "content": content, "tool_calls": recorded}, **usage)
    episode.chat.append({"role": "assistant", "content": output})
    if _at_cap(episode, limits):
        return
    for call in calls:
        arguments = text.call_arguments(call["arguments"])
        if arguments is None:  # this call is answered with the format message; the others run
            episode.add({"role": "tool", "content": episode.reminders.fc_bad_arguments})
            episode.chat.append({"role": "tool", "content": episode.reminders.fc_bad_arguments})
            continue
        _execute(episode, call["name"], arguments, text.shown_arguments(call["arguments"]), chat_role="tool")


def _react(episode: Episode, output: str, step: text.Step, usage: dict[str, Any], limits: Limits) -> None:
    # Upstream records every step as its parser read it: the thought, and one call (name "" when
    # no action was read), so the judge never reads a step without an action as a reply.
    episode.add({"role": "assistant", "content": step.thought,
                 "tool_calls": [{"name": step.action, "arguments": step.action_input}]}, **usage)
    if step.finishes:
        _finish(episode, step.action_input, limits)
        return
    if _at_cap(episode, limits):  # upstream's last ReAct turn: the step is recorded, nothing else
        return
    if not step.action:
        _nudge(episode, output, episode.reminders.no_action)
        return
    arguments = text.parse_arguments(step.action_input)
    if arguments is None:
        episode.calls += 1
        reminders = episode.reminders
        nudge = reminders.bad_input_e_react if episode.method == "e_react" else reminders.bad_input_react
        _nudge(episode, output, nudge)
        return
    episode.chat.append({"role": "assistant", "content": output})
    _execute(episode, step.action, arguments, step.action_input, chat_role="user")


def _finish(episode: Episode, answer: str, limits: Limits) -> None:
    """A final answer ends the case; on the last turn upstream still appends its turn-cap abort
    (its loop checks the cap after reading the answer), so the case ends at the cap."""
    episode.answer = answer
    if episode.turn >= limits.max_turns:
        episode.end(TURN_CAP, text.ABORT_TURNS)
    else:
        episode.end_reason = FINISH


def _over_call_limits(episode: Episode, count: int, limits: Limits) -> bool:
    if count and count > limits.max_calls_per_response or episode.calls + count > limits.max_calls_per_case:
        episode.end(TOO_MANY_CALLS, text.ABORT_CALLS)
        return True
    return False


def _at_cap(episode: Episode, limits: Limits) -> bool:
    """The last turn's calls are recorded, not run (upstream)."""
    if episode.turn >= limits.max_turns:
        episode.end(TURN_CAP, text.ABORT_TURNS)
        return True
    return False


def _nudge(episode: Episode, output: str, nudge: str) -> None:
    episode.nudges += 1
    episode.add({"role": "user", "content": nudge})
    episode.chat += [{"role": "assistant", "content": output}, {"role": "user", "content": nudge}]


def _execute(episode: Episode, name: str, arguments: Any, shown: str, chat_role: str) -> None:
    observation = episode.sandbox.call(name, arguments, e_react=episode.method == "e_react")
    episode.calls += 1
    episode.valid_calls += not (observation.error and observation.text.startswith("invalid tool name"))
    episode.tool_errors += observation.error
    episode.called.append(name)
    episode.add({"role": "tool", "content": observation.text}, tool_name=name, arguments=shown,
                observation=observation.text, tool_error=observation.error)
    episode.chat.append({"role": chat_role, "content": observation.text})
