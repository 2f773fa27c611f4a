"""BFCL's multi-turn question files -> sample rows, the cases completed as BFCL completes them.

A record holds `question` (user turns, each a list of messages; a held-out turn of `miss_func` is
empty), `initial_config` (each class's starting state), `involved_classes` and, for `miss_func`,
`missed_function` (turn index -> names). As BFCL's `populate_test_cases_with_predefined_functions`
does, a case's functions are the function docs of its involved classes in class order
(`multi_turn_func_doc/<module>.json`), and each held-out function is moved from that list to its
turn: the model is offered the rest, and the held-out docs are announced at their turn. Only the
offered functions get the language hint (BFCL adds it after moving the held-out ones out).
`excluded_function` and `path` are in the data but BFCL's code never reads them; nor does toolsweep.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from grading.scorers.bfcl.environments import CLASS_MODULES
from inference.benchmarks.base import read_jsonl, sample_row

from .records import id_problems, number, schema_tools
from .texts import OWN

PREFIX = "BFCL_v4"
SCORER = "bfcl"
DOC_DIR = "multi_turn_func_doc"


def function_docs(root: Path, involved: list[str], read: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The involved classes' function docs, in class order (a fresh copy per case; `read`: the
    files read so far)."""
    docs = []
    for class_name in involved:
        module = CLASS_MODULES[class_name]
        if module not in read:
            read[module] = read_jsonl(root / DOC_DIR / f"{module}.json")
        docs += copy.deepcopy(read[module])
    return docs


def case_problems(case: Any, category: str) -> list[str]:
    """Everything wrong with one multi-turn record (empty when it is usable)."""
    found = id_problems(case, category)
    if found:
        return found
    turns = case.get("question")
    if not (isinstance(turns, list) and turns and all(isinstance(t, list) for t in turns)
            and all(isinstance(m, dict) and isinstance(m.get("content"), str) for t in turns for m in t)):
        return ["question must be a list of turns, each a list of {role, content} messages"]
    involved = case.get("involved_classes")
    if not (isinstance(involved, list) and involved and all(c in CLASS_MODULES for c in involved)):
        return [f"involved_classes must name BFCL's classes {sorted(CLASS_MODULES)}, got {involved!r}"]
    if not isinstance(case.get("initial_config", {}), dict):
        return ["initial_config must be an object"]
    missed = case.get("missed_function", {})
    if not isinstance(missed, dict) or not all(k.isdigit() and int(k) < len(turns) and isinstance(v, list)
                                               for k, v in missed.items()):
        return ["missed_function must map turn indexes to lists of function names"]
    held_out_with_message = [k for k in missed if turns[int(k)]]
    if held_out_with_message:
        return [f"turns {held_out_with_message} hold out functions but carry messages (BFCL asserts they are empty)"]
    return []


def answer_problems(answer: Any, case: dict[str, Any]) -> list[str]:
    if not isinstance(answer, dict) or answer.get("id") != case["id"]:
        got = answer.get("id") if isinstance(answer, dict) else answer
        return [f"the possible answer on this line is for {got!r}, not {case['id']!r} (the files align by line)"]
    truth = answer.get("ground_truth")
    if not (isinstance(truth, list) and all(isinstance(t, list) and all(isinstance(c, str) for c in t) for t in truth)):
        return ["ground_truth must be a list of turns, each a list of call strings"]
    if len(truth) != len(case["question"]):
        return [f"ground_truth has {len(truth)} turns for {len(case['question'])} question turns"]
    return []


def split_held_out(functions: list[dict[str, Any]], missed: dict[str, list[str]]) -> dict[str, list[dict[str, Any]]]:
    """BFCL's move of each held-out function's doc out of `functions` (in place) to its turn."""
    held = {}
    for turn, names in missed.items():
        held[turn] = []
        for name in names:
            for i, doc in enumerate(functions):
                if doc["name"] == name:
                    held[turn].append(doc)
                    functions.pop(i)
                    break
    return held


def _row(root: Path, case: dict[str, Any], category: str, answer: dict[str, Any],
         read: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    functions = function_docs(root, case["involved_classes"], read)
    held_out = split_held_out(functions, case.get("missed_function", {}))
    first = case["question"][0]
    return sample_row(
        setting=category, entry_id=number(case["id"]), scorer=SCORER,
        system=OWN.system(functions, None), user=first[-1]["content"] if first else "", native_system=None,
        tools=schema_tools(functions), tool_specs=OWN.functions_with_hint(functions), gold_tool=None,
        gold_params=None, allow_refusal=True,
        inputs={"bfcl_id": case["id"], "functions": functions, "possible_answer": answer["ground_truth"],
                "gold_calls": [], "turns": case["question"], "initial_config": case.get("initial_config", {}),
                "involved_classes": case["involved_classes"], "held_out": held_out})


def multi_turn_rows(root: Path, category: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of one multi-turn category, and every problem with its records."""
    questions_path = root / f"{PREFIX}_{category}.json"
    answers_path = root / "possible_answer" / f"{PREFIX}_{category}.json"
    cases, answers = read_jsonl(questions_path), read_jsonl(answers_path)
    if len(answers) != len(cases):
        return [], [f"{answers_path.name}: {len(answers)} possible answers for {len(cases)} questions in "
                    f"{questions_path.name} (the files align by line)"]
    rows, problems, read = [], [], {}
    for line, (case, answer) in enumerate(zip(cases, answers), start=1):
        found = case_problems(case, category) or answer_problems(answer, case)
        problems += [f"{questions_path.name}: line {line}: {p}" for p in found]
        if not found:
            rows.append(_row(root, case, category, answer, read))
    return rows, problems
