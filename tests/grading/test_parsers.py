"""Table-driven parser cases: every quirk of the official regex, and what the json parser fixes."""

from __future__ import annotations

import pytest

from grading.parsers import parse_json, parse_official

CALL = '{"tool_name": "<A>.<B>.<c>", "parameters": {"q": "x", "n": 2}}'
COMPACT = '{"tool_name":"<A>.<B>.<c>","parameters":{"q":"x","n":2}}'
GOOD = ("<A>.<B>.<c>", {"q": "x", "n": 2})

# (id, output, expected (tool, params) or None for "not parsed", reason)
OFFICIAL_CASES = [
    ("compact", COMPACT, GOOD, "the constrained output form"),
    ("spaced", CALL, GOOD, r"\s* after colons and the comma is allowed"),
    ("prose_same_line", f"Sure! {CALL} Hope it helps.", GOOD, "the match can sit inside a line"),
    ("fence_own_line", f"```json\n{CALL}\n```", GOOD, "a fence on other lines is harmless"),
    ("leading_space_in_brace", '{ "tool_name": "a", "parameters": {}}', ("a", {}),
     r"\{.* absorbs the space after the opening brace"),
    ("space_between_closing", '{"tool_name": "a", "parameters": {} }', None,
     r"the pattern ends in \}\} with no space allowed"),
    ("newline_after_comma", '{"tool_name": "a",\n "parameters": {}}', ("a", {}),
     r"the \s* between the keys does cross a newline"),
    ("newline_after_brace", '{\n"tool_name": "a", "parameters": {}}', None, "no DOTALL: .* stops at newlines"),
    ("newline_in_params", '{"tool_name": "a", "parameters": {"q":\n 1}}', None, "nor does .*? inside parameters"),
    ("pretty_printed", '{\n  "tool_name": "a",\n  "parameters": {}\n}', None, "multi-line JSON never matches"),
    ("nested_value", '{"tool_name": "a", "parameters": {"f": {"g": 1}}}', None,
     r"\{.*?\}\} stops at the first }} and the cut text is not JSON"),
    ("params_as_string", '{"tool_name": "a", "parameters": "{}"}', None, "parameters must open with {"),
    ("params_first", '{"parameters": {}, "tool_name": "a"}', None, "key order is fixed by the pattern"),
    ("two_calls_one_line", '{"tool_name": "a", "parameters": {}} {"tool_name": "b", "parameters": {}}',
     None, "greedy .* spans both calls: not one JSON value"),
    ("two_calls_two_lines", '{"tool_name": "a", "parameters": {}}\n{"tool_name": "b", "parameters": {}}',
     ("a", {}), "re.search returns the first line's match"),
    ("empty", "", None, "an empty response is skipped by the script, so wrong"),
    ("none", None, None, "no output at all"),
    ("unicode_name", '{"tool_name": "<Tools>.<👋 Demo>.<x>", "parameters": {}}', ("<Tools>.<👋 Demo>.<x>", {}),
     "non-ASCII names survive"),
    ("escaped_unicode", '{"tool_name": "<T>.<\\ud83d\\udc4b>.<x>", "parameters": {}}', ("<T>.<👋>.<x>", {}),
     "JSON escapes decode to the same name"),
    ("truncated", '{"tool_name": "a", "parameters": {"q": "unfinished', None, "a cut-off call never matches"),
]


@pytest.mark.parametrize("output,expected", [(c[1], c[2]) for c in OFFICIAL_CASES],
                         ids=[c[0] for c in OFFICIAL_CASES])
def test_official_parser(output, expected):
    parsed = parse_official(output)
    _assert_parsed(parsed, expected)
    if expected is None:
        assert parsed.error


JSON_CASES = [
    ("compact", COMPACT, GOOD, "same as official"),
    ("pretty_printed", '{\n  "tool_name": "<A>.<B>.<c>",\n  "parameters": {"q": "x", "n": 2}\n}', GOOD,
     "newlines do not matter"),
    ("fenced", f"```json\n{CALL}\n```", GOOD, "code fences are skipped"),
    ("params_first", '{"parameters": {"q": "x", "n": 2}, "tool_name": "<A>.<B>.<c>"}', GOOD,
     "key order does not matter"),
    ("space_between_closing", '{"tool_name": "a", "parameters": {} }', ("a", {}), "any JSON whitespace"),
    ("nested_value", '{"tool_name": "a", "parameters": {"f": {"g": 1}}}', ("a", {"f": {"g": 1}}),
     "nested values decode whole"),
    ("params_as_string", '{"tool_name": "a", "parameters": "{\\"q\\": 1}"}', ("a", {"q": 1}),
     "double-encoded parameters are decoded"),
    ("params_string_not_object", '{"tool_name": "a", "parameters": "hello"}', ("a", "hello"),
     "a plain string stays a string (and will not equal a gold object)"),
    ("object_before_call", '{"thought": "pick a"} then {"tool_name": "a", "parameters": {}}', ("a", {}),
     "objects without tool_name are skipped"),
    ("wrapped_call", '{"call": {"tool_name": "a", "parameters": {}}}', ("a", {}),
     "the outer object has no tool_name; the inner one, found at its own {, is the call"),
    ("broken_then_good", '{"tool_name": "a", "parameters": {\n{"tool_name": "b", "parameters": {}}', ("b", {}),
     "an undecodable start is skipped"),
    ("two_calls", '{"tool_name": "a", "parameters": {}} {"tool_name": "b", "parameters": {}}', ("a", {}),
     "the first call wins"),
    ("no_object", "I cannot help with that.", None, "prose only"),
    ("truncated", '{"tool_name": "a", "parameters": {"q": "unfinished', None, "cut-off JSON is not a call"),
    ("empty", "", None, "empty output"),
]


@pytest.mark.parametrize("output,expected", [(c[1], c[2]) for c in JSON_CASES],
                         ids=[c[0] for c in JSON_CASES])
def test_json_parser(output, expected):
    _assert_parsed(parse_json(output), expected)


def _assert_parsed(parsed, expected) -> None:
    """No call when `expected` is None, else exactly the (tool_name, parameters) expected."""
    if expected is None:
        assert not parsed.ok
    else:
        assert parsed.ok, parsed.error
        assert (parsed.tool_name, parsed.parameters) == expected
