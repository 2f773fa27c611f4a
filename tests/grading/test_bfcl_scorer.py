"""BFCL's decoding and AST checker as reimplemented: verdicts equal BFCL's own code's on probe
answers (tests/grading/data/bfcl_reference_verdicts.json, written by
scripts/bfcl_reference_verdicts.py running BFCL's package), and one test per rule besides."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from grading.scorers.bfcl.checker import check, check_call, expected_name, standardize
from grading.scorers.bfcl.decoding import decode_hermes_fc, decode_listed, decode_prompting, has_call
from grading.scorers.bfcl import CODES, _summary, grade, leaderboard_figures
from grading.grades import grade as grade_table
from tests.grading.child_process import read_in_child, run_in_child

DATA = Path(__file__).parent / "data"
PROBES = json.loads((DATA / "bfcl_probes.json").read_text(encoding="utf-8"))
REFERENCE = json.loads((DATA / "bfcl_reference_verdicts.json").read_text(encoding="utf-8"))


def probe_row(case: dict, output: str | None, native: bool, failure: str | None = None) -> dict:
    return {"setting": case["category"], "output": output, "failure": failure,
            "prompt_format": "native" if native else "benchmark", "calls": None, "call_reader": "bfcl_hermes",
            "functions": json.dumps(case["function"]),
            "possible_answer": None if case["ground_truth"] is None else json.dumps(case["ground_truth"])}


@pytest.mark.parametrize("probe", PROBES["probes"], ids=[f"{p['probe']}-{p['why']}" for p in PROBES["probes"]])
def test_verdict_equals_bfcls_own(probe):
    """Right or wrong, and BFCL's error type; where BFCL's checker raises, a checker_error."""
    got = grade("official", probe_row(PROBES["cases"][probe["case"]], probe["output"], probe["format"] == "fc"))
    expected = REFERENCE["verdicts"][probe["probe"]]
    assert got["correct"] == expected["valid"], (probe, got, expected)
    if (expected["error_type"] or "").startswith("raises:"):
        assert got["error_type"].startswith("checker_error:"), got
    else:
        assert got["error_type"] == expected["error_type"], (probe, got)


def test_the_reference_covers_every_probe_and_both_outcomes():
    verdicts = REFERENCE["verdicts"]
    assert set(verdicts) == {p["probe"] for p in PROBES["probes"]} and len(verdicts) >= 100
    assert REFERENCE["bfcl_eval"] == "2026.3.23"
    assert 30 < sum(v["valid"] for v in verdicts.values()) < len(verdicts) - 30


@pytest.mark.parametrize("text,expected", [
    ("April 1, 2024", "april12024"), ("New-York_City", "newyorkcity"), ("it's", 'it"s'), ("a\tb", "a\tb"),
], ids=["spaces and commas", "dashes and underscores", "single quote to double", "tab kept"])
def test_standardize(text, expected):
    assert standardize(text) == expected


def test_dots_become_underscores_only_for_flagged_models():
    assert expected_name("spotify.play", False) == "spotify.play"
    assert expected_name("spotify.play", True) == "spotify_play"
    function = {"name": "spotify.play", "parameters": {"properties": {"a": {"type": "integer"}}, "required": ["a"]}}
    assert check_call(function, {"spotify_play": {"a": 1}}, {"spotify.play": {"a": [1]}}, True).valid
    assert not check_call(function, {"spotify_play": {"a": 1}}, {"spotify.play": {"a": [1]}}, False).valid


def test_an_expected_function_the_case_lacks_is_a_checker_error_not_a_crash():
    verdict = check("live_multiple", [{"name": "a", "parameters": {"properties": {}, "required": []}}],
                    [{"a": {}}], [{"b": {}}])
    assert not verdict.valid and verdict.error_type == "checker_error:TypeError"


BOUND = "toolsweep's bound"
"""The reason the readers give for a value or an answer past their bounds."""
HOSTILE = [
    pytest.param("[math.factorial(number=(9**9999)**9999)]", BOUND, id="nested power (a power of a 31,700-bit value)"),
    pytest.param("[f(x=9**9**9)]", BOUND, id="power tower"),
    pytest.param("[f(x=2**(2**200))]", BOUND, id="power with a computed exponent"),
    pytest.param("[f(x='a'*10**9)]", BOUND, id="string repetition (10**9 characters)"),
    pytest.param("[f(x=1<<10**9)]", BOUND, id="shift by 10**9"),
    pytest.param("[f(x=" + "*".join(["9**9999"] * 40) + ")]", BOUND, id="multiplication chain (1.3 million bits)"),
    pytest.param("[f(x=1" + "<<9999" * 200 + ")]", BOUND, id="shift chain (2 million bits)"),
    pytest.param("[f(x=1+-((9**9999)**9999))]", BOUND, id="unary operator on a nested power"),
    pytest.param("[f(x=('a'*100000)*100000)]", BOUND, id="repeated string repetition (10**10 characters)"),
    pytest.param("[f(x=[[[0]*1000]*1000]*1000)]", BOUND, id="nested list repetition (10**9 items)"),
    pytest.param("[f(x=" + "+".join(["'a'*99999"] * 40) + ")]", BOUND, id="sum of repetitions (4 million characters)"),
    pytest.param("[f(x='%0999999999d'%1)]", BOUND, id="string format width (a 1 GB string)"),
    pytest.param("[f(x=[" + "1," * 150_000 + "1])]", BOUND, id="answer of 300,000 characters"),
    pytest.param("[f(x=2**100000)]", BOUND, id="one bit past the integer bound"),
    pytest.param("[f(x='a'*1000001)]", BOUND, id="one character past the answer's budget"),
    pytest.param("[f(x=a" + "[1]" * 600 + ")]", None, id="deep subscript"),
    pytest.param("[f(x=" + "1+" * 1500 + "1)]", None, id="deep arithmetic"),
    pytest.param("[f(x=" + "(" * 300 + "1" + ")" * 300 + ")]", None, id="deep parentheses"),
]


@pytest.mark.parametrize("text,reason", HOSTILE)
def test_a_hostile_answer_is_a_decode_failure(text, reason):
    """BFCL `eval`s arithmetic; toolsweep computes literals only, each value and the answer within
    bounds, so no answer holds the grader longer than a bounded time (the child's limit catches a
    reader that hangs)."""
    outcome = read_in_child("grading.scorers.bfcl.decoding:decode_prompting", text)
    assert outcome["raised"] is None and not outcome["ok"], outcome
    assert reason is None or reason in outcome["error"], outcome


@pytest.mark.parametrize("text,value", [
    ("[f(x=2**10)]", 1024), ("[f(x='ab'*3)]", "ababab"), ("[f(x=[0]*3+[1])]", [0, 0, 0, 1]),
    ("[f(x=1+-(2**10))]", -1023), ("[f(x=7//2+1.5)]", 4.5), ("[f(x='%s-%d'%('a',1))]", "a-1"),
    ("[f(x=10**5000)]", 10**5000), ("[f(x=9**9999*9**9999)]", 9**19998), ("[f(x=('a'*1000)*100)]", "a" * 100_000),
    ("[f(x=1<<10001)]", 1 << 10001),
], ids=["power", "string repetition", "list repetition and sum", "unary in arithmetic", "floor division and float",
        "string format", "16,610-bit power", "63,000-bit product", "100,000-character string",
        "shift under the bound (BFCL computes it; an earlier, narrower limit refused it)"])
def test_arithmetic_under_the_bounds_reads_as_bfcls_eval(text, value):
    assert decode_prompting(text).calls == [{"f": {"x": value}}]


def test_a_value_too_large_to_write_is_graded_and_named():
    """An integer past Python's 4,300 digits has no text form: the calls column names it, and the
    row is graded as BFCL grades the value (a wrong type here), never a crash."""
    fields = grade("official", probe_row(PROBES["cases"]["route"],
                                         "[geo.distance(origin='SF', destination=10**5000)]", False))
    assert fields["valid"] and not fields["correct"]
    assert "too large to write" in fields["calls"], fields["calls"]


def _samples(rows: list[dict]) -> pl.DataFrame:
    frame = pl.DataFrame([{"sample_id": f"s{i}", "scorer": "bfcl", **row} for i, row in enumerate(rows)],
                         infer_schema_length=None)
    return frame.with_columns(pl.col(pl.Null).cast(pl.String))


def test_a_file_with_hostile_answers_grades_and_the_others_grade_as_without_them(tmp_path):
    """`toolsweep grade` of a run holding hostile answers among the probe answers finishes; each
    hostile answer is a decode failure (wrong in an AST category, right for irrelevance); every
    other answer is graded as in the same file without them."""
    normal = [probe_row(PROBES["cases"][p["case"]], p["output"], p["format"] == "fc") for p in PROBES["probes"]]
    texts = [h.values[0] for h in HOSTILE]
    hostile = [probe_row(PROBES["cases"][case], text, False) for case in ("route", "chat") for text in texts]
    run = tmp_path / "run"
    run.mkdir()
    _samples(normal + hostile).write_parquet(run / "samples.parquet")
    run_in_child(f"from grading.regrade import main\nraise SystemExit(main([{str(run)!r}]))", limit_s=300)
    graded = pl.read_parquet(run / "samples.parquet").sort("sample_id")
    columns = [f"official_{name}" for name in ("valid", "n_calls", "calls", "correct", "error_type")]
    alone = grade_table(_samples(normal)).sort("sample_id")
    assert graded.filter(pl.col("sample_id").is_in(alone["sample_id"].to_list())).select("sample_id", *columns) \
        .equals(alone.select("sample_id", *columns))
    bad = graded.filter(~pl.col("sample_id").is_in(alone["sample_id"].to_list()))
    assert bad.height == 2 * len(texts) and not bad["official_valid"].any()
    assert set(zip(bad["setting"], bad["official_correct"], bad["official_error_type"])) == {
        ("simple_python", False, "ast_decoder:decoder_failed"), ("irrelevance", True, None)}


def test_arithmetic_over_names_is_undecodable():
    assert decode_prompting("[f(x=1+1)]").calls == [{"f": {"x": 2}}]
    assert not decode_prompting("[f(x=len('ab')+1)]").ok  # BFCL's eval would give 3


def test_hermes_reader_needs_exact_newlines_and_skips_bad_blocks():
    ok = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    assert decode_hermes_fc(ok).calls == [{"f": {"a": 1}}]
    assert decode_hermes_fc(ok.replace("\n", "")).calls == []
    assert decode_hermes_fc(ok + "\n<tool_call>\n{bad}\n</tool_call>").calls == [{"f": {"a": 1}}]
    assert not decode_hermes_fc('<tool_call>\n{"name": "f"}\n</tool_call>').ok


def test_other_families_are_read_from_the_parsers_calls():
    assert decode_listed([{"name": "f", "arguments": {"a": 1}}]).calls == [{"f": {"a": 1}}]
    assert not decode_listed([{"name": "f", "arguments": "a=1"}]).ok
    assert not decode_listed(None).ok


@pytest.mark.parametrize("text,called", [("[]", False), ("", False), ("no", False), ("[f()]", True), ("f(a=1)", True)],
                         ids=["empty list", "empty text", "prose", "call without arguments", "bare call"])
def test_a_call_is_what_decodes_to_a_non_empty_list(text, called):
    assert has_call(decode_prompting(text)) is called


CASE = PROBES["cases"]["chat"]


@pytest.mark.parametrize("failure,output,correct", [
    ("too_long", None, True), ("engine_error", None, True), ("missing", None, False), ("length", "[weather.get(ci", True),
    ("empty_output", "", True),
], ids=["too long: BFCL grades its error text", "engine error likewise", "a missing replay is wrong",
        "a cut answer is graded on its text", "an empty answer is no call"])
def test_failed_rows_are_graded_as_bfcl_grades_them(failure, output, correct):
    assert grade("official", probe_row(CASE, output, False, failure))["correct"] is correct


def test_summary_is_unweighted_for_non_live_weighted_for_live_and_none_across():
    def codes(pairs):
        return np.array([CODES[c] for c, n in pairs for _ in range(n)], dtype=float)

    non_live = [("simple_python", 4), ("multiple", 1)]
    correct = np.array([1, 1, 1, 1, 0], dtype=float)
    assert _summary(correct, codes(non_live)) == pytest.approx(0.5)   # mean of 1.0 and 0.0
    live = [("live_simple", 4), ("live_multiple", 1)]
    assert _summary(correct, codes(live)) == pytest.approx(0.8)       # 4 of 5
    assert _summary(correct, codes([("simple_python", 4), ("live_simple", 1)])) is None


def test_leaderboard_figures_follow_bfcls_table():
    scores = {"simple_python": (0.9, 400), "multiple": (0.8, 200), "parallel": (0.7, 200),
              "parallel_multiple": (0.6, 200), "irrelevance": (0.5, 240), "live_simple": (0.4, 258),
              "live_multiple": (0.3, 1053), "live_parallel": (0.2, 16), "live_parallel_multiple": (0.1, 24),
              "live_irrelevance": (0.6, 884), "live_relevance": (0.75, 16)}
    figures = leaderboard_figures(scores)
    assert figures["non_live_simple"] is None and figures["non_live_ast_summary"] is None  # Java/JS absent
    assert figures["non_live_overall"] == pytest.approx((0.9 / 3 + 0.8 + 0.7 + 0.6) / 4)
    live = (0.4 * 258 + 0.3 * 1053 + 0.2 * 16 + 0.1 * 24) / 1351
    assert figures["live_ast_summary"] == figures["live_overall"] == pytest.approx(live)
    assert figures["irrelevance"] == pytest.approx(0.55) and figures["relevance"] == 0.75
    assert figures["multi_turn_overall"] == 0.0
    assert figures["overall"] == pytest.approx((figures["non_live_overall"] + live + 0.55) / 10)


def test_multi_turn_figures_are_the_unweighted_mean_of_the_four_categories():
    """BFCL's Multi-turn overall (and toolsweep's pooled `multi_turn` row): the four categories'
    unweighted mean, 30% of Overall Acc."""
    multi = {"multi_turn_base": (0.4, 200), "multi_turn_miss_func": (0.2, 200), "multi_turn_miss_param": (0.1, 200),
             "multi_turn_long_context": (0.3, 200)}
    figures = leaderboard_figures(multi)
    assert figures["multi_turn_overall"] == pytest.approx(0.25)
    assert figures["overall"] == pytest.approx(0.3 * 0.25)
    codes = np.array([CODES["multi_turn_base"]] * 4 + [CODES["multi_turn_miss_func"]], dtype=float)
    correct = np.array([1, 1, 1, 1, 0], dtype=float)
    assert _summary(correct, codes) == pytest.approx(0.5)  # (1.0 + 0.0) / 2, not 4/5
