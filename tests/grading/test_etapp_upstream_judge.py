"""The judge as upstream runs it: its template filled as its evaluator fills it, and a free
answer read as its evaluator reads it (grading/scorers/etapp_judge/upstream.py), one case per quirk."""

from __future__ import annotations

import json

import pytest

from grading.scorers.etapp_judge import rubric as jt, upstream

PERSONAL, PROACTIVE = ["likes tea", "likes tea", "early riser"], ["offer a reminder"]
TEMPLATE = "Rate it.\n```json\n{output_format}\n```\nQuery: {query}\nProfile: {profile}\nSolution: {output}\n{{literal}}"


def _answer(finals=(4, 3, 2), points=2, fence="```json", extra: str = "") -> str:
    unique_personal, unique_proactive = jt.keypoints(PERSONAL, PROACTIVE)
    body = {"Procedure": {"Keypoints for Procedure": {k: {"analysis": "ok", "score": points} for k in jt.PROCEDURE_KEYS},
                          "Final Assessment": {"anlysis": "ok__", "score": finals[0]}},
            "Personalization": {"Keypoints for Personalization": {k: {"analysis": "", "score": points}
                                                                  for k in unique_personal},
                                "Final Assessment": {"analysis": "", "score": finals[1]}},
            "Proactivity": {"Keypoints for Proactivity": {k: {"analysis": "", "score": points} for k in unique_proactive},
                            "Final Assessment": {"Analysis": "", "score": finals[2]}}}
    # `extra` goes into the JSON text as written (raw escapes included)
    text = json.dumps(body, indent=2).replace('"ok__"', '"ok' + extra + '"')
    return f"Here is my analysis.\n{fence}\n{text}\n```\nThanks."


def _read(text: str):
    return upstream.read_upstream_answer(text, *jt.keypoints(PERSONAL, PROACTIVE))


@pytest.mark.parametrize("text, scores", [
    (_answer(), (4, 3, 2)),  # the usual answer: prose around one ```json block
    (_answer(finals=(4.9, 3.0, 0.2)), (4, 3, 0)),  # int() truncates a float score, as upstream's cast does
    (_answer(finals=("4", " 3 ", "+2")), (4, 3, 2)),  # int() of a numeric string
    (_answer(finals=(True, 3, 2)), (1, 3, 2)),  # int(True) is 1
    (_answer(extra="line\\nbreak"), (4, 3, 2)),  # an escaped newline survives the backslash doubling (as a literal \n)
    (_answer(extra='say \\"hi\\"'), (4, 3, 2)),  # so does an escaped quote: the second replace mends it
    (_answer(extra="C:\\path \\d"), (4, 3, 2)),  # an invalid escape, which strict JSON refuses, passes
], ids=["fenced", "float-truncated", "numeric-string", "bool", "escaped-newline", "escaped-quote", "invalid-escape"])
def test_readable_answers_give_upstreams_scores(text, scores):
    judgement = _read(text)
    assert not isinstance(judgement, str), judgement
    assert (judgement.procedure, judgement.personalization, judgement.proactivity) == scores


@pytest.mark.parametrize("text, reason", [
    (_answer(fence="```"), "no ```json block"),  # a bare ``` fence: upstream's pattern needs ```json
    (_answer(fence="```JSON"), "no ```json block"),  # case-sensitive, as upstream's regex
    (json.dumps({"Procedure": {}}), "no ```json block"),  # bare JSON, which the guided reader would take
    (_answer(extra="ends with a backslash\\\\"), "not JSON after upstream's backslash doubling"),  # breaks the string
    (_answer(finals=("4.5", 3, 2)), "does not read through int()"),  # upstream's int("4.5") raised
    (_answer(finals=(None, 3, 2)), "does not read through int()"),
    (_answer(finals=(7, 3, 2)), "must be from 0 to 5"),  # refused here; upstream would add 7 to its sum
    ("```json\n{\"Procedure\": {\"Final Assessment\": {\"score\": 4}}}\n```", "lacks 'Personalization'"),
], ids=["bare-fence", "upper-case-fence", "no-fence", "escaped-backslash-at-end", "decimal-string", "null", "out-of-range",
        "missing-dimension"])
def test_unreadable_answers_say_why(text, reason):
    judgement = _read(text)
    assert isinstance(judgement, str) and reason in judgement, judgement


def test_key_points_are_kept_where_readable_and_never_required():
    """Upstream reads only the three Final Assessments; a missing or odd key-point score costs
    nothing but that point."""
    text = _answer(points="2").replace('"score": "2"', '"score": "x"', 1)
    judgement = _read(text)
    assert not isinstance(judgement, str)
    assert "Completeness" not in judgement.procedure_points and len(judgement.procedure_points) == 3
    assert judgement.personal_points == {"likes tea": 2, "early riser": 2}


def test_the_template_is_filled_with_upstreams_arguments():
    skeleton = upstream.upstream_skeleton(*jt.keypoints(PERSONAL, PROACTIVE), None)
    preferences = [{"calendar": {"a": 1}}]
    prompt = upstream.upstream_judge_prompt(TEMPLATE, skeleton, "Plan my day", {"Name": "Ann"}, preferences,
                                      "{'role': 'assistant'}", PERSONAL, PROACTIVE)
    assert prompt == ("Rate it.\n```json\n" + json.dumps(skeleton, indent=4) + "\n```\nQuery: Plan my day\n"
                      'Profile: {"Name": "Ann"}\n' + "[{'calendar': {'a': 1}}]\nSolution: {'role': 'assistant'}\n{literal}")
    # duplicated key points collapse into one key, as upstream's dict assignment collapses them
    assert list(skeleton["Personalization"]["Keypoints for Personalization"]) == ["likes tea", "early riser"]


def test_a_placeholder_upstreams_evaluator_does_not_fill_is_named():
    with pytest.raises(jt.GradingError, match="placeholder.*'user_name'"):
        upstream.upstream_judge_prompt("{user_name}", {}, "q", {}, [], "", [], [])
