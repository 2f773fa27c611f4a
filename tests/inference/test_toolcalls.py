"""The native tool-call format: family wrappers and their grammars, the template probe, and
reading calls back with vLLM's own parsers."""

from __future__ import annotations

import json
import re

import pytest

from inference.engines.vllm_tool_parsers import call_reader, decode_arguments
from inference.errors import ConfigError
from inference.prompts import PromptSettings, render_chat, render_one, template_has_tools
from inference.toolcalls import CALL_FORMATS, guess_parser, native_lark, native_regex, native_schema, \
    native_structural_tag

TOOLS = [{"tool_name": "cancel_alarm", "required_parameters": [],
          "optional_parameters": [{"name": "label", "type": "string"}]},
         {"tool_name": "play_music", "required_parameters": [{"name": "genre", "type": "STRING"}],
          "optional_parameters": []}]
HERMES = CALL_FORMATS["hermes"]
CALL = '<tool_call>\n{"name":"cancel_alarm","arguments":{"label":"dinner"}}\n</tool_call>'


@pytest.fixture(scope="module")
def tokenizer(embedded_model):
    from inference.generation import load_tokenizer

    return load_tokenizer(str(embedded_model))


def test_native_regex_wraps_one_to_n_calls():
    schema = native_schema(TOOLS, HERMES)
    one = re.compile(native_regex(schema, HERMES, 1))
    three = re.compile(native_regex(schema, HERMES, 3))
    assert one.fullmatch(CALL) and not one.fullmatch(CALL + "\n" + CALL)
    assert three.fullmatch(CALL + "\n" + CALL) and not three.fullmatch("\n".join([CALL] * 4))
    assert not one.fullmatch('{"name":"cancel_alarm","arguments":{}}'), "the wrapper is required"
    assert not one.fullmatch(CALL.replace("cancel_alarm", "set_alarm")), "only candidate names"


def test_xgrammar_and_guidance_grammars_carry_the_wrapper_and_schema():
    schema = native_schema(TOOLS, HERMES)
    tag = json.loads(native_structural_tag(schema, HERMES, "xgrammar", 1))
    assert tag["format"]["begin"] == "<tool_call>\n" and tag["format"]["end"] == "\n</tool_call>"
    assert tag["format"]["content"]["json_schema"]["anyOf"][0]["properties"]["name"] == {"const": "cancel_alarm"}
    several = json.loads(native_structural_tag(schema, HERMES, "xgrammar", 3))
    assert several["format"]["type"] == "tags_with_separator"
    lark = native_lark(schema, HERMES, "guidance", 3)
    assert lark.startswith('start: call ("\\n" call){0,2}\ncall: "<tool_call>\\n" %json {')


def test_guess_parser_from_the_template():
    assert guess_parser("... <tool_call>\n{{ tool }} ...") == "hermes"
    assert guess_parser("{{ '<|python_tag|>' }}") == "llama3_json"
    assert guess_parser("[TOOL_CALLS]") == "mistral"
    assert guess_parser(None) == "hermes"


def test_smollm2_template_ignores_tools_so_a_tool_block_is_used(tokenizer):
    assert not template_has_tools(tokenizer)
    alone = render_chat(tokenizer, [{"role": "user", "content": "Hi"}],
                        [{"type": "function", "function": {"name": "cancel_alarm"}}], False, False)
    assert "<tools>" in alone and '"name": "cancel_alarm"' in alone and alone.index("<tools>") < alone.index("Hi")
    row = {"system": "x", "native_system": "Family graph here.", "user": "Cancel my alarm",
           "tool_specs": json.dumps([{"type": "function", "function": {"name": "cancel_alarm"}}])}
    prompt = render_one(row, tokenizer, False, PromptSettings(8192, 256, native=True, template_tools=False))
    assert "Family graph here.\n\n# Tools" in prompt and "<tool_call>" in prompt and "Cancel my alarm" in prompt


class _ToolTemplate:
    """A tokenizer stand-in whose template renders tools (as Qwen-style templates do)."""

    chat_template = "<tool_call>"

    def apply_chat_template(self, messages, tools=None, tokenize=False, add_generation_prompt=True):
        shown = "".join(json.dumps(t) for t in tools or [])
        return shown + "|" + "|".join(f"{m['role']}:{m['content']}" for m in messages)


def test_templates_with_tool_support_get_the_specs():
    fake = _ToolTemplate()
    assert template_has_tools(fake)
    row = {"system": "x", "native_system": None, "user": "hi",
           "tool_specs": json.dumps([{"type": "function", "function": {"name": "f"}}])}
    prompt = render_one(row, fake, False, PromptSettings(8192, 256, native=True, template_tools=True))
    assert prompt == '{"type": "function", "function": {"name": "f"}}|user:hi', "no system turn, tools to the template"


@pytest.mark.parametrize("output,calls", [
    (CALL, [{"name": "cancel_alarm", "arguments": {"label": "dinner"}}]),
    ("Sure.\n" + CALL, [{"name": "cancel_alarm", "arguments": {"label": "dinner"}}]),
    (CALL + "\n" + CALL.replace("dinner", "lunch"), [{"name": "cancel_alarm", "arguments": {"label": "dinner"}},
                                                     {"name": "cancel_alarm", "arguments": {"label": "lunch"}}]),
    (CALL + "\n" + CALL.replace("}}", "}"), []),
    ('{"name":"cancel_alarm","arguments":{}}', []),
    ("", []),
], ids=["one", "prose_first", "two", "one_malformed_drops_all", "no_tag", "empty"])
def test_hermes_reading_is_vllms(tokenizer, output, calls):
    assert call_reader("hermes", tokenizer)(output) == calls


def test_unknown_or_unfit_parsers_are_config_errors(tokenizer):
    with pytest.raises(ConfigError, match="must be one of vLLM's tool parsers"):
        call_reader("hermess", tokenizer)
    with pytest.raises(ConfigError, match="does not fit this model's tokenizer"):
        call_reader("llama3_json", tokenizer)  # SmolLM2 has no <|python_tag|> token


def test_arguments_decode_as_the_familytool_pipeline_does():
    assert decode_arguments('{"a": 1}') == {"a": 1}
    assert decode_arguments("{'a': 1}") == {"a": 1}
    assert decode_arguments("not json") == {}


def test_a_bad_tool_parser_fails_before_any_model_loads(tmp_path, embedded_model):
    from tests.inference.test_end_to_end import run_toolsweep

    done = run_toolsweep(tmp_path / "run", ["dataset=familytool_sample", "model.tool_parser=hermez"])
    assert done.returncode == 2 and "model.tool_parser must be one of vLLM's tool parsers" in done.stderr
    assert "loading model" not in done.stderr and "Traceback" not in done.stderr
