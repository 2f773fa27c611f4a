"""Raw agent texts (engine=script `text` rows, read exactly as a model's output would be) through
the CLI: for each, what upstream ETAPP's loop does with it (run which tool with which arguments,
send which reminder, or finish) and how it records the step, checked against toolsweep's run.

One run holds every text, each the first turn of its own case (John_Doe's instructions, in the
tool-given setting); the script's next turn, absent, is an empty final answer."""

from __future__ import annotations

import json

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
     "reasoning is dropped before reading"),
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
]


@pytest.fixture(scope="module")
def run(tmp_path_factory, etapp_data):
    """One scripted run over every text; returns each sample's trajectory rows by sample id."""
    tmp = tmp_path_factory.mktemp("raw")
    script, ids = [], []
    for number, (method, text, _, _) in enumerate(TEXTS):
        sid = f"tool_given/{method}/John_Doe-{number}"
        ids.append(sid)
        script.append({"sample_id": sid, "turn": 1, "text": text})
    numbers = ",".join(str(i) for i in range(len(TEXTS)))
    done = toolsweep(tmp / "run", etapp_data, ["dataset.users=[John_Doe]", f"dataset.instructions=[{numbers}]",
                                               "dataset.methods=[react,fc]", "dataset.settings=[tool_given]",
                                               "roles.judge.enabled=false"], script)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = pl.read_parquet(tmp / "run" / "trajectories.parquet").sort("sample_id", "index").to_dicts()
    return {sid: [r for r in rows if r["sample_id"] == sid] for sid in ids}


@pytest.mark.parametrize("number", range(len(TEXTS)), ids=[t[3] for t in TEXTS])
def test_a_raw_text_is_read_as_upstream_reads_it(run, number):
    method, text, outcome, _ = TEXTS[number]
    rows = run[f"tool_given/{method}/John_Doe-{number}"]
    step, after = rows[2], rows[3] if len(rows) > 3 else None
    assert step["role"] == "assistant" and step["turn"] == 1
    if outcome[0] == "run":
        assert after["role"] == "tool" and (after["tool_name"], after["arguments"]) == outcome[1:], after
    elif outcome[0] in ("remind", "reply"):
        assert after["role"] == ("user" if outcome[0] == "remind" else "tool"), after
        assert after["content"] == outcome[1] and after["tool_name"] is None, after
        assert not any(r["tool_name"] for r in rows), "nothing ran"
    else:
        assert after is None, "the case ended at its first turn"
        assert json.loads(step["tool_calls"])[0] == {"name": json.loads(step["tool_calls"])[0]["name"],
                                                     "arguments": outcome[1]}


def test_a_step_without_an_action_is_recorded_as_upstream_records_it(run):
    """Correction 12: the thought as content (empty when no Action: was written) and one call with
    an empty name, so the judge never reads the step as a reply."""
    no_action = run["tool_given/react/John_Doe-1"][2]
    assert (no_action["content"], json.loads(no_action["tool_calls"])) == ("t", [{"name": "", "arguments": "{}"}])
    thought_only = run["tool_given/react/John_Doe-10"][2]
    assert (thought_only["content"], json.loads(thought_only["tool_calls"])) == ("", [{"name": "", "arguments": "{}"}])
