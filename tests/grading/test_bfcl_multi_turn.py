"""BFCL's multi-turn execution and verdicts: BFCL's own classes (read from the user's copy of BFCL),
calls dispatched without `eval`, and one test per quirk of BFCL's checker that toolsweep keeps."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from grading.errors import GradingError
from grading.scorers.bfcl import execution
from grading.scorers.bfcl.environments import CLASS_MODULES, load
from grading.scorers.bfcl.execution import CaseEnvironment, Undecodable, execution_list, hermes_execution_list
from grading.scorers.bfcl.multi_turn import (EMPTY_TURN, FORCE_TERMINATED, MULTI_TURN, RESPONSE_MISMATCH,
                                             STATE_MISMATCH, Case, evaluate)


@pytest.fixture(scope="module")
def classes(bfcl_eval_copy) -> dict[str, type]:
    return load(bfcl_eval_copy).classes


def records(bfcl_data: Path, category: str) -> list[tuple[dict, list[list[str]]]]:
    questions = [json.loads(line) for line in (bfcl_data / f"BFCL_v4_{category}.json").open(encoding="utf-8")]
    answers = [json.loads(line) for line in
               (bfcl_data / "possible_answer" / f"BFCL_v4_{category}.json").open(encoding="utf-8")]
    return [(q, a["ground_truth"]) for q, a in zip(questions, answers)]


def case_of(question: dict, truth: list[list[str]]) -> Case:
    return Case(question["id"], question["id"].rsplit("_", 1)[0], question.get("initial_config", {}),
                question["involved_classes"], truth)


FILE_SYSTEM = {"GorillaFileSystem": {"root": {"alex": {"type": "directory", "contents": {"docs": {
    "type": "directory", "contents": {"notes.txt": {"type": "file", "content": "first line\nsecond line"}}}}}}}}


def file_system(classes: dict[str, type]) -> CaseEnvironment:
    return CaseEnvironment(classes, FILE_SYSTEM, ["GorillaFileSystem", "MathAPI"], False)


def state(environment: CaseEnvironment) -> dict:
    return {name: {k: repr(v) for k, v in vars(instance).items()} for name, instance in environment.instances.items()}


def test_the_eight_classes_load_from_the_wheel_without_touching_sys_modules(bfcl_eval_copy):
    import sys

    code = load(bfcl_eval_copy)
    assert set(code.classes) == set(CLASS_MODULES) and len(code.sha256) == 9  # eight modules and long_context
    assert not any(name == "bfcl_eval" or name.startswith("bfcl_eval.") for name in sys.modules)


def test_a_folder_without_bfcls_code_is_refused_with_the_option_to_set(tmp_path):
    with pytest.raises(GradingError, match="dataset.bfcl_eval"):
        load(tmp_path)


@pytest.mark.parametrize("text", [
    "[inspect.os.system(command='touch {file}')]",
    "[cd(folder=open(file='{file}', mode='w'))]",
    "[ls(a=__import__(name='os'))]",
    "[exec(source=\"open('{file}', 'w')\")]",
    "[eval(source=\"__import__('os').system('touch {file}')\")]",
    "[cd.__globals__(x=1)]",
    "[__import__('os').system(command='touch {file}')]",
    "[getattr(o=ls, name='__globals__')]",
    "[touch(file_name=open(file='{file}', mode='w'))]",
    "[mkdir(dir_name={{'open': {{'file': '{file}', 'mode': 'w'}}}})]",
    "[globals()]",
    "[print(value=1)]",
], ids=["module attribute", "builtin in an argument", "import in an argument", "exec", "eval", "dunder attribute",
        "import then call", "getattr", "builtin as a nested call", "dict read as a nested call", "globals", "builtin"])
def test_text_that_runs_code_under_bfcls_eval_creates_nothing_and_changes_no_state(text, classes, tmp_path):
    """Each of these creates a file or reaches Python's internals when BFCL's `eval()` runs it."""
    target = tmp_path / "planted"
    environment = file_system(classes)
    before = state(environment)
    try:
        calls = execution_list(text.format(file=target))
    except Undecodable:
        calls = []
    results = environment.run(calls)
    assert not target.exists()
    assert state(environment) == before
    assert all(r.startswith("Error during execution: ") for r in results), results


def test_ordinary_calls_run_on_bfcls_classes_and_write_results_as_bfcl_does(classes):
    environment = file_system(classes)
    results = environment.run(execution_list("[cd(folder='docs'), ls(), add(a=1, b=2), cat(file_name='nope.txt')]"))
    assert results[0] == json.dumps({"current_working_directory": "docs"})
    assert results[1] == json.dumps({"current_directory_content": ["notes.txt"]})
    assert results[2] == json.dumps({"result": 3})
    assert results[3].startswith('{"error"'), results[3]
    assert environment.run(["ls(nonsense=1)"]) == [
        "Error during execution: GorillaFileSystem.ls() got an unexpected keyword argument 'nonsense'"]
    assert environment.run(["undeclared(x=1)"]) == ["Error during execution: name 'undeclared' is not defined"]


def test_bfcls_deny_list_refuses_eight_names_before_running(classes):
    environment = file_system(classes)
    assert environment.run(["kill(pid=1)", "remove(path='x')"]) == [
        "Error during execution: Function call kill is not allowed.",
        "Error during execution: Function call remove is not allowed."]


def test_positional_arguments_of_a_model_call_are_dropped_by_the_decoder():
    """BFCL's decoder reads keywords only: `cd('alex')` runs as `cd()`."""
    assert execution_list("[cd('docs'), mv('a', destination='b')]") == ["cd()", "mv(destination='b')"]


def test_ground_truth_calls_keep_their_positional_arguments(classes):
    """Ground-truth strings are executed as written, not decoded: `cd('alex')` moves."""
    environment = file_system(classes)
    assert environment.run(["cd('docs')"]) == [json.dumps({"current_working_directory": "docs"})]


def test_an_empty_dict_argument_fails_the_decoding_as_in_bfcl():
    """BFCL's `parse_nested_value` takes any dict of dicts for a nested call; an empty one raises."""
    with pytest.raises(Undecodable):
        execution_list("[mkdir(dir_name={})]")
    assert execution_list("[f(x={'a': {'b': 1}})]") == ["f(x=a(b=1))"]  # a dict of dicts is a nested call


def test_a_method_name_inside_a_string_is_rewritten_as_bfcls_regex_rewrites_it(classes):
    environment = file_system(classes)
    environment.run(["cd(folder='docs')", "touch(file_name='x.txt')", "echo(content='see ls() here', file_name='x.txt')"])
    content = environment.run(["cat(file_name='x.txt')"])[0]
    assert "model_GorillaFileSystem_instance.ls()" in content


def test_a_dict_of_dicts_argument_runs_as_the_nested_method_call_bfcl_makes_of_it(classes):
    environment = file_system(classes)
    text = "[absolute_value(number={'add': {'a': -1, 'b': -2}})]"
    assert execution_list(text) == ["absolute_value(number=add(a=-1, b=-2))"]
    math = classes["MathAPI"]()
    expected = execution._written(math.absolute_value(number=math.add(a=-1, b=-2)))
    assert environment.run(execution_list(text)) == [expected]


def test_hermes_blocks_are_read_as_bfcls_qwen_handler_reads_them():
    text = '<think>x</think>\n<tool_call>\n{"name": "cd", "arguments": {"folder": "a"}}\n</tool_call>\n' \
           '<tool_call>\n{"name": "ls", "arguments": "{\\"a\\": true}"}\n</tool_call>'
    assert hermes_execution_list(text) == ["cd(folder='a')", "ls(a=True)"]
    assert hermes_execution_list("no calls here") == []
    with pytest.raises(Undecodable):
        hermes_execution_list('<tool_call>\n{"name": "cd"}\n</tool_call>')


def test_a_call_past_the_time_bound_costs_only_its_own_result(monkeypatch):
    class Spinner:
        def spin(self) -> str:
            while True:
                pass

        def ok(self) -> str:
            return "fine"

    monkeypatch.setattr(execution, "STATELESS", ("Spinner",))
    monkeypatch.setattr(execution, "STEP_SECONDS", 0.3)
    environment = CaseEnvironment({"Spinner": Spinner}, {}, ["Spinner"], False)
    results = environment.run(["spin()", "ok()"])
    assert results[0].startswith("Error during execution: the call ran for more than 0.3 s"), results
    assert results[1] == "fine"


# --- the checker's quirks, on the real cases ---------------------------------------------------

def gt_turns(truth: list[list[str]]) -> list[list[str]]:
    """The ground truth as a model's steps: one step per turn, then a step without a call."""
    return [[f"[{', '.join(turn)}]", ""] if turn else [""] for turn in truth]


def keyword_only(truth: list[list[str]]) -> bool:
    return all("(" in c and (c.endswith("()") or "=" in c.split("(", 1)[1].split(",")[0]) for t in truth for c in t)


def first_case(bfcl_data: Path, category: str, want) -> tuple[dict, list[list[str]]]:
    return next((q, t) for q, t in records(bfcl_data, category) if want(q, t) and keyword_only(t))


def test_the_ground_truth_passes_and_a_dropped_last_call_fails(classes, bfcl_data):
    question, truth = first_case(bfcl_data, "multi_turn_base", lambda q, t: len(t) >= 2 and t[-1])
    case = case_of(question, truth)
    assert evaluate(gt_turns(truth), case, classes).valid
    dropped = [list(t) for t in truth]
    dropped[-1] = dropped[-1][:-1]
    verdict = evaluate(gt_turns(dropped), case, classes)
    assert not verdict.valid and verdict.error_type in (STATE_MISMATCH, RESPONSE_MISMATCH, EMPTY_TURN)
    assert verdict.turn == len(truth) - 1


def test_a_force_quit_before_the_last_turn_fails_the_case_but_in_the_last_turn_only_turns_count(classes, bfcl_data):
    """BFCL compares the turn count only: a force quit in the last turn leaves every turn there."""
    question, truth = first_case(bfcl_data, "multi_turn_base", lambda q, t: len(t) >= 2 and all(t))
    case = case_of(question, truth)
    assert evaluate(gt_turns(truth)[:-1], case, classes).error_type == FORCE_TERMINATED
    last = gt_turns(truth)
    last[-1] = [f"[{truth[-1][0]}]"] * 21  # 21 call steps, no closing step: the loop force-quit here
    verdict = evaluate(last, case, classes)
    assert verdict.error_type != FORCE_TERMINATED


def test_calls_where_the_ground_truth_is_empty_fail_only_through_later_state(classes, bfcl_data):
    """BFCL never calls its irrelevance check: a read-only call in an empty-ground-truth turn passes."""
    question, truth = first_case(bfcl_data, "multi_turn_miss_param", lambda q, t: any(not x for x in t))
    case = case_of(question, truth)
    turns = gt_turns(truth)
    empty = next(i for i, t in enumerate(truth) if not t)
    read_only = "[ls()]" if "GorillaFileSystem" in question["involved_classes"] else "[add(a=1, b=1)]"
    if "GorillaFileSystem" not in question["involved_classes"] and "MathAPI" not in question["involved_classes"]:
        pytest.skip("the first such case has no read-only method this test knows")
    turns[empty] = [read_only, ""]
    assert evaluate(gt_turns(truth), case, classes).valid == evaluate(turns, case, classes).valid


def test_a_held_out_function_runs_before_it_is_announced(classes, bfcl_data):
    """Any public method of an involved class runs, offered or not (BFCL maps them all)."""
    question, truth = next((q, t) for q, t in records(bfcl_data, "multi_turn_miss_func"))
    held = next(iter(question["missed_function"].values()))[0]
    environment = CaseEnvironment(classes, question["initial_config"], question["involved_classes"], False)
    assert held in environment.owner


def test_an_empty_turn_where_calls_were_due_fails_with_bfcls_error_type(classes, bfcl_data):
    question, truth = first_case(bfcl_data, "multi_turn_base", lambda q, t: bool(t[0]))
    turns = gt_turns(truth)
    turns[0] = [""]
    verdict = evaluate(turns, case_of(question, truth), classes)
    assert (verdict.valid, verdict.error_type, verdict.turn) == (False, EMPTY_TURN, 0)


def test_long_context_cases_load_the_long_scenario(classes, bfcl_data):
    question, truth = records(bfcl_data, "multi_turn_long_context")[0]
    short = CaseEnvironment(classes, question["initial_config"], question["involved_classes"], False)
    long = CaseEnvironment(classes, question["initial_config"], question["involved_classes"], True)
    assert state(short) != state(long)


@pytest.mark.parametrize("category", MULTI_TURN)
def test_every_case_loads_and_its_ground_truth_runs(category, classes, bfcl_data):
    cases = records(bfcl_data, category)
    assert len(cases) == 200
    for question, truth in cases:
        evaluate(gt_turns(truth), case_of(question, truth), classes)  # never raises
