"""BFCL's multi-turn verdict, as `_evaluate_single_multi_turn_entry` and `multi_turn_checker` give it.

A case's answer is every step's raw text, per user turn (`[[step, ...], ...]`, BFCL's
`model_result_list`). Grading, as BFCL's:

1. fewer turns than the ground truth (the loop force-quit a turn before the last) fails the case
   (`multi_turn:force_terminated`); a force quit in the last turn leaves every turn there, so
   only the turns are compared, as in BFCL;
2. every step is decoded again; a step that does not decode, or decodes to no call, is skipped;
3. turn by turn, the model's decoded steps run on fresh instances of the case's classes and the
   turn's ground-truth calls on another set (BFCL's own classes, environments.py; calls run as
   execution.py runs them); where the ground truth of a turn has calls: the turn must have a
   decoded step (`multi_turn:empty_turn_model_response`), every instance's public attributes
   must equal the ground truth's (`multi_turn:instance_state_mismatch`), and the ground truth's
   results of this turn must all be among the model's results of all turns so far, in any order
   (`multi_turn:execution_response_mismatch`). A turn whose ground truth is empty is not checked
   (BFCL's irrelevance check for such turns is never called): calls made there count only
   through the state and results later turns compare.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from grading.scorers.bfcl.execution import (CaseEnvironment, Undecodable, execution_list, hermes_execution_list,
                                            is_empty)

MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
MAX_STEPS = 20
"""BFCL's MAXIMUM_STEP_LIMIT: a turn's 21st call step force-quits the case."""
FORCE_TERMINATED = "multi_turn:force_terminated"
EMPTY_TURN = "multi_turn:empty_turn_model_response"
STATE_MISMATCH = "multi_turn:instance_state_mismatch"
RESPONSE_MISMATCH = "multi_turn:execution_response_mismatch"
INFERENCE_ERROR = "multi_turn:inference_error"
_SHOWN_CHARS = 2000


def is_long_context(category: str) -> bool:
    """BFCL loads the long-context scenario for `long_context` (and composite) categories."""
    return "long_context" in category or "composite" in category


@dataclass(frozen=True)
class Case:
    """What grading needs of one multi-turn case."""

    case_id: str
    category: str
    initial_config: dict[str, Any]
    involved_classes: list[str]
    ground_truth: list[list[str]]


@dataclass
class Verdict:
    valid: bool
    error_type: Optional[str] = None
    message: Optional[str] = None
    turn: Optional[int] = None
    """The turn the check failed at."""
    differences: Optional[dict[str, Any]] = None
    """For a state mismatch: {class: {attribute: {model, ground_truth}}} (values as text)."""
    decoded: list[list[list[str]]] = field(default_factory=list)
    """Every decoded step's call strings, per turn (what was executed)."""


def reader(native: bool) -> Any:
    """The step reader: BFCL's prompt-mode decoder, or its Hermes-style FC handler's."""
    return hermes_execution_list if native else execution_list


def decode_turns(turns: list[list[str]], native: bool = False) -> list[list[list[str]]]:
    """BFCL's grading decode: each step's calls; a step that fails or decodes to nothing skipped."""
    read = reader(native)
    decoded = []
    for turn in turns:
        steps = []
        for text in turn:
            try:
                calls = read(text)
            except Undecodable:
                continue
            if not is_empty(calls):
                steps.append(calls)
        decoded.append(steps)
    return decoded


def evaluate(turns: Any, case: Case, classes: dict[str, type], native: bool = False) -> Verdict:
    """BFCL's verdict on one case's answer (`turns`: the steps' raw texts per turn)."""
    if not isinstance(turns, list):
        return Verdict(False, INFERENCE_ERROR, "Error during inference phase. Model did not output a list of model "
                       "responses.")
    if len(turns) != len(case.ground_truth):
        return Verdict(False, FORCE_TERMINATED, f"Model was force-terminated during inference phase. The length of the "
                       f"model result turns ({len(turns)}) does not match the length of the ground truth turns "
                       f"({len(case.ground_truth)}).")
    decoded = decode_turns(turns, native)
    verdict = check(decoded, case, classes)
    verdict.decoded = decoded
    return verdict


def check(decoded: list[list[list[str]]], case: Case, classes: dict[str, type]) -> Verdict:
    """BFCL's `multi_turn_checker` over decoded steps."""
    long_context = is_long_context(case.category)
    model = CaseEnvironment(classes, case.initial_config, case.involved_classes, long_context,
                            f"toolsweep_eval_{case.case_id}")
    truth = CaseEnvironment(classes, case.initial_config, case.involved_classes, long_context,
                            f"toolsweep_ground_truth_eval_{case.case_id}")
    all_results: list[str] = []
    for index, expected in enumerate(case.ground_truth):
        steps = decoded[index]
        for step in steps:
            all_results.extend(model.run(step))
        expected_results = truth.run(expected)
        if not expected:
            continue  # BFCL checks nothing in a turn whose ground truth is empty
        if not steps:
            return Verdict(False, EMPTY_TURN, f"Model response list is empty for turn {index}", index)
        differences = state_differences(model.instances, truth.instances)
        if differences:
            name = next(iter(differences))
            return Verdict(False, STATE_MISMATCH, f"Model instance for {name} does not match the state with ground "
                           "truth instance.", index, differences)
        missing = missing_results(expected_results, all_results)
        if missing:
            return Verdict(False, RESPONSE_MISMATCH, "Model response execution results so far does not contain all the "
                           f"ground truth response execution results for turn {index}.", index,
                           {"missing_items": [_shown(m) for m in missing]})
    return Verdict(True)


def state_differences(model: dict[str, Any], truth: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """BFCL's `state_checker`: the first class whose public attributes differ, and how (empty: equal)."""
    for class_name, expected in truth.items():
        actual = model[class_name]
        differences = {}
        for attribute in vars(expected):
            if attribute.startswith("_"):
                continue
            got, want = getattr(actual, attribute), getattr(expected, attribute)
            if got != want:
                differences[attribute] = {"model": _shown(got), "ground_truth": _shown(want)}
        if differences:
            return {class_name: differences}
    return {}


def missing_results(expected: list[str], got: list[str]) -> list[str]:
    """BFCL's `_is_subsequence_unordered`: the expected results not among `got` (each used once)."""
    left = list(got)
    missing = []
    for item in expected:
        try:
            left.remove(item)
        except ValueError:
            missing.append(item)
    return missing


def _shown(value: Any) -> str:
    try:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=repr, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + f"... ({len(text)} characters)"
