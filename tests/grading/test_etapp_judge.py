"""ETAPP's judge (schema, prompt, trajectory rendering, answer reading) and its scorer, graded
and summarized by the real grading pipeline."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import polars as pl
import pytest

from grading.scorers.etapp_judge.rubric import (ANALYSIS_KEY, PROCEDURE_KEYS, Judgement, analysis_count,
                                                analysis_pattern, answer_skeletons, fitting_analysis_chars,
                                                skeleton_bytes, judge_prompt, judge_schema, judge_template, keypoints,
                                                parse_judgement, preferences_for, render_trajectory)
from grading.errors import GradingError
from grading.grades import grade
from grading.metrics import summarize
from grading.report import write_samples
from grading.scoring import get_scorer
from tests.conftest import SHARED_DATA
from tests.grading.conftest import etapp_case, etapp_points, etapp_table

PERSONAL = ["Use the user's favourite genre.", "Mention the gym schedule.", "Use the user's favourite genre."]
PROACTIVE = ["Check the weather first.", "Offer to set an alarm."]


@pytest.fixture(scope="session")
def etapp_dir() -> Path:
    """The real ETAPP folder; tests that need it skip, saying so, where it is absent."""
    folder = SHARED_DATA / "etapp"
    if not (folder / "SOURCE.md").is_file():
        pytest.skip(f"etapp data absent: {folder} not found (it lives in ../shared/data)")
    return folder


def _instruction(folder: Path, index: int) -> dict:
    return json.loads((folder / "data" / "instruction" / "instruction.json").read_text(encoding="utf-8"))[index]


def _filled(personal=PERSONAL, proactive=PROACTIVE, finals=(4, 3, 2), point=2) -> dict:
    """A judge answer filling every key of the template."""
    unique_personal, unique_proactive = keypoints(personal, proactive)
    points = {"Procedure": PROCEDURE_KEYS, "Personalization": unique_personal, "Proactivity": unique_proactive}
    return {dim: {f"Keypoints for {dim}": {p: {"analysis": "ok", "score": point} for p in points[dim]},
                  "Final Assessment": {ANALYSIS_KEY[dim]: "overall", "score": final}}
            for dim, final in zip(points, finals)}


def _keys(node: dict) -> list:
    """The nested key layout of a template (dicts only), for comparing with the schema's."""
    return [(k, _keys(v)) for k, v in node.items() if isinstance(v, dict)]


def _schema_keys(schema: dict) -> list:
    return [(k, _schema_keys(v)) for k, v in schema.get("properties", {}).items() if v.get("type") == "object"]


# ----------------------------------------------------------------------------------------- schema


@pytest.mark.shared_data
def test_schema_of_instruction_18_has_five_proactive_keys_in_order(etapp_dir):
    """Instruction 18 repeats a proactive key point: 6 listed, 5 keys, first appearance kept."""
    case = _instruction(etapp_dir, 18)
    schema = judge_schema(case["keypoint for personal"], case["keypoint for proactive"], 600)
    assert list(schema["properties"]) == ["Procedure", "Personalization", "Proactivity"]
    proactive = schema["properties"]["Proactivity"]["properties"]["Keypoints for Proactivity"]
    assert len(case["keypoint for proactive"]) == 6
    assert list(proactive["properties"]) == list(dict.fromkeys(case["keypoint for proactive"]))
    assert len(proactive["properties"]) == 5 and proactive["required"] == list(proactive["properties"])
    procedure = schema["properties"]["Procedure"]["properties"]
    assert list(procedure) == ["Keypoints for Procedure", "Final Assessment"]
    assert list(procedure["Keypoints for Procedure"]["properties"]) == list(PROCEDURE_KEYS)


def _objects(schema: dict):
    yield schema
    for child in schema.get("properties", {}).values():
        if child.get("type") == "object":
            yield from _objects(child)


def test_schema_is_closed_required_and_typed():
    schema = judge_schema(PERSONAL, PROACTIVE, 300)
    jsonschema.Draft202012Validator.check_schema(schema)
    for node in _objects(schema):
        assert node["additionalProperties"] is False and node["required"] == list(node["properties"])
    final = schema["properties"]["Procedure"]["properties"]["Final Assessment"]["properties"]
    assert list(final) == ["anlysis", "score"], "analysis before score, upstream's spelling"
    assert final["score"] == {"type": "integer", "enum": [0, 1, 2, 3, 4, 5]}
    assert final["anlysis"] == {"type": "string", "pattern": analysis_pattern(300)}
    point = schema["properties"]["Personalization"]["properties"]["Keypoints for Personalization"]
    assert list(point["properties"]) == PERSONAL[:2], "the duplicate collapsed"
    assert point["properties"][PERSONAL[0]]["properties"]["score"]["enum"] == [0, 1, 2]
    finals = [schema["properties"][d]["properties"]["Final Assessment"]["properties"] for d in ANALYSIS_KEY]
    assert [list(f)[0] for f in finals] == ["anlysis", "analysis", "Analysis"]


def test_a_filled_answer_validates_and_bad_ones_do_not():
    validator = jsonschema.Draft202012Validator(judge_schema(PERSONAL, PROACTIVE, 600))
    assert list(validator.iter_errors(_filled())) == []
    assert list(validator.iter_errors(_filled(point=3))), "a key-point score above 2"
    extra = _filled()
    extra["Proactivity"]["Keypoints for Proactivity"]["Invented point"] = {"analysis": "", "score": 1}
    assert list(validator.iter_errors(extra)), "a key point the template lacks"
    long = _filled()
    long["Procedure"]["Final Assessment"]["anlysis"] = "x" * 601
    assert list(validator.iter_errors(long)), "an analysis over the cap"


@pytest.mark.parametrize("cap", [1, 127, 128, 129, 200, 256, 257, 300])
def test_the_analysis_pattern_allows_every_length_up_to_its_cap_and_no_escape(cap):
    """Runs of at most 128 (xgrammar's largest compilable repetition) still reach every length."""
    pattern = analysis_pattern(cap)
    assert [n for n in range(cap + 2) if re.fullmatch(pattern, "a" * n)] == list(range(cap + 1))
    for bad in ('"', "\\", "\n", "\u00e9", "\u2019"):
        assert not re.fullmatch(pattern, bad), f"{bad!r} would need an escape or more than one byte"
    prose = "Calls get_weather(): 3 of 4 points, ok; [x] {y} ~!"
    assert re.fullmatch(pattern, (prose * 10)[:cap]) is not None


def test_the_longest_guided_answer_is_the_skeleton_plus_every_analysis_at_its_cap():
    """Bytes of the longest answer the schema admits: the fitting cap keeps it within the budget
    (one analysis byte is at most one token)."""
    raw, escaped = answer_skeletons(PERSONAL, PROACTIVE)
    assert json.loads(raw) == json.loads(escaped) and len(escaped) >= len(raw)
    count = analysis_count(PERSONAL, PROACTIVE)
    assert count == (len(PROCEDURE_KEYS) + 1) + (2 + 1) + (2 + 1), "one per unique key point and one per dimension"
    assert skeleton_bytes(PERSONAL, PROACTIVE) == len(escaped.encode())
    cap = fitting_analysis_chars(PERSONAL, PROACTIVE, 1000, 300)
    assert cap == min(300, (1000 - len(escaped) - 1) // count)
    longest = raw.replace('"analysis":""', '"analysis":"' + "~" * cap + '"').replace(
        '"anlysis":""', '"anlysis":"' + "~" * cap + '"').replace('"Analysis":""', '"Analysis":"' + "~" * cap + '"')
    assert len(longest.encode()) == len(raw) + count * cap <= 1000 - 1
    assert jsonschema.Draft202012Validator(judge_schema(PERSONAL, PROACTIVE, cap)).is_valid(
        json.loads(longest.replace(":0}", ":2}")))
    assert fitting_analysis_chars(PERSONAL, PROACTIVE, 50, 300) == 0, "not even empty analyses fit"


@pytest.mark.parametrize("chars", [0, -5, 2.5, True, "600"])
def test_schema_rejects_a_bad_analysis_cap(chars):
    with pytest.raises(GradingError, match="analysis_chars must be a positive integer"):
        judge_schema(PERSONAL, PROACTIVE, chars)


def test_template_has_the_schemas_keys():
    assert _keys(judge_template(PERSONAL, PROACTIVE)) == _schema_keys(judge_schema(PERSONAL, PROACTIVE, 600))


# ----------------------------------------------------------------------------------------- prompt


def test_prompt_puts_skeleton_then_query_profile_solution_then_instructions():
    profile = {"DemographicData": {"Name": "Ana"}}
    prefs = [{"Music": "jazz"}]
    prompt = judge_prompt("Play something.", profile, prefs, "<TRAJECTORY>", PERSONAL, PROACTIVE)
    skeleton = json.dumps(judge_template(PERSONAL, PROACTIVE), indent=4)
    profile_block = json.dumps(profile) + "\n" + repr(prefs)
    parts = (skeleton, "Play something.", profile_block, "<TRAJECTORY>", "counts as an invalid call")
    places = [prompt.index(s) for s in parts]
    assert places == sorted(places)
    assert prompt.count(PERSONAL[0]) == 1, "key points reach the judge only as skeleton keys"
    assert "```json" in prompt[places[-1]:]


@pytest.mark.shared_data
def test_prompt_for_instruction_18_lists_each_key_point_once(etapp_dir):
    case = _instruction(etapp_dir, 18)
    profiles = json.loads((etapp_dir / "profile" / "profiles.json").read_text(encoding="utf-8"))
    prompt = judge_prompt(case["query"], profiles["John Doe"], [], "", case["keypoint for personal"],
                          case["keypoint for proactive"])
    repeated = case["keypoint for proactive"][0]
    assert prompt.count(json.dumps(repeated)) == 1
    assert all(json.dumps(k) in prompt for k in PROCEDURE_KEYS)


# ------------------------------------------------------------------------------------- trajectory

SYSTEM = {"role": "system", "content": "You are a personal assistant."}
QUERY = {"role": "user", "content": "What's the weather?"}
WEATHER = {"role": "tool", "content": '{"temp_c": 21}'}


def _call(name, arguments, content=""):
    return {"role": "assistant", "content": content, "tool_calls": [{"name": name, "arguments": arguments}]}


def _lines(*messages) -> str:
    return "\n".join(str(m) for m in messages)


FC = [SYSTEM, QUERY, _call("get_today_weather", '{"location": "Paris"}'), WEATHER, _call("finish", "Sunny, 21C.")]
REACT = [SYSTEM, QUERY, _call("get_today_weather", "{'location': 'Paris'}", "I should check the weather"),
         {"role": "assistant", "content": "Action: weather(", "tool_calls": []},
         {"role": "user", "content": "Your output format does not match."}, WEATHER,
         _call("finish", "Sunny, 21C.", "I now know the final answer")]
E_REACT = [SYSTEM, QUERY, {"role": "assistant", "content": "{plan}", "tool_calls": []},
           {"role": "user", "content": "Now execute the plan."}, *REACT[2:]]

# What the judge sees of REACT (and of E_REACT, whose first four messages are dropped).
REACT_SEEN = _lines(REACT[2], {"role": "assistant", "content": "Action: weather(", "tool_calls": None}, REACT[4],
                    WEATHER, {"role": "assistant", "content": "I now know the final answer\nSunny, 21C.",
                              "tool_calls": None})

RENDER_CASES = [
    ("fc", FC, "fc",
     _lines(FC[2], WEATHER, {"role": "assistant", "content": "\nSunny, 21C.", "tool_calls": None}),
     "system and query dropped; the FC final reads '\\n<answer>'"),
    ("react", REACT, "react", REACT_SEEN,
     "an empty tool_calls becomes None; the ReAct final joins thought and answer"),
    ("e_react", E_REACT, "e_react", REACT_SEEN, "E-ReAct also drops its plan turn and execution prompt"),
    ("dict_finish", [SYSTEM, QUERY, {"role": "assistant", "content": "Done",
                                     "tool_calls": {"name": "finish", "arguments": "ok"}}], "fc",
     _lines({"role": "assistant", "content": "Done\nok", "tool_calls": None}), "a single finish dict is folded too"),
    ("finish_is_case_sensitive", [SYSTEM, QUERY, _call("Finish", "ok")], "fc", _lines(_call("Finish", "ok")),
     "only a call named exactly 'finish' is the answer"),
    ("no_tool_calls_key", [SYSTEM, QUERY, {"role": "assistant", "content": "Cannot solve this task."}], "fc",
     _lines({"role": "assistant", "content": "Cannot solve this task."}), "kept as is"),
]


@pytest.mark.parametrize("messages,method,expected,why", [c[1:] for c in RENDER_CASES],
                         ids=[c[0] for c in RENDER_CASES])
def test_render_trajectory(messages, method, expected, why):
    before = copy.deepcopy(messages)
    assert render_trajectory(messages, method) == expected, why
    assert messages == before, "the caller's messages are left as they were"


def test_render_finals_read_as_the_spec_says():
    assert "'content': 'I now know the final answer\\nSunny, 21C.'" in render_trajectory(REACT, "react")
    assert "'content': '\\nSunny, 21C.'" in render_trajectory(FC, "fc")


def test_render_rejects_an_unknown_method_and_a_non_finish_dict():
    with pytest.raises(GradingError, match=r"method must be one of \['fc', 'react', 'e_react'\], got 'e-react'"):
        render_trajectory(FC, "e-react")
    with pytest.raises(GradingError, match="must be the 'finish' call"):
        render_trajectory([SYSTEM, QUERY, {"role": "assistant", "content": "",
                                           "tool_calls": {"name": "search", "arguments": "{}"}}], "fc")


# ---------------------------------------------------------------------------------------- parsing


def _text(answer: dict, fenced: bool = True) -> str:
    body = json.dumps(answer, indent=2)
    return f"Here is my grading.\n```json\n{body}\n```\nThanks." if fenced else body


def _with(path: tuple, value) -> dict:
    answer = _filled()
    node = answer
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return answer


def _without(path: tuple) -> dict:
    answer = _filled()
    node = answer
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return answer


PARSE_OK = [
    ("fenced", _text(_filled()), (4, 3, 2), "a ```json block amid prose"),
    ("bare", _text(_filled(), fenced=False), (4, 3, 2), "guided decoding gives bare JSON"),
    ("string_score", _text(_with(("Procedure", "Final Assessment", "score"), "5")), (5, 3, 2),
     "upstream int()s the score"),
    ("float_score", _text(_with(("Proactivity", "Final Assessment", "score"), 4.0)), (4, 3, 4),
     "an integer-valued float"),
    ("other_analysis_spelling", _text(_without(("Procedure", "Final Assessment", "anlysis"))), (4, 3, 2),
     "only scores are read, as upstream"),
]


@pytest.mark.parametrize("text,finals,why", [c[1:] for c in PARSE_OK], ids=[c[0] for c in PARSE_OK])
def test_parse_reads_the_scores(text, finals, why):
    got = parse_judgement(text, PERSONAL, PROACTIVE)
    assert isinstance(got, Judgement), got
    assert (got.procedure, got.personalization, got.proactivity) == finals, why


def test_parse_keeps_the_key_point_scores():
    answer = _with(("Personalization", "Keypoints for Personalization", PERSONAL[1], "score"), "1")
    got = parse_judgement(_text(answer), PERSONAL, PROACTIVE)
    assert got.keypoint_scores() == {"personal": {PERSONAL[0]: 2, PERSONAL[1]: 1},
                                     "proactive": {p: 2 for p in PROACTIVE},
                                     "procedure": {p: 2 for p in PROCEDURE_KEYS}}


PARSE_BAD = [
    ("half_score", _text(_with(("Procedure", "Final Assessment", "score"), "4.5")),
     "judge score at 'Procedure' > 'Final Assessment' > 'score' must be an integer from 0 to 5, got '4.5'",
     "'4.5' crashed upstream; here it is an unreadable answer"),
    ("above_five", _text(_with(("Personalization", "Final Assessment", "score"), 6)),
     "'Personalization' > 'Final Assessment' > 'score' must be an integer from 0 to 5, got 6", "out of range"),
    ("key_point_above_two", _text(_with(("Proactivity", "Keypoints for Proactivity", PROACTIVE[0], "score"), 3)),
     f"'Keypoints for Proactivity' > {PROACTIVE[0]!r} > 'score' must be an integer from 0 to 2, got 3",
     "key points score 0-2"),
    ("negative", _text(_with(("Procedure", "Final Assessment", "score"), -1)), "from 0 to 5, got -1", "out of range"),
    ("boolean", _text(_with(("Procedure", "Final Assessment", "score"), True)), "from 0 to 5, got True",
     "a boolean is no score"),
    ("missing_final", _text(_without(("Proactivity", "Final Assessment"))),
     "judge answer lacks 'Proactivity' > 'Final Assessment'", "the key is named"),
    ("missing_key_point", _text(_without(("Personalization", "Keypoints for Personalization", PERSONAL[1]))),
     f"judge answer lacks 'Personalization' > 'Keypoints for Personalization' > {PERSONAL[1]!r}",
     "every key point must be scored"),
    ("missing_procedure_point", _text(_without(("Procedure", "Keypoints for Procedure", "Call the tool accurate"))),
     "lacks 'Procedure' > 'Keypoints for Procedure' > 'Call the tool accurate'", "upstream's spelling"),
    ("not_an_object", _text(_with(("Procedure", "Final Assessment"), 4)),
     "judge answer at 'Procedure' > 'Final Assessment' must be an object, got 4", "a bare score"),
    ("not_json", "I think the answer is good. Score: 4", "judge answer is not JSON", "prose only"),
    ("broken_fence", "```json\n{\"Procedure\": \n```", "judge answer is not JSON", "a cut-off answer"),
    ("top_level_list", "[1, 2]", "judge answer at the top must be an object", "not the template"),
]


@pytest.mark.parametrize("text,message,why", [c[1:] for c in PARSE_BAD], ids=[c[0] for c in PARSE_BAD])
def test_parse_says_what_is_wrong(text, message, why):
    got = parse_judgement(text, PERSONAL, PROACTIVE)
    assert isinstance(got, str), why
    assert message in got, got


# ------------------------------------------------------------------------------------ preferences

TOOL_DOMAIN = {"get_today_weather": None, "view_today_alarms": "calendar", "view_today_events_in_calendar": "calendar",
               "get_current_health_and_mood_status": "health", "play_music": "music", "search_tools": None,
               "send_email": "email"}
PROFILE = {d: {"domain": d} for d in ("calendar", "email", "health", "music", "shopping")}


def test_preferences_follow_listed_then_called_tools_once_each():
    got = preferences_for(["get_today_weather", "view_today_alarms", "get_current_health_and_mood_status",
                           "view_today_events_in_calendar"],
                          ["play_music", "view_today_alarms", "no_such_tool", "search_tools", "send_email"],
                          PROFILE, TOOL_DOMAIN)
    assert [p["domain"] for p in got] == ["calendar", "health", "music", "email"]
    assert preferences_for(["get_today_weather"], [], PROFILE, TOOL_DOMAIN) == []


def test_preferences_name_a_domain_the_profile_lacks():
    with pytest.raises(GradingError, match=r"no domains \['navigation'\]"):
        preferences_for(["find_accommodations"], [], PROFILE, {"find_accommodations": "navigation"})


# ---------------------------------------------------------------------------------------- scorer

SCORER = get_scorer("etapp_judge")


TABLE = etapp_table([
    etapp_case("tg-0", "tool_given/fc", (4, 3, 2), etapp_points([2, 1], [0, 2]), (3, 4, 3, 1, 0), "finish",
               ["t1", "t2", "t1"], ["t1", "t3"]),
    etapp_case("tg-1", "tool_given/fc", (2, 5, 4), etapp_points([2, 2], [2, 2]), (5, 2, 2, 0, 2), "turn_cap",
               ["t1"], ["t1"]),
    etapp_case("tg-2", "tool_given/fc", None, None, (1, 0, 0, 0, 1), "too_long", ["t2"], [],
               error="judge answer is not JSON", clean=False),
    etapp_case("r-0", "retrieval/fc", (3, 3, 3), etapp_points([1], [1, 1]), (4, 2, 1, 1, 0), "finish",
               ["search_tools", "get_tool_doc"], ["search_tools"]),
])


def _metrics(table: pl.DataFrame, setting: str) -> dict:
    return summarize(grade(table)).filter(setting=setting, parser="judge").row(0, named=True)


def test_scorer_grades_each_case():
    graded = grade(TABLE)
    rows = {r["sample_id"]: r for r in graded.iter_rows(named=True)}
    assert (rows["tg-0"]["judge_personal_hit"], rows["tg-0"]["judge_proactive_hit"]) == (0.75, 0.5)
    assert rows["tg-0"]["judge_listed_tools_called"] == 0.5, "a listed tool counts once"
    failed = rows["tg-2"]
    assert (failed["judge_judged"], failed["judge_procedure_score"], failed["judge_personal_hit"]) == \
        (False, None, None)
    assert rows["tg-0"]["judge_procedure_score"] == 4.0 and rows["tg-0"]["judge_procedure"] == 4, "input kept"
    assert failed["judge_listed_tools_called"] == 0.0 and failed["judge_turns"] == 1, "process facts remain"
    assert rows["r-0"]["judge_listed_tools_called"] is None, "retrieval lists only the search tools"
    assert rows["tg-1"]["judge_at_turn_cap"] is True


def test_summary_excludes_failed_judgements_from_the_scores():
    got = _metrics(TABLE, "tool_given/fc")
    expected = {"n": 3, "procedure": 3.0, "personalization": 4.0, "proactivity": 3.0, "judge_failed": 1 / 3,
                "personal_keypoints": 0.875, "proactive_keypoints": 0.75, "valid_call_rate": 5 / 6,
                "tool_error_rate": 1 / 6, "mean_turns": 3.0, "mean_nudges": 1.0, "turn_cap": 1 / 3,
                "listed_tools_called": 0.5}
    assert {k: got[k] for k in expected} == pytest.approx(expected)
    pooled = _metrics(TABLE, "all")
    assert (pooled["n"], pooled["procedure"], pooled["judge_failed"]) == (4, 3.0, 0.25)
    assert pooled["listed_tools_called"] == pytest.approx(0.5), "retrieval rows have no share"
    assert _metrics(TABLE, "retrieval/fc")["listed_tools_called"] is None


def test_scorer_declares_personalization_headline_and_score_scales():
    metrics = {m.name: m for m in SCORER.metrics}
    assert [m.name for m in SCORER.metrics if m.headline] == ["personalization"]
    assert {n for n, m in metrics.items() if m.scale == "score"} == {
        "procedure", "personalization", "proactivity", "overall", "mean_turns", "mean_model_calls", "mean_nudges"}
    assert SCORER.readings == ("judge",)


def test_regrading_the_written_table_gives_the_same_grades(tmp_path):
    """samples.parquet keeps the scores and counts as integers (the scorer types those inputs)."""
    graded = grade(TABLE)
    path = write_samples(graded, tmp_path)
    reread = pl.read_parquet(path)
    assert reread["judge_procedure"].dtype == pl.Int64 and reread["clean"].dtype == pl.Boolean
    assert summarize(grade(reread)).equals(summarize(graded))


def test_a_corrupt_count_names_the_sample_and_column():
    bad = TABLE.with_columns(pl.when(pl.col("sample_id") == "tg-0").then(pl.lit("three"))
                             .otherwise(pl.col("turns").cast(pl.String)).alias("turns"))
    with pytest.raises(GradingError, match="sample 'tg-0': column 'turns' must hold an integer or null, got 'three'"):
        grade(bad)


def test_the_prompt_states_the_three_rules_upstreams_judge_applies():
    """Spec correction 14: format reminders count against the solution, a key point that does not
    apply may be set aside, each dimension is judged on its own (our words, upstream's rules)."""
    prompt = judge_prompt("q", {}, [], "", PERSONAL, PROACTIVE)
    assert "Format reminders from the system" in prompt and "evidence of format errors" in prompt
    assert "objectively does not apply" in prompt and "only on what concerns it" in prompt


def test_judge_too_long_is_its_own_share_of_the_cases_sent_to_the_judge():
    """A judge prompt that did not fit its context is a judge failure and is counted apart: those
    are usually the longest, worst trajectories, left out of the three scores."""
    from grading.grades import grade
    from grading.metrics import summarize
    from tests.grading.conftest import etapp_case, etapp_table

    counts, tools = (2, 1, 1, 0, 0), ["get_today_weather"]
    cases = [etapp_case("tool_given/fc/a-1", "tool_given/fc", (4, 4, 4), {"personal": {}, "proactive": {}}, counts,
                        "finish", tools, tools),
             etapp_case("tool_given/fc/a-2", "tool_given/fc", None, None, counts, "finish", tools, tools,
                        error="too_long: the judge prompt does not fit"),
             etapp_case("tool_given/fc/a-3", "tool_given/fc", None, None, counts, "finish", tools, tools,
                        error="judge score out of range"),
             etapp_case("tool_given/fc/a-4", "tool_given/fc", None, None, counts, "finish", tools, tools,
                        error="not judged: roles.judge.enabled=false")]
    row = summarize(grade(etapp_table(cases))).filter(setting="all").row(0, named=True)
    assert (row["judge_too_long"], row["judge_failed"]) == (pytest.approx(1 / 3), pytest.approx(2 / 3))


# (id, judge_status, judge_error, judged, too_long, why): the status column is what is read.
STATUS_CASES = [
    ("judged", "judged", None, True, False, "scored: its scores count"),
    ("failed", "failed", "the judge answered prose", False, False, "sent, unreadable: a failure"),
    ("too_long", "too_long", "the prompt does not fit its context", False, True, "a failure counted apart"),
    ("not_judged", "not_judged", "roles.<judge>.enabled=false", None, None, "never sent: no failure"),
    ("legacy_prefix", None, "too_long: the judge prompt does not fit", False, True,
     "a table written before the column: the error's prefix"),
]


@pytest.mark.parametrize("status,error,judged,too_long,why", [c[1:] for c in STATUS_CASES],
                         ids=[c[0] for c in STATUS_CASES])
def test_the_judge_status_column_says_what_became_of_a_case(status, error, judged, too_long, why):
    counts, tools = (2, 1, 1, 0, 0), ["get_today_weather"]
    finals = (4, 4, 4) if status == "judged" else None
    points = {"personal": {}, "proactive": {}} if finals else None
    case = {**etapp_case("tool_given/fc/a-1", "tool_given/fc", finals, points, counts, "finish", tools, tools,
                         error=error), "judge_status": status}
    row = grade(etapp_table([case])).row(0, named=True)
    assert (row["judge_judged"], row["judge_judge_too_long"]) == (judged, too_long), why


def test_a_judge_status_outside_the_declared_set_is_refused():
    from grading.views import JUDGE_STATUSES

    counts, tools = (2, 1, 1, 0, 0), ["get_today_weather"]
    case = {**etapp_case("tool_given/fc/a-1", "tool_given/fc", None, None, counts, "finish", tools, tools,
                         error="x"), "judge_status": "maybe"}
    with pytest.raises(GradingError, match=re.escape(str(list(JUDGE_STATUSES)))):
        grade(etapp_table([case]))


def test_the_judge_status_is_kept_in_samples_parquet(tmp_path):
    counts, tools = (2, 1, 1, 0, 0), ["get_today_weather"]
    case = {**etapp_case("tool_given/fc/a-1", "tool_given/fc", None, None, counts, "finish", tools, tools,
                         error="too_long: x"), "judge_status": "too_long"}
    write_samples(grade(etapp_table([case])), tmp_path)
    assert pl.read_parquet(tmp_path / "samples.parquet")["judge_status"].to_list() == ["too_long"]


SCORER_METRICS = {m.name: m for m in SCORER.metrics}


def _judged(sample_id: str, setting: str, finals: tuple[int, int, int], end: str = "finish",
            called: tuple[str, ...] = ("view_today_alarms",)) -> dict:
    """A judged ETAPP case that listed view_today_alarms (a clean instruction)."""
    return {**etapp_case(sample_id, setting, finals, etapp_points([2], [2]), (2, len(called), len(called), 0, 0), end,
                         ["view_today_alarms"], list(called)), "pass_score": 4.0}


def test_a_case_that_called_a_substituted_tool_is_not_clean():
    """The /clean rows are the cases whose observations are all upstream's: an agent that called a
    tool running on substitute data (play_music here), listed or not, leaves them."""
    table = etapp_table([_judged("tg-0", "tool_given/fc", (4, 4, 4)),
                         _judged("tg-1", "tool_given/fc", (2, 2, 2), called=("view_today_alarms", "play_music")),
                         _judged("tg-2", "tool_given/fc", (1, 1, 1), called=("search_tools",))])
    clean = summarize(grade(table)).filter(setting="tool_given/fc/clean").row(0, named=True)
    assert (clean["n"], clean["procedure"]) == (2, 2.5), "tg-0 and tg-2 (search_tools runs upstream's own model)"


def test_engine_error_episodes_are_left_out_of_every_judge_mean_and_counted():
    """An episode cut by an engine error says nothing about the model: it is out of the three means,
    the passes, the key points and the judge's failure share (even where a judge scored it, as before
    the judge skipped such episodes), and its share is a metric of its own, lower being better."""
    table = etapp_table([_judged("tg-0", "tool_given/fc", (4, 4, 4)),
                         _judged("tg-1", "tool_given/fc", (2, 2, 2)),
                         _judged("tg-2", "tool_given/fc", (0, 0, 0), end="engine_error"),
                         {**_judged("tg-3", "tool_given/fc", (0, 0, 0), end="engine_error"),
                          **{f"judge_{d}": None for d in ("procedure", "personalization", "proactivity")},
                          "judge_keypoints": None,
                          "judge_error": "not judged: the agent's episode ended by an engine error"}])
    row = summarize(grade(table)).filter(setting="tool_given/fc").row(0, named=True)
    assert (row["n"], row["procedure"], row["personalization"], row["proactivity"]) == (4, 3.0, 3.0, 3.0)
    assert (row["judge_failed"], row["passed_procedure"], row["personal_keypoints"]) == (0.0, 0.5, 1.0)
    assert row["engine_error"] == 0.5
    assert SCORER_METRICS["engine_error"].higher_is_better is False


def test_overall_is_the_mean_of_a_methods_six_numbers_over_both_settings():
    """The paper's headline: per method, the mean of the three judge scores in each of the two
    settings, on a `both/<method>` row; absent where a method ran in one setting only, on every
    one-setting row and on the pooled `all` row (toolsweep's own, pooling methods)."""
    table = etapp_table([
        _judged("tool_given/fc/a-0", "tool_given/fc", (4, 3, 2)),
        _judged("tool_given/fc/a-1", "tool_given/fc", (2, 5, 4)),
        _judged("tool_retrieval/fc/a-0", "tool_retrieval/fc", (1, 1, 1)),
        _judged("tool_retrieval/fc/a-1", "tool_retrieval/fc", (3, 3, 2)),
        _judged("tool_retrieval/fc/a-2", "tool_retrieval/fc", (5, 2, 0)),
        _judged("tool_given/react/a-0", "tool_given/react", (5, 5, 5))])
    metrics = summarize(grade(table))
    assert metrics["setting"].to_list() == ["tool_given/fc", "tool_given/fc/clean", "tool_retrieval/fc",
                                            "tool_retrieval/fc/clean", "tool_given/react", "tool_given/react/clean",
                                            "both/fc", "both/fc/clean", "all", "all/clean"]
    # tool_given/fc: procedure (4+2)/2 = 3, personalization (3+5)/2 = 4, proactivity (2+4)/2 = 3;
    # tool_retrieval/fc: (1+3+5)/3 = 3, (1+3+2)/3 = 2, (1+2+0)/3 = 1; the six: (3+4+3+3+2+1)/6 = 16/6.
    both = metrics.filter(setting="both/fc").row(0, named=True)
    assert both["overall"] == pytest.approx(16 / 6) and both["n"] == 5
    assert both["procedure"] == pytest.approx(3.0), "the row's other metrics pool its cases"
    assert metrics.filter(pl.col("overall").is_not_null())["setting"].to_list() == ["both/fc", "both/fc/clean"], \
        "one setting (react's too: it gets no both/ row), or several methods pooled (all): no overall"
    assert SCORER_METRICS["overall"].higher_is_better is True and SCORER_METRICS["overall"].scale == "score"
    from grading.report import format_table

    line = next(l for l in format_table(metrics, SCORER).splitlines() if l.startswith("| both/fc |"))
    assert "2.67" in line, "metrics.md shows it as it shows the three scores"
