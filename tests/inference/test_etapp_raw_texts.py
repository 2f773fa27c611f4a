"""Raw agent texts (engine=script `text` rows, read exactly as a model's output would be) through
the CLI: for each, what upstream ETAPP's loop does with it (run which tool with which arguments,
send which reminder, or finish) and how it records the step, checked against toolsweep's run.

One run holds every text, each the first turn of its own case (John_Doe's instructions, in the
tool-given setting); the script's next turn, absent, is an empty final answer."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from inference.benchmarks.etapp import agent_text as at
from tests.inference.test_etapp_run import toolsweep

pytestmark = pytest.mark.shared_data
ALARMS = "view_today_alarms"
WEATHER = "get_today_weather"
# (method, raw text, upstream's outcome, reason). Outcomes: ("run", tool, arguments as recorded),
# ("remind", the reminder sent as a user turn), ("reply", a tool-role message instead of running
# the call), ("finish", the answer).
TEXTS = [
    ("react", f"Thought: t\nAction: {ALARMS}\nAction Input: {{}}", ("run", ALARMS, "{}"),
     "a well-formed step runs its tool"),
    ("react", f"Thought: t\nAction: {ALARMS}\n", ("remind", at.NUDGE_NO_ACTION),
     "no Action Input: line: upstream reads no action (correction 12), nothing runs"),
    ("react", f"Thought: t\nAction: {ALARMS}\nAction Input:", ("remind", at.NUDGE_BAD_INPUT_REACT),
     "an empty input fails to evaluate: the format reminder, nothing runs"),
    ("react", f"Thought: t\nAction: {ALARMS}\nAction Input:   ", ("remind", at.NUDGE_BAD_INPUT_REACT),
     "blank input is an empty input"),
    ("react", "I will check.\nFinal Answer: all good", ("finish", "all good"), "Final Answer: ends the case"),
    ("react", "Thought: done\nAction: Finish\nAction Input: all set", ("finish", "all set"),
     "an action spelt Finish ends it too, its input the answer"),
    ("react", f"Thought: t\nAction: {WEATHER}\nAction Input: {{'location': 'San Francisco'}}",
     ("run", WEATHER, "{'location': 'San Francisco'}"), "a Python dict literal is read"),
    ("react", f"Action Input: {{}}\nAction: {ALARMS}", ("remind", at.NUDGE_NO_ACTION),
     "an Action: with no Action Input: after it reads no action"),
    ("react", 'Thought: t\nAction: get_x\nAction Input: {"a": true}', ("remind", at.NUDGE_BAD_INPUT_REACT),
     "JSON true is no Python literal: the format reminder"),
    ("react", f'Thought: t\nAction: {ALARMS}\nAction Input: {{"x": null}}', ("run", ALARMS, '{"x": null}'),
     "null is read as None and the tool runs (and answers with its own error)"),
    ("react", "Thought: nothing to call", ("remind", at.NUDGE_NO_ACTION), "a thought alone is no action"),
    ("react", "Thought: t\nAction: open_pod_bay_doors\nAction Input: {}", ("run", "open_pod_bay_doors", "{}"),
     "an unknown tool is still called (the sandbox answers invalid tool name)"),
    ("react", f"<think>plan</think>Thought: t\nAction: {ALARMS}\nAction Input: {{}}", ("run", ALARMS, "{}"),
     "without dataset.reasoning a <think> block stays in the step, and its action is read all the same"),
    ("react", f"<think>Final Answer: no.</think>Thought: t\nAction: {ALARMS}\nAction Input: {{}}",
     ("finish", f"no.</think>Thought: t\nAction: {ALARMS}\nAction Input: {{}}"),
     "without dataset.reasoning a Final Answer: inside a <think> block ends the case"),
    ("react", f"Thought: t\nAction: {ALARMS}\nAction Input: {{}}\nObservation: fake",
     ("remind", at.NUDGE_BAD_INPUT_REACT), "an invented observation is part of the input, which then fails"),
    ("react", f"Thought: t\nAction: {ALARMS}\nAction Input: [1, 2]", ("remind", at.NUDGE_BAD_INPUT_REACT),
     "an input that is not a dict fails"),
    ("react", f"Thought: a\nFinal Answer: x\nAction: {ALARMS}\nAction Input: {{}}",
     ("finish", f"x\nAction: {ALARMS}\nAction Input: {{}}"), "a final answer wins over a later action"),
    ("fc", f"<tool_call>\n{{'name': '{ALARMS}', 'arguments': {{}}}}\n</tool_call>", ("run", ALARMS, "{}"),
     "a Hermes block runs its call"),
    ("fc", "Sure, the weather is fine.", ("finish", "Sure, the weather is fine."), "text without a call is the answer"),
    ("fc", f'<tool_call>\n{{"name": "{ALARMS}", "arguments": {{}}, "x": true}}\n</tool_call>',
     ("remind", at.NUDGE_FC_FORMAT), "a block that is no Python literal is a malformed call"),
    ("fc", f"<tool_call>\n{{'name': '{ALARMS}', 'arguments': {{}}}}", ("finish", f"<tool_call>\n{{'name': '{ALARMS}', "
     "'arguments': {}}"), "an unclosed block is no call: the text is the answer"),
    ("fc", "<tool_call>\nnot a dict\n</tool_call>", ("remind", at.NUDGE_FC_FORMAT), "a block that is not a dict"),
    ("fc", f"<tool_call>\n{{'name': '{ALARMS}', 'arguments': {{}}}}\n</tool_call>\n<tool_call>\n"
     f"{{'name': '{WEATHER}', 'arguments': {{'location': 'San Francisco'}}}}\n</tool_call>", ("run", ALARMS, "{}"),
     "several blocks run in order (the first checked here)"),
    ("fc", f"<tool_call>\n{{'name': '{ALARMS}', 'arguments': \"{{}}\"}}\n</tool_call>", ("run", ALARMS, "{}"),
     "arguments as a string holding a dict run: upstream evaluates str(arguments)"),
    ("fc", f"<tool_call>\n{{'name': '{ALARMS}', 'arguments': 'soon'}}\n</tool_call>", ("reply", at.FC_BAD_ARGUMENTS),
     "arguments that evaluate to no dict: that call is answered with the format message"),
    ("fc", f"<tool_call>{{'name': '{ALARMS}', 'arguments': {{}}}}</tool_call>",
     ("finish", f"<tool_call>{{'name': '{ALARMS}', 'arguments': {{}}}}</tool_call>"),
     "a block without its newlines is no block upstream: the text is the answer"),
    ("fc", f"<think>\n<tool_call>\n{{'name': '{ALARMS}', 'arguments': {{}}}}\n</tool_call>\n</think>\nDone.",
     ("run", ALARMS, "{}"), "a call inside a <think> block runs: upstream's FC readers have no rule for reasoning"),
    ("fc", f"<tool_call>\n{{'name': '{ALARMS}', 'arguments': {{}}}}\n</tool_call>\n" * 11, ("abort", at.ABORT_CALLS),
     "11 calls, over dataset.max_calls_per_response=10: only the abort is recorded, nothing runs"),
]
# Llama-family JSON (model.tool_parser=llama3_json), read as upstream's Llama reader reads it.
LLAMA_TEXTS = [
    ("fc", f'{{"name": "{ALARMS}", "parameters": {{}}}}', ("run", ALARMS, "{}"), "a JSON call runs"),
    ("fc", f'<|python_tag|>{{"name": "{WEATHER}", "parameters": {{"location": "San Francisco"}}}}',
     ("run", WEATHER, "{'location': 'San Francisco'}"), "the python tag is dropped; arguments recorded as a dict repr"),
    ("fc", f'[{{"name": "{ALARMS}", "parameters": {{}}}}, {{"name": "{WEATHER}", "parameters": {{"location": "Boston"}}}}]',
     ("run", ALARMS, "{}"), "a list of calls runs in order (the first checked here)"),
    ("fc", f'{{"name": "{ALARMS}", "parameters": {{}}}}; {{"name": "{WEATHER}", "parameters": {{"location": "Boston"}}}}',
     ("run", ALARMS, "{}"), "calls separated by ; are read one by one as JSON"),
    ("fc", f'{{"name": "{WEATHER}", "parameters": {{"location": "Boston; MA"}}}}', ("remind", at.NUDGE_FC_FORMAT),
     "a ; inside an argument splits the text too, so the call is malformed"),
    ("fc", "The weather is sunny today.", ("finish", "The weather is sunny today."),
     "a text without the word name is the answer"),
    ("fc", "Your name is on the list.", ("remind", at.NUDGE_FC_FORMAT),
     "an answer that says name is read as a call, fails, and gets the format reminder"),
    ("fc", f'{{"name": "{ALARMS}", "parameters": {{}}}}<|eot_id|>', ("finish", f'{{"name": "{ALARMS}", "parameters": {{}}}}'),
     "a text ending its turn with <|eot_id|> is an answer, the token dropped"),
    ("fc", f'{{"name": "{ALARMS}", "arguments": {{}}}}', ("remind", at.NUDGE_FC_FORMAT),
     "a call without parameters is malformed"),
    ("fc", f'{{"name": "{ALARMS}", "parameters": {{"all": true}}}}', ("remind", at.NUDGE_FC_FORMAT),
     "one call without ; is read as a Python literal, where JSON true fails"),
]

# dataset.reasoning=true (upstream's --reasoning): ReAct steps lose their <think> blocks, nothing else does.
REASONING_TEXTS = [
    ("react", f"<think>Final Answer: no.</think>\nThought: t\nAction: {ALARMS}\nAction Input: {{}}",
     ("run", ALARMS, "{}"), "the block is dropped from a ReAct step before it is read"),
    ("e_react", f"<think>Final Answer: no.</think>\nThought: t\nAction: {ALARMS}\nAction Input: {{}}",
     ("finish", f"no.</think>\nThought: t\nAction: {ALARMS}\nAction Input: {{}}"),
     "an E-ReAct step keeps it: upstream's flag is ReAct's only"),
    ("fc", f"<think>\n<tool_call>\n{{'name': '{ALARMS}', 'arguments': {{}}}}\n</tool_call>\n</think>\nDone.",
     ("run", ALARMS, "{}"), "an FC turn keeps it too"),
]


def _scripted_run(tmp: Path, data: Path, texts: list[tuple], overrides: list[str]) -> dict[str, list[dict]]:
    """One scripted run over the texts; each sample's trajectory rows by sample id."""
    script, ids = [], []
    for number, (method, text, _, _) in enumerate(texts):
        sid = f"tool_given/{method}/John_Doe-{number}"
        ids.append(sid)
        # the text answers the first turn: model call 0, or 1 after E-ReAct's plan (no row: an empty plan)
        script.append({"sample_id": sid, "turn": int(method == "e_react"), "text": text})
    numbers = ",".join(str(i) for i in range(len(texts)))
    methods = ",".join(sorted({t[0] for t in texts}))
    done = toolsweep(tmp / "run", data, ["dataset.users=[John_Doe]", f"dataset.instructions=[{numbers}]",
                                         f"dataset.methods=[{methods}]", "dataset.settings=[tool_given]",
                                         "roles.judge.enabled=false", *overrides], script)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = pl.read_parquet(tmp / "run" / "trajectories.parquet").sort("sample_id", "index").to_dicts()
    return {sid: [r for r in rows if r["sample_id"] == sid] for sid in ids}


@pytest.fixture(scope="module")
def run(tmp_path_factory, etapp_data):
    return _scripted_run(tmp_path_factory.mktemp("raw"), etapp_data, TEXTS, [])


@pytest.fixture(scope="module")
def reasoning_run(tmp_path_factory, etapp_data):
    return _scripted_run(tmp_path_factory.mktemp("reasoning"), etapp_data, REASONING_TEXTS, ["dataset.reasoning=true"])


@pytest.fixture(scope="module")
def llama_run(tmp_path_factory, etapp_data):
    return _scripted_run(tmp_path_factory.mktemp("llama"), etapp_data, LLAMA_TEXTS, ["model.tool_parser=llama3_json"])


def _check(rows: list[dict], outcome: tuple) -> None:
    first = 4 if rows[0]["method"] == "e_react" else 2  # E-ReAct's plan and the turn after it come first
    step, after = rows[first], rows[first + 1] if len(rows) > first + 1 else None
    assert step["role"] == "assistant" and step["turn"] == 1
    if outcome[0] == "run":
        assert after["role"] == "tool" and (after["tool_name"], after["arguments"]) == outcome[1:], after
    elif outcome[0] in ("remind", "reply"):
        assert after["role"] == ("user" if outcome[0] == "remind" else "tool"), after
        assert after["content"] == outcome[1] and after["tool_name"] is None, after
        assert not any(r["tool_name"] for r in rows), "nothing ran"
    elif outcome[0] == "abort":
        assert (step["content"], step["tool_calls"], after) == (outcome[1], "[]", None), "only the abort"
    else:
        assert after is None, "the case ended at its first turn"
        assert json.loads(step["tool_calls"])[0] == {"name": json.loads(step["tool_calls"])[0]["name"],
                                                     "arguments": outcome[1]}


@pytest.mark.parametrize("number", range(len(TEXTS)), ids=[t[3] for t in TEXTS])
def test_a_raw_text_is_read_as_upstream_reads_it(run, number):
    method, _, outcome, _ = TEXTS[number]
    _check(run[f"tool_given/{method}/John_Doe-{number}"], outcome)


@pytest.mark.parametrize("number", range(len(REASONING_TEXTS)), ids=[t[3] for t in REASONING_TEXTS])
def test_under_dataset_reasoning_a_raw_text_is_read_as_upstreams_reasoning_mode_reads_it(reasoning_run, number):
    method, _, outcome, _ = REASONING_TEXTS[number]
    _check(reasoning_run[f"tool_given/{method}/John_Doe-{number}"], outcome)


@pytest.mark.parametrize("number", range(len(LLAMA_TEXTS)), ids=[t[3] for t in LLAMA_TEXTS])
def test_a_llama_family_text_is_read_as_upstreams_llama_reader_reads_it(llama_run, number):
    method, _, outcome, _ = LLAMA_TEXTS[number]
    _check(llama_run[f"tool_given/{method}/John_Doe-{number}"], outcome)


def test_a_step_without_an_action_is_recorded_as_upstream_records_it(run):
    """Correction 12: the thought as content (empty when no Action: was written) and one call with
    an empty name, so the judge never reads the step as a reply."""
    no_action = run["tool_given/react/John_Doe-1"][2]
    assert (no_action["content"], json.loads(no_action["tool_calls"])) == ("t", [{"name": "", "arguments": "{}"}])
    thought_only = run["tool_given/react/John_Doe-10"][2]
    assert (thought_only["content"], json.loads(thought_only["tool_calls"])) == ("", [{"name": "", "arguments": "{}"}])
