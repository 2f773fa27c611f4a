"""ACEBench's reading and normal checker (grading/scorers/acebench/checker.py) against the verdicts of
ACEBench's own evaluation, and the scorer's rows.

`data/acebench_probes.json` holds answers written to probe one rule each, on cases of our own
writing; its `upstream` verdicts were produced by ACEBench's own `normal_single_turn_eval` at the
commit the file records (scripts/acebench_reference_verdicts.py, run outside toolsweep).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grading.scorers.acebench.checker import CRASH, grade_answer
from grading.scorers.acebench import NO_ANSWER, SCORER, grade

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
