"""ETAPP agent texts and step parsers (spec 2.2-2.3): no model, real ETAPP files where present."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import pytest

from inference.benchmarks.etapp import agent_text as at
from inference.benchmarks.etapp.apps import APPS, SEARCH_TOOLS
from inference.errors import ConfigError, DatasetError

ETAPP = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "etapp"


# --- parse_react ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text,thought,action,action_input,answer", [
    pytest.param("Thought: a\nFinal Answer: x\nThought: b\nFinal Answer: y\n", "a\nFinal Answer: x\nThought: b",
                 "finish", "y", "y", id="answer-after-last-final-answer"),
    pytest.param("I know.\nFinal Answer: y", "", "finish", "y", "y", id="final-without-thought-has-empty-thought"),
    pytest.param("Thought: check\nAction: get_x\nAction Input: {\"a\": 1}\n", "check", "get_x", '{"a": 1}', None,
                 id="action-and-input"),
    pytest.param("Thought: t\nAction: get_x\nAction Input: {}\nObservation: {\"status\": \"success\"}",
                 "t", "get_x", '{}\nObservation: {"status": "success"}', None, id="invented-observation-kept"),
    pytest.param("Thought: t\nAction: view_today_alarms\n", "t", "", "{}", None,
                 id="no-action-input-reads-no-action"),
    pytest.param("Thought: t\nAction: view_today_alarms\nAction Input:", "t", "view_today_alarms", "", None,
                 id="empty-input-stays-empty"),
    pytest.param("Thought: t\nAction: a\nAction Input: {\"k\":\n 1,\n \"j\": 2}", "t", "a", '{"k":1,"j": 2}', None,
                 id="newline-space-removed"),
    pytest.param("<think>Action: bogus\nFinal Answer: no</think>\nThought: t\nAction: a\nAction Input: {}",
                 "", "finish", "no</think>\nThought: t\nAction: a\nAction Input: {}",
                 "no</think>\nThought: t\nAction: a\nAction Input: {}",
                 id="think-block-read-as-written-step-text-drops-it-under-reasoning"),
    pytest.param("Thought: nothing to do\nThe answer is 4.", "", "", "{}", None,
                 id="no-action-reads-empty-thought-and-action"),
    pytest.param("Let me see. Thought: t\nAction: a\nAction Input: {}", "Let me see. Thought: t", "a", "{}", None,
                 id="thought-is-all-before-action-without-a-leading-thought"),
    pytest.param("Thought: t\nAction: \nAction Input: {}", "t", "", "{}", None, id="blank-action-is-empty"),
])
def test_parse_react(text, thought, action, action_input, answer):
    assert at.parse_react(text) == at.Step(thought, action, action_input, answer)


def test_parse_react_finish_spelt_as_action_also_finishes():
    """Rule 4: `Action: Finish` ends the case even without "Final Answer:"."""
    step = at.parse_react("Thought: done\nAction: Finish\nAction Input: all set")
    assert step.finishes and step.answer is None and step.action_input == "all set"
    assert not at.parse_react("Thought: t\nAction: get_x\nAction Input: {}").finishes


# --- parse_arguments -----------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    pytest.param('{"a": null, "b": 1}', {"a": None, "b": 1}, id="null-becomes-none"),
    pytest.param('{"a": true}', None, id="json-true-fails-as-upstream"),
    pytest.param('{"a": True, "b": [1, 2]}', {"a": True, "b": [1, 2]}, id="python-true-passes"),
    pytest.param('["a"]', None, id="non-dict-rejected"),
    pytest.param("{}", {}, id="empty-dict"),
    pytest.param('{"a": 1}\nObservation: x', None, id="trailing-text-fails"),
    pytest.param('{"a": "null"}', {"a": "'null'"}, id="quoted-null-gets-nested-quotes-as-upstream"),
])
def test_parse_arguments(text, expected):
    assert at.parse_arguments(text) == expected


# --- parse_fc_calls ------------------------------------------------------------------------------

def test_parse_fc_calls_reads_a_block_only_with_its_newlines_as_upstream():
    """Upstream's pattern is `<tool_call>\\n(.*?)\\n</tool_call>`: a block written without the
    newlines is not a call, and stays in the text."""
    text = ('Checking both.\n<tool_call>\n{"name": "get_today_weather", "arguments": {"location": "Boston"}}\n'
            '</tool_call>\n<tool_call>{"name": "view_today_alarms", "arguments": {}}</tool_call>')
    assert at.parse_fc_calls(text) == [{"name": "get_today_weather", "arguments": {"location": "Boston"}}]
    assert at.fc_text_before_calls(text) == 'Checking both.\n\n<tool_call>{"name": "view_today_alarms", "arguments": {}}</tool_call>'


@pytest.mark.parametrize("arguments,runs_with", [
    ({"x": 1}, {"x": 1}), ("{'x': 1}", {"x": 1}), ("soon", None), ("[1]", None),
], ids=["dict", "string-holding-a-dict-runs", "string-that-is-no-literal", "string-holding-a-list"])
def test_call_arguments_evaluate_str_of_the_arguments_as_upstream(arguments, runs_with):
    assert at.call_arguments(arguments) == runs_with


@pytest.mark.parametrize("text,expected", [
    pytest.param("Here is your plan.", [], id="no-block-is-final-answer"),
    pytest.param('<tool_call>\n{"name": "a", "arguments": {"x": 1}', [], id="unclosed-block-is-no-call"),
    pytest.param('<tool_call>\n{"name": "a", "arguments": {"on": true}}\n</tool_call>', None,
                 id="json-true-fails-as-upstream"),
    pytest.param('<tool_call>\n{"name": "a", "arguments": {"x": null}}\n</tool_call>', None, id="json-null-fails"),
    pytest.param('<tool_call>\n{"name": "a", "arguments": "{}"}\n</tool_call>', [{"name": "a", "arguments": "{}"}],
                 id="string-arguments-kept-as-written"),
    pytest.param('<tool_call>\n{"name": "a"}\n</tool_call>', None, id="missing-arguments"),
    pytest.param('<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>\nnot python\n</tool_call>',
                 None, id="one-bad-block-fails-all"),
    pytest.param('<think><tool_call>{"name": "x", "arguments": {}}</tool_call></think>Done.', [],
                 id="calls-inside-reasoning-ignored"),
])
def test_parse_fc_calls_edge_cases(text, expected):
    assert at.parse_fc_calls(text) == expected


def test_abort_strings_are_upstreams_exactly():
    """The judge reads them in the trajectory, so they are data, typos included."""
    assert at.ABORT_TURNS == "Cannot solve this task due to trying too many times."
    assert at.ABORT_CALLS == "Cannot solve this task due to calling superabundant tools."
    assert at.ABORT_TOKENS == "Cannot solve this task within specified token ."


def test_bad_input_nudges_differ_only_by_the_one_tool_sentence():
    assert at.NUDGE_BAD_INPUT_REACT.startswith(at.NUDGE_BAD_INPUT_EREACT)
    assert "one tool" in at.NUDGE_BAD_INPUT_REACT and "one tool" not in at.NUDGE_BAD_INPUT_EREACT
    assert "Final Answer:" in at.NUDGE_NO_ACTION


# --- react_grammar_regex -------------------------------------------------------------------------

NAMES = ["get_today_weather", "view_today_alarms", "boil_water_in_home", "boil_water_in_home", "a.b"]


@pytest.mark.parametrize("step,ok", [
    pytest.param('Thought: rain?\nAction: get_today_weather\nAction Input: {"location": "Boston"}', True,
                 id="action-step"),
    pytest.param("Thought:  \nAction: view_today_alarms\nAction Input: {}", True, id="empty-thought-empty-input"),
    pytest.param("Thought: done\nFinal Answer: Line one.\nLine two.", True, id="multi-line-answer"),
    pytest.param("Thought: x\nAction: a.b\nAction Input: {}", True, id="dotted-name-literal"),
    pytest.param("Thought: x\nAction: aXb\nAction Input: {}", False, id="dot-is-not-a-wildcard"),
    pytest.param("Thought: x\nAction: send_email\nAction Input: {}", False, id="unknown-tool"),
    pytest.param("Thought: x\nAction: view_today_alarms\nAction Input: {}\nObservation: {}", False,
                 id="invented-observation"),
    pytest.param("Action: view_today_alarms\nAction Input: {}", False, id="thought-required"),
    pytest.param("Thought: x\nAction: view_today_alarms\nAction Input: []", False, id="input-must-be-braced"),
    pytest.param("Thought: x\nFinal Answer: ", False, id="empty-answer"),
])
def test_react_grammar_regex(step, ok):
    assert bool(re.fullmatch(at.react_grammar_regex(NAMES), step)) is ok


def test_react_grammar_regex_bounds_cap_each_part():
    regex = at.react_grammar_regex(NAMES, thought_chars=5, input_chars=4, answer_chars=3)
    assert re.fullmatch(regex, "Thought: abcde\nAction: a.b\nAction Input: {abcd}")
    assert not re.fullmatch(regex, "Thought: abcdef\nFinal Answer: x"), "thought over 5 characters"
    assert not re.fullmatch(regex, "Thought: a\nAction: a.b\nAction Input: {abcde}"), "input over 4"
    assert not re.fullmatch(regex, "Thought: a\nFinal Answer: abcd"), "answer over 3"
    with pytest.raises(ConfigError, match=r"at least one non-empty tool name, got \[\]"):
        at.react_grammar_regex([])


def test_react_grammar_regex_compiles_and_steers_under_outlines():
    """Outlines' own automaton accepts the default regex and walks a good step, but not a bad tool."""
    from outlines_core import Guide, Index, Vocabulary

    chars = [c for c in string.printable if c not in "\r\x0b\x0c"]
    ids = {c: i for i, c in enumerate(chars)}
    index = Index(at.react_grammar_regex(NAMES), Vocabulary(len(chars), {c: [i] for c, i in ids.items()}))

    def walk(text: str) -> bool:
        guide = Guide(index)
        for c in text:
            if ids[c] not in guide.get_tokens():
                return False
            guide.advance(ids[c])
        return guide.is_finished()

    assert walk('Thought: ok\nAction: get_today_weather\nAction Input: {"location": "Boston"}')
    assert walk("Thought: ok\nFinal Answer: Sunny.\nEnjoy!")
    assert not walk("Thought: ok\nAction: send_email\nAction Input: {}")


# --- prompts with real data ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def etapp_dir() -> Path:
    """The real ETAPP folder; skipped, saying so, where it is absent."""
    if not (ETAPP / "SOURCE.md").is_file():
        pytest.skip(f"ETAPP data absent: {ETAPP} not found (it lives in ../shared/data)")
    return ETAPP


@pytest.fixture(scope="module")
def case(etapp_dir):
    """James Harrington (first user) on instruction 6, which lists boil_water_in_home twice."""
    profiles = json.loads((etapp_dir / "profile" / "profiles.json").read_text())
    user = next(iter(profiles))
    concrete = json.loads((etapp_dir / "profile" / "concrete_profile" / f"profile_{user.replace(' ', '_')}.json")
                          .read_text())
    instruction = json.loads((etapp_dir / "data" / "instruction" / "instruction.json").read_text())[6]
    schemas, domains = {}, {}
    for app in APPS:
        for entry in json.loads((etapp_dir / "toolkit" / app.folder / "config.json").read_text()):
            schemas[entry["function"]["name"]] = entry
            domains[entry["function"]["name"]] = app.domain
    return user, profiles[user], concrete, instruction, schemas, domains


@pytest.mark.shared_data
def test_status_and_preferences_follow_the_case(case):
    user, profile, concrete, instruction, _, domains = case
    assert user == "James Harrington" and instruction["available_tools_name"].count("boil_water_in_home") == 2
    status = at.status_for(profile, instruction["location"], instruction["timestamp"])
    assert status == {"user location": f"San Francisco:{instruction['location']}", "time": instruction["timestamp"]}
    assert list(status) == ["user location", "time"], "key order shows in the prompt's repr"
    prefs = at.preferences_for_tools(instruction["available_tools_name"], concrete, domains)
    assert prefs == [concrete["smart_home_devices"], concrete["music"]], "first-seen domain order, each once"
    assert at.preferences_for_tools(["get_today_weather", *SEARCH_TOOLS], concrete, domains) == []


@pytest.mark.shared_data
@pytest.mark.parametrize("method", at.METHODS)
@pytest.mark.parametrize("setting", at.SETTINGS)
def test_system_prompt_carries_the_case(case, method, setting):
    _, profile, concrete, instruction, schemas, domains = case
    names = instruction["available_tools_name"] if setting == "tool_given" else list(SEARCH_TOOLS)
    tools = [schemas[n] for n in names]
    prefs = at.preferences_for_tools(instruction["available_tools_name"], concrete, domains)
    status = at.status_for(profile, instruction["location"], instruction["timestamp"])
    text = at.system_prompt(method, setting, profile, prefs, status, tools)
    assert str(profile) in text and str(status) in text
    assert "{'user location': 'San Francisco:" in text, "Python repr, as upstream's str.format"
    assert (str(prefs) in text) is (setting == "tool_given"), "preferences only when tools are given"
    assert ("call `get_tool_doc`" in text) is (setting == "tool_retrieval"), "the retrieval lines"
    if method == "fc":
        assert str(tools) not in text and "Action Input:" not in text, "FC tools go to the chat template"
    else:
        assert str(tools) in text and all(n in text for n in names)
    if method == "react":
        assert "Final Answer:" in text and "One Tool Call at a Time" in text
    if method == "e_react":
        assert '"keypoint for personalized"' in text and '"keypoint for proactive"' in text
    assert text.startswith("You are a personal and proactive assistant") and "Principles:" in text, \
        "every method's system message carries the persona and principles (E-ReAct's plan too, as upstream)"


@pytest.mark.shared_data
@pytest.mark.parametrize("setting", at.SETTINGS)
def test_react_example_is_shown_but_can_be_left_out_for_the_record(case, setting):
    _, profile, _, instruction, schemas, _ = case
    status = at.status_for(profile, instruction["location"], instruction["timestamp"])
    args = ("react", setting, profile, [], status, [schemas["search_tools"]])
    shown, stored = at.system_prompt(*args), at.system_prompt(*args, with_example=False)
    assert shown.startswith(stored) and "Example" in shown[len(stored):]
    assert stored.endswith("call exactly one tool in each response."), "the one-tool rule closes the rules"
    first_call = "Action: search_tools" if setting == "tool_retrieval" else "Action: get_current_health"
    assert first_call in shown and first_call in at.e_react_execute_turn(setting)


def test_bad_method_setting_and_profile_are_named():
    with pytest.raises(ConfigError, match=r"method must be one of \['fc', 'react', 'e_react'\], got 'cot'"):
        at.system_prompt("cot", "tool_given", {}, [], {}, [])
    with pytest.raises(ConfigError, match=r"setting must be one of .* got 'given'"):
        at.e_react_execute_turn("given")
    with pytest.raises(DatasetError, match=r"no DemographicData.BasicInformation.Location \(top-level keys \['x'\]\)"):
        at.status_for({"x": 1}, "Home", "2024-09-06 07:00:00")
    with pytest.raises(DatasetError, match=r"the concrete profile has no domains \[.music.\]"):
        at.preferences_for_tools(["play_music"], {"email": {}}, {"play_music": "music"})


def test_the_judge_takes_preferences_from_every_named_call_run_or_not():
    """Upstream's judge collects the tools of every assistant call in the record, whether it ran
    or not; finish and an empty name (a step without an action) name no tool."""
    from inference.benchmarks.etapp.judge_solver import named_tools

    record = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
              {"role": "assistant", "content": "", "tool_calls": [{"name": "play_music", "arguments": ""}]},
              {"role": "user", "content": at.NUDGE_BAD_INPUT_REACT},
              {"role": "assistant", "content": "t", "tool_calls": [{"name": "", "arguments": "{}"}]},
              {"role": "assistant", "content": "", "tool_calls": [{"name": "finish", "arguments": "done"}]}]
    assert named_tools(record) == ["play_music"]


# --- FC family and reasoning ---------------------------------------------------------------------

LLAMA_TEMPLATE = ("{%- for message in messages %}{%- if message.tool_calls is defined %}"
                  "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n<|python_tag|>' }}"
                  "{{- message.tool_calls[0].function | tojson }}{{- '<|eom_id|>' }}{%- endif %}{%- endfor %}")


@pytest.mark.parametrize("parser,template,family", [
    pytest.param(None, LLAMA_TEMPLATE, "llama3_json", id="llama-template-guessed"),
    pytest.param(None, "{{ '<tool_call>' }}", "hermes", id="hermes-template-guessed"),
    pytest.param(None, "{{ messages }}", "hermes", id="template-naming-no-family-reads-hermes"),
    pytest.param("hermes", LLAMA_TEMPLATE, "hermes", id="model-tool-parser-wins"),
])
def test_the_fc_family_is_the_one_the_chat_template_implies_when_model_tool_parser_is_unset(parser, template,
                                                                                           family):
    """As single-call benchmarks guess it (inference.toolcalls.guess_parser), so a Llama model is
    read by upstream's Llama reader without naming model.tool_parser."""
    from types import SimpleNamespace

    from inference.benchmarks.etapp.agent_solver import agent_grammar
    from inference.benchmarks.etapp.fc_reading import read_hermes, read_llama

    grammar = agent_grammar("none", None, parser, SimpleNamespace(tokenizer=SimpleNamespace(chat_template=template)))
    assert grammar.call_format == family
    assert grammar.read_fc is (read_llama if family == "llama3_json" else read_hermes)


def test_without_a_tokenizer_the_fc_family_is_hermes():
    """engine=script and replay render nothing: no template to guess from."""
    from types import SimpleNamespace

    from inference.benchmarks.etapp.agent_solver import agent_grammar

    assert agent_grammar("none", None, None, SimpleNamespace(tokenizer=None)).call_format == "hermes"


THINK_CALL = '<think>\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n</think>\nDone.'


@pytest.mark.parametrize("method,reasoning,text,read", [
    pytest.param("react", False, "<think>Final Answer: no</think>Thought: t\nAction: a\nAction Input: {}",
                 ("finish", "no</think>Thought: t\nAction: a\nAction Input: {}"), id="react-reads-reasoning-as-text"),
    pytest.param("react", True, "<think>Final Answer: no</think>\nThought: t\nAction: a\nAction Input: {}",
                 ("a", "{}"), id="react-under-reasoning-drops-the-blocks"),
    pytest.param("react", True, "  Thought: t\nAction: a\nAction Input: {}", ("a", "{}"),
                 id="react-under-reasoning-strips-the-text"),
    pytest.param("react", True, "Final Answer: no</think>Thought: t\nAction: a\nAction Input: {}",
                 ("finish", "no</think>Thought: t\nAction: a\nAction Input: {}"),
                 id="react-under-reasoning-keeps-a-lone-end-as-upstream"),
    pytest.param("e_react", True, "<think>Final Answer: no</think>Thought: t\nAction: a\nAction Input: {}",
                 ("finish", "no</think>Thought: t\nAction: a\nAction Input: {}"), id="e-react-never-drops-reasoning"),
    pytest.param("fc", False, THINK_CALL, ("a", {}), id="fc-reads-a-call-inside-reasoning"),
    pytest.param("fc", True, THINK_CALL, ("a", {}), id="fc-ignores-the-reasoning-flag"),
    pytest.param("fc", True, "<think>hmm</think>Sunny.", ("finish", "<think>hmm</think>Sunny."),
                 id="fc-answer-keeps-its-reasoning"),
])
def test_reasoning_is_read_as_upstream_reads_it_per_method_and_flag(method, reasoning, text, read):
    """Upstream drops `<think>` blocks in one place: a ReAct step under its --reasoning flag (then
    strips the text). E-ReAct and its plan, and FC turns (whose open-model readers have no rule for
    reasoning), read the text as written."""
    from inference.benchmarks.etapp.fc_reading import read_hermes

    seen = at.step_text(text, method, reasoning)
    if method == "fc":
        content, calls = read_hermes(seen)
        got = (calls[0]["name"], calls[0]["arguments"]) if calls else ("finish", content)
    else:
        step = at.parse_react(seen)
        got = (step.action, step.action_input)
    assert got == read


def test_reasoning_needs_a_react_method():
    from inference.benchmarks.etapp.options import EtappOptions

    assert EtappOptions(name="etapp", path="x", methods=["react"], reasoning=True).problems() == []
    problems = EtappOptions(name="etapp", path="x", methods=["fc", "e_react"], reasoning=True).problems()
    assert problems == ["dataset.reasoning=true drops <think> blocks from ReAct steps only (upstream's --reasoning); "
                        "add react to dataset.methods, or leave dataset.reasoning false"]
