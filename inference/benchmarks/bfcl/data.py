"""BFCL's files -> the canonical sample table, and the gold answers for a replay.

`dataset.path` is BFCL's data folder: `BFCL_v4_<category>.json` question files and
`possible_answer/BFCL_v4_<category>.json` (both JSON Lines, aligned by line). A setting is a
category. A case's id is `<category>_<n>` or, live, `<category>_<n>-<doc>-<prompt>`; its number
`n` is the sample's `entry_id`. The question is one turn of messages: a leading `system` message
stays the case's own (after BFCL's prompt in the benchmark format, alone in the native one),
messages before the last one are the chat's earlier turns (`prior_turns`), the last one (a user
message) is the `user` turn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import polars as pl

from inference.benchmarks.base import NATIVE_FORMAT, raise_problems, read_jsonl, sample_row, sample_table
from inference.errors import DatasetError
from inference.python_source import python_call_list
from inference.toolcalls import CALL_FORMATS

from grading.scorers.bfcl.multi_turn import MULTI_TURN

from .grammar import call_grammar
from .records import id_problems, number, schema_tools
from .multi_turn_data import multi_turn_rows
from .texts import OWN

PREFIX = "BFCL_v4"
NON_LIVE = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
LIVE = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance",
        "live_relevance")
AST_CATEGORIES = (*NON_LIVE, *LIVE)
CATEGORIES = (*AST_CATEGORIES, *MULTI_TURN)
NO_ANSWER_FILE = ("irrelevance", "live_irrelevance", "live_relevance")
"""Categories graded on whether the answer holds a call: BFCL has no possible answers for them."""
MAX_CALLS = 8
"""The most calls one answer may hold (the grammar's bound): BFCL's largest gold answer has 8."""
SCORER = "bfcl"
NATIVE_NO_CALL = "None of the functions I can call fits this request."
"""The gold answer of an irrelevance case in the native format: text without a tool call."""


def question_files(root: Path, category: str) -> tuple[Path, Optional[Path]]:
    """(questions, possible answers or None) of one category under the data folder."""
    answers = None if category in NO_ANSWER_FILE else root / "possible_answer" / f"{PREFIX}_{category}.json"
    return root / f"{PREFIX}_{category}.json", answers


def data_root(path: Path) -> Path:
    """The folder holding the question files: dataset.path itself or its `data/`."""
    for root in (path, path / "data", path / "bfcl_eval" / "data"):
        if (root / f"{PREFIX}_simple_python.json").is_file() or any(root.glob(f"{PREFIX}_*.json")):
            return root
    raise DatasetError(f"dataset.path {str(path)!r} holds no {PREFIX}_<category>.json files; point it at BFCL's data "
                       "folder (bfcl_eval/data: the question files and possible_answer/)")


def case_problems(case: Any, category: str) -> list[str]:
    """Everything wrong with one question record (empty when it is usable)."""
    found = id_problems(case, category)
    if found:
        return found
    turns = case.get("question")
    if not (isinstance(turns, list) and len(turns) == 1 and isinstance(turns[0], list) and turns[0]
            and all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in turns[0])):
        return ["question must be one turn: a non-empty list of {role, content} messages"]
    if turns[0][-1].get("role") != "user":
        return [f"the last message is {turns[0][-1].get('role')!r}, not the user's"]
    functions = case.get("function")
    if not isinstance(functions, list) or not all(_function_ok(f) for f in functions):
        return ["function must be a list of {name, description, parameters: {properties, required}}"]
    return []


def _function_ok(function: Any) -> bool:
    params = function.get("parameters") if isinstance(function, dict) else None
    return (isinstance(function.get("name"), str) and isinstance(params, dict)
            and isinstance(params.get("properties"), dict) and isinstance(params.get("required", []), list))


def answer_problems(answer: Any, case: dict[str, Any]) -> list[str]:
    """Everything wrong with a possible-answer record for its question."""
    if not isinstance(answer, dict) or answer.get("id") != case["id"]:
        got = answer.get("id") if isinstance(answer, dict) else answer
        return [f"the possible answer on this line is for {got!r}, not {case['id']!r} (the files align by line)"]
    calls = answer.get("ground_truth")
    if not (isinstance(calls, list) and calls and all(isinstance(c, dict) and len(c) == 1
                                                      and isinstance(next(iter(c.values())), dict) for c in calls)):
        return ["ground_truth must be a non-empty list of {function: {param: [acceptable values]}}"]
    return []


def first_choice(values: list[Any], declared: dict[str, Any], required: bool = False) -> tuple[bool, Any]:
    """(given, value): a parameter's first acceptable value; `""` first means it is left out, except
    for a required parameter (BFCL fails a call without it), which takes its first real value. A
    dict's (and a list of dicts') acceptable value lists each key's choices: their first ones."""
    real = [v for v in values if v != ""] if required else values
    if not real or real[0] == "":
        return False, None
    value, kind = real[0], declared.get("type")
    item_kind = (declared.get("items") or {}).get("type")
    if kind == "dict" and isinstance(value, dict):
        return True, _first_dict(value)
    if kind in ("array", "tuple") and item_kind == "dict" and isinstance(value, list):
        return True, [_first_dict(v) if isinstance(v, dict) else v for v in value]
    return True, value


def _first_dict(choices: dict[str, Any]) -> dict[str, Any]:
    return {k: v[0] for k, v in choices.items() if isinstance(v, list) and v and v[0] != ""}


def gold_calls(functions: list[dict[str, Any]], ground_truth: list[dict[str, Any]]) -> list[tuple[str, dict]]:
    """Every expected call with its parameters' first acceptable values (see `first_choice`), in the
    function's declaration order."""
    declared = {f["name"]: f["parameters"] for f in functions}
    calls = []
    for expected in ground_truth:
        (name, params), = expected.items()
        spec = declared.get(name, {})
        properties, required = spec.get("properties", {}), spec.get("required", [])
        chosen = {p: first_choice(v, properties.get(p, {}), p in required) for p, v in params.items()}
        # in declaration order, as the call grammar writes them (BFCL's checker takes any order);
        # a parameter the function does not declare (a defect of the data) last
        order = {p: i for i, p in enumerate(properties)}
        ordered = sorted(chosen.items(), key=lambda item: order.get(item[0], len(order)))
        calls.append((name, {p: value for p, (given, value) in ordered if given}))
    return calls


def _row(case: dict[str, Any], category: str, answer: Optional[dict[str, Any]]) -> dict[str, Any]:
    messages = case["question"][0]
    system = messages[0]["content"] if messages[0]["role"] == "system" and len(messages) > 1 else None
    earlier = messages[1 if system is not None else 0:-1]
    functions = case["function"]
    truth = answer["ground_truth"] if answer else None
    calls = gold_calls(functions, truth) if truth else []
    if category == "live_relevance" and functions:
        calls = [(functions[0]["name"], {})]  # any call passes: the first function, no arguments
    return sample_row(
        setting=category, entry_id=number(case["id"]), scorer=SCORER,
        system=OWN.system(functions, system), user=messages[-1]["content"], native_system=system,
        tools=schema_tools(functions), tool_specs=OWN.functions_with_hint(functions),
        gold_tool=calls[0][0] if calls else None, gold_params=calls[0][1] if calls else None,
        allow_refusal=True,
        inputs={"bfcl_id": case["id"], "functions": functions, "possible_answer": truth,
                "gold_calls": [{"name": n, "arguments": a} for n, a in calls],
                "prior_turns": [{"role": m["role"], "content": m["content"]} for m in earlier] if earlier else None,
                "grammar": call_grammar(functions, MAX_CALLS)})


def _category_rows(root: Path, category: str) -> tuple[list[dict[str, Any]], list[str]]:
    if category in MULTI_TURN:
        return multi_turn_rows(root, category)
    questions_path, answers_path = question_files(root, category)
    cases = read_jsonl(questions_path)
    answers = read_jsonl(answers_path) if answers_path else None
    if answers is not None and len(answers) != len(cases):
        return [], [f"{answers_path.name}: {len(answers)} possible answers for {len(cases)} questions "
                    f"in {questions_path.name} (the files align by line)"]
    rows, problems = [], []
    for line, case in enumerate(cases, start=1):
        found = case_problems(case, category)
        if not found and answers is not None:
            found = answer_problems(answers[line - 1], case)
        problems += [f"{questions_path.name}: line {line}: {p}" for p in found]
        if not found:
            rows.append(_row(case, category, answers[line - 1] if answers is not None else None))
    return rows, problems


def load_bfcl(path: Path, settings: tuple[str, ...], limit: int | None = None) -> pl.DataFrame:
    """The sample table of the chosen categories, the first `limit` cases of each."""
    root = data_root(Path(path).expanduser())
    rows, problems = [], []
    for category in settings:
        found_rows, found = _category_rows(root, category)
        rows += found_rows
        problems += found
    raise_problems(problems, root)
    return sample_table(rows, settings, limit, SCORER)


def python_calls(calls: list[dict[str, Any]]) -> str:
    """Calls in BFCL's prompt-mode syntax: `[f(a=1, b='x'), g()]` (values as Python literals)."""
    return python_call_list((c["name"], c["arguments"]) for c in calls)


def gold_answer(row: dict[str, Any], fmt: str, parser: str) -> str:
    """A case's gold answer as its format writes it: every expected call with its first
    acceptable values (none for irrelevance: `[]`, or plain text in the native format)."""
    calls = json.loads(row["gold_calls"])
    if fmt != NATIVE_FORMAT:
        return python_calls(calls)
    if not calls:
        return NATIVE_NO_CALL
    family = CALL_FORMATS[parser]
    return family.separator.join(
        family.prefix + json.dumps({"name": c["name"], family.args_key: c["arguments"]}, ensure_ascii=False)
        + family.suffix for c in calls)
