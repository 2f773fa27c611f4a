"""ACEBench's reading and normal checker (grading/scorers/acebench/checker.py) against the verdicts of
ACEBench's own evaluation, and the scorer's rows.

`data/acebench_probes.json` holds answers written to probe one rule each, on cases of our own
writing; its `upstream` verdicts were produced by ACEBench's own `normal_single_turn_eval` at the
commit the file records (scripts/acebench_reference_verdicts.py, run outside toolsweep).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from grading.grades import grade as grade_table
from grading.scorers.acebench.checker import CRASH, decode, grade_answer
from grading.scorers.acebench import NO_ANSWER, SCORER, grade
from tests.grading.child_process import read_in_child, run_in_child

PROBES = json.loads((Path(__file__).parent / "data" / "acebench_probes.json").read_text(encoding="utf-8"))


def test_probe_file_was_made_by_acebench_at_a_known_commit():
    assert len(PROBES["upstream_commit"]) == 40 and len(PROBES["probes"]) >= 40
    verdicts = [p["upstream"]["valid"] for p in PROBES["probes"]]
    assert verdicts.count(True) >= 20 and verdicts.count(False) >= 20, "the probes must cut both ways"


@pytest.mark.parametrize("probe", PROBES["probes"], ids=[p["id"] for p in PROBES["probes"]])
def test_verdict_equals_acebench(probe):
    """One rule of ACEBench's reading or checker (the probe's `why`): toolsweep's verdict and error
    class are ACEBench's; where ACEBench's checker raises, toolsweep grades the answer wrong."""
    case, upstream = PROBES["cases"][probe["case"]], probe["upstream"]
    verdict = grade_answer(probe["output"], case["functions"], case["ground_truth"])
    if upstream["valid"] is None:
        expected = (False, CRASH)
    else:
        expected = (upstream["valid"], None if upstream["valid"] else upstream["error_type"])
    assert (verdict.correct, verdict.error_type) == expected, probe["why"]


CASE = PROBES["cases"]["hotel"]
GOOD = "[bookHotel(city='New York', checkIn='2024-07-01')]"


def _row(output, **extra):
    return {"output": output, "failure": None, "prompt_format": "benchmark", "calls": None,
            "functions": json.dumps(CASE["functions"]), "ground_truth": json.dumps(CASE["ground_truth"]), **extra}


@pytest.mark.parametrize("reading,output,correct,error", [
    ("official", GOOD, True, None),
    ("official", f"```python\n{GOOD}\n```", False, "wrong_output_format"),
    ("extracted", f"```python\n{GOOD}\n```", True, None),
    ("extracted", f"Here you go: {GOOD} Anything else?", True, None),
    ("extracted", "no list at all", False, "wrong_output_format"),
    ("official", None, False, NO_ANSWER),
], ids=["official-plain", "official-fenced", "extracted-fenced", "extracted-prose", "extracted-none", "no-text"])
def test_readings(reading, output, correct, error):
    fields = grade(reading, _row(output))
    assert (fields["correct"], fields["error_type"]) == (correct, error)
    assert fields["valid"] == (error not in ("wrong_output_format", NO_ANSWER))
    assert set(fields) == set(SCORER.fields)


def test_a_failed_generation_with_text_is_read_as_acebench_reads_any_text():
    """ACEBench grades whatever text came back: an answer cut at max_new_tokens after the list
    (trailing whitespace) still reads; one cut inside the list does not."""
    assert grade("official", _row(GOOD + "   \n  ", failure="length"))["correct"]
    assert grade("official", _row(GOOD[:-5], failure="length"))["error_type"] == "wrong_output_format"


def test_native_calls_are_checked_like_decoded_ones():
    calls = json.dumps([{"name": "bookHotel", "arguments": {"city": "New York City", "checkIn": "2024-07-01"}}])
    fields = grade("official", _row("<tool_call>...</tool_call>", prompt_format="native", calls=calls))
    assert fields["correct"] and fields["tool"] == "bookHotel" and fields["n_calls"] == 1
    prose = grade("official", _row("I cannot do that.", prompt_format="native", calls="[]"))
    assert (prose["correct"], prose["error_type"]) == (False, "wrong_output_format")


def test_grade_fields_hold_the_first_call():
    fields = grade("official", _row("[bookHotel(city='New York', checkIn='2024-07-01', guests=10**5000)]"))
    assert fields["tool"] == "bookHotel" and fields["correct"]
    assert "too large to write" in fields["params"], "a value no text form holds is named, never a crash"


BOUND = "toolsweep's bound"
"""The reason the reader gives for a value or an answer past its bounds."""
HOSTILE = [
    pytest.param("[f(x=(9**99999)**99999)]", BOUND, id="nested power (a power of a 317,000-bit value)"),
    pytest.param("[f(x=9**9**9)]", BOUND, id="power tower"),
    pytest.param("[f(x=2**(2**200))]", BOUND, id="power with a computed exponent"),
    pytest.param("[f(x=" + "*".join(["9**9999"] * 40) + ")]", BOUND, id="multiplication chain (1.3 million bits)"),
    pytest.param("[f(x=1" + "<<9999" * 200 + ")]", BOUND, id="shift chain (2 million bits)"),
    pytest.param("[f(x=1+-((9**99999)**99999))]", BOUND, id="unary operator on a nested power"),
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
def test_a_hostile_answer_cannot_be_read(text, reason):
    """ACEBench `eval`s arithmetic; toolsweep computes literals only, each value and the answer within
    bounds, so no answer holds the grader longer than a bounded time (the child's limit catches a
    reader that hangs), and a value nested too deep is unreadable, as ACEBench counts any exception."""
    outcome = read_in_child("grading.scorers.acebench.checker:decode", text)
    assert outcome["raised"] == "Undecodable", outcome
    assert reason is None or reason in outcome["error"], outcome


@pytest.mark.parametrize("text,value", [
    ("[f(x=2**10)]", 1024), ("[f(x='ab'*3)]", "ababab"), ("[f(x=[0]*3+[1])]", [0, 0, 0, 1]),
    ("[f(x=1+-(2**10))]", -1023), ("[f(x=7//2+1.5)]", 4.5), ("[f(x='%s-%d'%('a',1))]", "a-1"),
    ("[f(x=10**5000)]", 10**5000), ("[f(x=2**99999)]", 2**99999), ("[f(x='a'*1000000)]", "a" * 1_000_000),
], ids=["power", "string repetition", "list repetition and sum", "unary in arithmetic", "floor division and float",
        "string format", "16,610-bit power", "the largest integer (100,000 bits)",
        "a million characters (the whole budget)"])
def test_arithmetic_under_the_bounds_reads_as_acebenchs_eval(text, value):
    assert decode(text) == [{"f": {"x": value}}]


def _samples(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame([{"sample_id": f"s{i}", "setting": "normal_preference", "scorer": "acebench", **row}
                         for i, row in enumerate(rows)], infer_schema_length=None)


def test_a_file_with_hostile_answers_grades_and_the_others_grade_as_without_them(tmp_path):
    """`toolsweep grade` of a run holding hostile answers among the probe answers finishes; each
    hostile answer is wrong (`wrong_output_format`) under both readings; every other answer is
    graded as in the same file without them."""
    def row(case, output):
        return _row(output, functions=json.dumps(case["functions"]), ground_truth=json.dumps(case["ground_truth"]))

    normal = [row(PROBES["cases"][p["case"]], p["output"]) for p in PROBES["probes"]]
    hostile = [row(CASE, h.values[0]) for h in HOSTILE]
    run = tmp_path / "run"
    run.mkdir()
    _samples(normal + hostile).write_parquet(run / "samples.parquet")
    run_in_child(f"from grading.regrade import main\nraise SystemExit(main([{str(run)!r}]))", limit_s=300)
    graded = pl.read_parquet(run / "samples.parquet").sort("sample_id")
    columns = [f"{reading}_{name}" for reading in SCORER.readings for name in SCORER.fields]
    alone = grade_table(_samples(normal)).sort("sample_id")
    assert graded.filter(pl.col("sample_id").is_in(alone["sample_id"].to_list())).select("sample_id", *columns) \
        .equals(alone.select("sample_id", *columns))
    bad = graded.filter(~pl.col("sample_id").is_in(alone["sample_id"].to_list()))
    assert bad.height == len(hostile)
    for reading in SCORER.readings:
        assert set(zip(bad[f"{reading}_correct"], bad[f"{reading}_error_type"])) == {(False, "wrong_output_format")}
