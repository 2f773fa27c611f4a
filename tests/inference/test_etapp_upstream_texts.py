"""Upstream's own ETAPP texts, read at run time from the ETAPP copy (dataset.prompts).

The openings of all 4,800 episodes (16 users x 50 instructions x 3 methods x 2 settings) are
held against SHA-256 digests of what upstream's own `predict_instruction` and `method_converter`
built from the same three prompt files (tests/inference/data/etapp_upstream_openings.json).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from tests.warm import toolsweep

from grading.scorers.etapp_judge import rubric as jt, upstream
from inference.benchmarks.etapp import prompt_files as pf
from inference.benchmarks.etapp.cases import load_cases
from inference.benchmarks.etapp.episodes import Context, Slot, new_episode
from inference.errors import DatasetError

OPENINGS = Path(__file__).parent / "data" / "etapp_upstream_openings.json"
SETTINGS, METHODS = ("tool_given", "tool_retrieval"), ("fc", "react", "e_react")


@pytest.fixture(scope="module")
def world(etapp_data) -> Context:
    return Context.load(etapp_data, etapp_data.parent / "travelplanner", pf.read(etapp_data))


def _opening(episode) -> list:
    return [episode.chat[:2], episode.record[:2], episode.execute_turn]


def test_every_episodes_opening_equals_upstreams_own_filling(world, etapp_data):
    expected = json.loads(OPENINGS.read_text())["sha256"]
    cases = load_cases(etapp_data, None, None)
    got = {}
    for setting in SETTINGS:
        for method in METHODS:
            by_user: dict[str, list] = {}
            for case in cases:
                slot = Slot(setting, method, case, f"{setting}/{method}/{case.case_id}")
                by_user.setdefault(case.user, []).append(_opening(new_episode(slot, world, None)))
            for user, openings in by_user.items():
                payload = json.dumps(openings, ensure_ascii=False, separators=(",", ":"))
                got[f"{setting}/{method}/{user}"] = hashlib.sha256(payload.encode()).hexdigest()
    assert len(got) == 96
    assert {k for k in got if got[k] != expected[k]} == set()


def test_the_texts_are_upstreams_constants_filled_where_upstream_fills_them(world, etapp_data):
    files = world.upstream
    case = load_cases(etapp_data, ["John_Doe"], [7])[0]
    react = new_episode(Slot("tool_given", "react", case, "s"), world, None)
    oneshot = files.oneshot(False)
    # the model sees the one-shot example after the ReAct system text; the record keeps it without
    assert react.chat[0]["content"] == react.record[0]["content"] + oneshot
    fc = new_episode(Slot("tool_given", "fc", case, "s"), world, None)
    assert oneshot not in fc.chat[0]["content"] and fc.chat[0] == fc.record[0]
    # upstream star-imports the retrieval module last: its EXEC_PROMPT ("You may only call")
    # is the one both settings' E-ReAct turns use, not the tool-given module's ("You must")
    given = new_episode(Slot("tool_given", "e_react", case, "s"), world, None)
    assert files.agent["EXEC_PROMPT"] != files.retrieval["EXEC_PROMPT"]
    assert given.execute_turn == files.retrieval["EXEC_PROMPT"] + oneshot
    retrieval = new_episode(Slot("tool_retrieval", "react", case, "s"), world, None)
    assert "{'name': 'search_tools'" in retrieval.chat[0]["content"]
    assert str(world.concrete["John_Doe"]["calendar"]) not in retrieval.chat[0]["content"]  # no preferences there


def test_run_json_records_the_texts_and_a_hash_of_every_file(world, etapp_data):
    facts = world.upstream.facts()
    assert facts["texts"] == "upstream"
    for name in pf.PROMPT_FILES:
        assert facts["sha256"][name] == hashlib.sha256((etapp_data / name).read_bytes()).hexdigest()
    assert facts["reminders"].startswith("own") and facts["judge_skeleton_hints"].startswith("own")


def _copy(etapp_data: Path, tmp_path: Path, skip: tuple[str, ...] = ()) -> Path:
    """A light ETAPP copy: the prompt files copied (minus `skip`), everything else linked."""
    root = tmp_path / "etapp"
    for entry in etapp_data.iterdir():
        if entry.name not in ("Inference", "evaluation"):
            (root / entry.name).parent.mkdir(parents=True, exist_ok=True)
            (root / entry.name).symlink_to(entry)
    for name in pf.PROMPT_FILES:
        if name not in skip:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(etapp_data / name, root / name)
    return root


def test_auto_falls_back_to_the_projects_texts_and_upstream_demands_the_files(etapp_data, tmp_path):
    root = _copy(etapp_data, tmp_path, skip=(pf.JUDGE,))
    assert pf.resolve("auto", root) is None and pf.resolve("own", etapp_data) is None
    with pytest.raises(DatasetError, match="missing \\['evaluation/evaluate_prompt.py'\\].*dataset.prompts=own"):
        pf.resolve("upstream", root)


def test_a_file_without_a_constant_the_run_needs_is_named(etapp_data, tmp_path):
    root = _copy(etapp_data, tmp_path)
    path = root / pf.AGENT
    path.write_text(path.read_text().replace("REACT_ONESHOT_EXAMPLE =", "SOMETHING_ELSE ="))
    with pytest.raises(DatasetError, match="generation_prompt.py lacks the constant REACT_ONESHOT_EXAMPLE"):
        pf.resolve("upstream", root)


def test_the_files_are_parsed_never_executed(etapp_data, tmp_path):
    root = _copy(etapp_data, tmp_path)
    marker = tmp_path / "executed"
    path = root / pf.JUDGE
    path.write_text(f"open({str(marker)!r}, 'w').write('x')\n" + path.read_text())
    assert pf.read(root).judge_template.startswith("\nI need you")  # read all the same
    assert not marker.exists()


# --- Texts upstream keeps inline in its loop code: read by rule where the copy has the files ----
# The files below have the shape of upstream's (the same functions, branches and literals) with
# stand-in sentences: the rules must find each text by its place.
_LOOP = '''
def method_converter(model, method, params):
    if method == 'react':
        if action == "":
            model.add_message({"role": "user", "content": "R-NO-ACTION"})
            history.append({"role": "user", "content": "R-NO-ACTION"})
        try:
            x = 1
        except Exception:
            model.add_message({"role": "user", "content": "R-BAD-INPUT"})
        model.add_message({"role": "assistant", "content": "abort"})
    elif method == 'e-react':
        model.add_message({'role': 'user', 'content': EXEC_PROMPT + EXAMPLE})
        model.add_message({"role": "user", "content": "E-NO-ACTION"})
        model.add_message({"role": "user", "content": "E-BAD-INPUT"})
    elif method == 'fine-tuned':
        model.add_message({"role": "user", "content": "FC-FORMAT"})
        model.add_message({"role": "tool", "content": "FC-BAD-ARGS"})
        model.add_message({"role": "tool", "content": "FC-API-ONLY"})
'''
_EVALUATOR = '''
def evaluate_personalization_and_proactivity(result):
    personal, proactive = {}, {}
    for item in result['keypoint for personal']:
        personal[item] = {"analysis": "P-HINT", "score": "P-SCORE"}
    for item in result['keypoint for proactive']:
        proactive[item] = {"analysis": "Q-HINT", "score": "Q-SCORE"}
    output_format = {"Procedure": {"Final Assessment": {"anlysis": "F", "score": "S"}},
                     "Personalization": {"Keypoints for Personalization": personal},
                     "Proactivity": {"Keypoints for Proactivity": proactive}}
'''


def test_inline_texts_are_read_by_their_place_in_upstreams_loop_files(etapp_data, tmp_path):
    root = _copy(etapp_data, tmp_path)
    (root / pf.LOOP).write_text(_LOOP)
    (root / pf.EVALUATOR).parent.mkdir(parents=True, exist_ok=True)
    (root / pf.EVALUATOR).write_text(_EVALUATOR)
    files = pf.read(root)
    assert files.reminders == pf.Reminders("R-NO-ACTION", "R-BAD-INPUT", "E-BAD-INPUT", "FC-FORMAT", "FC-BAD-ARGS")
    skeleton = upstream.upstream_skeleton(["a", "b", "a"], ["c"], files.judge_hints)
    assert skeleton["Personalization"]["Keypoints for Personalization"] == {
        "a": {"analysis": "P-HINT", "score": "P-SCORE"}, "b": {"analysis": "P-HINT", "score": "P-SCORE"}}
    assert skeleton["Proactivity"]["Keypoints for Proactivity"] == {"c": {"analysis": "Q-HINT", "score": "Q-SCORE"}}
    assert set(files.facts()["sha256"]) == {*pf.PROMPT_FILES, pf.LOOP, pf.EVALUATOR}
    # a loop file of another shape: the project's reminders stand in, and run.json says so
    (root / pf.LOOP).write_text("def method_converter(method):\n    pass\n")
    assert pf.read(root).reminders is None and pf.read(root).facts()["reminders"].startswith("own")


def test_a_scripted_run_sends_upstreams_texts_and_records_them(etapp_data, tmp_path, world):
    """The wiring: a CLI run (scripted agent and judge) writes the same openings as new_episode,
    run.json names the texts with their hashes, and judgements.parquet keeps the judge's
    messages: upstream's template, read back by upstream's reader."""
    from tests.inference.test_etapp_run import judge_script

    ids = [f"tool_given/{m}/John_Doe-7" for m in METHODS]
    script, judge = tmp_path / "turns.jsonl", tmp_path / "judge.jsonl"
    # the first turn's answer: model call 0, or 1 after E-ReAct's plan
    script.write_text("".join(json.dumps({"sample_id": sid, "turn": int(m == "e_react"), "answer": "done"}) + "\n"
                              for sid, m in zip(ids, METHODS)))
    judge.write_text("".join(json.dumps(r) + "\n" for r in judge_script(etapp_data, ids, 3)))
    run = tmp_path / "run"
    done = toolsweep([f"hydra.run.dir={run}", "dataset=etapp",
                      f"dataset.path={etapp_data}", "dataset.users=[John_Doe]", "dataset.instructions=[7]",
                      "dataset.settings=[tool_given]", "engine=script", f"engine.script={script}",
                      "engine@roles.judge.engine=script", f"roles.judge.engine.script={judge}"], timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ETAPP texts: upstream's" in done.stderr + done.stdout
    facts = json.loads((run / "run.json").read_text())["etapp"]["texts"]
    assert facts["texts"] == "upstream" and set(facts["sha256"]) == set(pf.PROMPT_FILES)
    rows = pl.read_parquet(run / "trajectories.parquet").filter(pl.col("index") < 2)
    case = load_cases(etapp_data, ["John_Doe"], [7])[0]
    for method in METHODS:
        episode = new_episode(Slot("tool_given", method, case, "s"), world, None)
        stored = rows.filter(pl.col("method") == method).sort("index")["content"].to_list()
        assert stored == [m["content"] for m in episode.record[:2]]
    judged = pl.read_parquet(run / "judgements.parquet").sort("sample_id")
    assert judged["judge_error"].null_count() == 3 and judged["judge_procedure"].to_list() == [3, 3, 3]
    messages = [json.loads(m) for m in judged["judge_messages"]]
    template_head = world.upstream.judge_template.split("{output_format}")[0]
    assert all(len(m) == 1 and m[0]["role"] == "user" and m[0]["content"].startswith(template_head) for m in messages)
    assert json.loads((run / "run.json").read_text())["judge_protocol"] == "upstream"
    report = (run / "report.html").read_text()
    assert "agent texts" in report and "upstream&#39;s, read from the ETAPP copy (generation_prompt.py b4882dc0" in report
    assert "judge protocol" in report and "free decoding, the answer read as upstream" in report
