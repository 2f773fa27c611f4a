"""Scripted model outputs for BFCL's multi-turn cases, built from each case's ground truth.

A script is the linear list of a model's raw outputs, in call order, for one case, in BFCL's prompt
syntax (a Python list of calls, e.g. ``[cd(folder='document'), mkdir(dir_name='temp')]``). The k-th
model call of the case (counting from 0 across all its user turns) gets the k-th text; a call past the
end gets ``""``. BFCL's loop (``BaseHandler.inference_multi_turn_prompting``) ends a turn at the first
step that decodes to no call (``""``, ``[]``) or fails to decode (prose, a cut text), and quits the
whole case once a turn has run more than ``MAXIMUM_STEP_LIMIT`` (20) call steps.

``scripts(case, ground_truth)`` gives every variant that applies to a case (variant name -> texts).
``case`` is the question record (only ``missed_function`` is read), ``ground_truth`` the
possible-answer record's per-turn lists of call strings. "gt_turn" below is the base most variants
change; a "step" is one model output.

- ``gt_turn``: per turn one step holding all that turn's ground-truth calls, then ``""`` to end the
  turn; a turn with no ground-truth call gets ``""`` only.
- ``gt_call``: per turn one step per ground-truth call, then ``""``.
- ``drop``: ``gt_call`` without the step of the case's last ground-truth call.
- ``changed``: ``gt_turn`` with the first keyword argument of the case's first call that has one
  changed (str: ``"_x"`` appended; bool: negated; int or float: plus 1; anything else: the string
  ``"x"``); that call is rewritten with ``ast.unparse``, the others are kept verbatim. Skipped when no
  call has a keyword argument.
- ``extra``: ``gt_turn`` with each non-empty turn's first call repeated at the end of its step.
- ``empty_turn``: ``gt_turn`` with the first non-empty turn answered by ``""`` only.
- ``calls_where_none``: ``gt_turn``, but every turn with no ground-truth call gets a step with the
  next non-empty turn's calls (the previous one's when none follows), then ``""``. Only for cases
  with such a turn.
- ``force_quit_first``: 21 steps in turn 0, each the single call that is turn 0's first ground-truth
  call (the case's first call when turn 0 has none), and nothing after: BFCL counts a step after
  executing it and quits when the count exceeds 20.
- ``force_quit_last``: ``gt_turn`` for every turn but the last; the last turn gets 21 steps of its
  first ground-truth call (of the case's first call when the last turn has none).
- ``prose_end``: ``gt_turn`` with each turn ended by the prose ``"Done. Anything else?"`` instead of
  ``""``.
- ``prose_first``: ``gt_turn`` with one prose step ``"Sure, let me look into that."`` before the
  first step.
- ``malformed``: ``gt_turn`` with the first step that holds calls cut to its first half; trailing
  spaces and commas and then one closing parenthesis are dropped from the cut, so that it never ends
  on a complete call (BFCL closes an unclosed list, so ``[f(a=1)`` would still decode).
- ``positional``: ``gt_turn`` with the first keyword argument of the case's first call that has
  one passed positionally instead (BFCL's decoder keeps keyword arguments only). Skipped when no call
  has a keyword argument.
- ``early`` (cases with ``missed_function`` only): the held-out turn's ground-truth calls moved into
  the step of the turn before it (the held-out function called before it is announced); the
  held-out turn gets ``""`` only.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

END = ""
PROSE_END = "Done. Anything else?"
PROSE_FIRST = "Sure, let me look into that."
FORCE_QUIT_STEPS = 21  # BFCL's MAXIMUM_STEP_LIMIT is 20 and it quits on `count > 20`

Turns = list[list[str]]  # per user turn, that turn's step texts


def step(calls: list[str]) -> str:
    """One model output holding `calls` in BFCL's prompt syntax."""
    return "[" + ", ".join(calls) + "]"


def scripts(case: dict, ground_truth: list[list[str]]) -> dict[str, list[str]]:
    """Every variant that applies to the case, as variant name -> texts in model-call order."""
    built = {}
    for name, build in VARIANTS.items():
        turns = build(case, ground_truth)
        if turns is not None:
            built[name] = [text for texts in turns for text in texts]
    return built


def _gt_turn(case: dict, gt: list[list[str]]) -> Turns:
    return [[step(calls), END] if calls else [END] for calls in gt]


def _gt_call(case: dict, gt: list[list[str]]) -> Turns:
    return [[step([call]) for call in calls] + [END] for calls in gt]


def _drop(case: dict, gt: list[list[str]]) -> Turns | None:
    last = _last_nonempty(gt)
    if last is None:
        return None
    turns = _gt_call(case, gt)
    del turns[last][len(gt[last]) - 1]
    return turns


def _changed(case: dict, gt: list[list[str]]) -> Turns | None:
    return _rewrite_first_keyword_call(gt, _change_first_keyword)


def _extra(case: dict, gt: list[list[str]]) -> Turns | None:
    if _first_nonempty(gt) is None:
        return None
    return [[step(calls + calls[:1]), END] if calls else [END] for calls in gt]


def _empty_turn(case: dict, gt: list[list[str]]) -> Turns | None:
    first = _first_nonempty(gt)
    if first is None:
        return None
    turns = _gt_turn(case, gt)
    turns[first] = [END]
    return turns


def _calls_where_none(case: dict, gt: list[list[str]]) -> Turns | None:
    if _first_nonempty(gt) is None or all(gt):
        return None
    turns = _gt_turn(case, gt)
    for index, calls in enumerate(gt):
        if not calls:
            later = [t for t in range(index + 1, len(gt)) if gt[t]]
            source = later[0] if later else max(t for t in range(index) if gt[t])
            turns[index] = [step(gt[source]), END]
    return turns


def _force_quit_first(case: dict, gt: list[list[str]]) -> Turns | None:
    call = gt[0][0] if gt[0] else _first_call(gt)
    if call is None:
        return None
    return [[step([call])] * FORCE_QUIT_STEPS]


def _force_quit_last(case: dict, gt: list[list[str]]) -> Turns | None:
    call = gt[-1][0] if gt[-1] else _first_call(gt)
    if call is None:
        return None
    return _gt_turn(case, gt)[:-1] + [[step([call])] * FORCE_QUIT_STEPS]


def _prose_end(case: dict, gt: list[list[str]]) -> Turns:
    return [[step(calls), PROSE_END] if calls else [PROSE_END] for calls in gt]


def _prose_first(case: dict, gt: list[list[str]]) -> Turns:
    turns = _gt_turn(case, gt)
    turns[0].insert(0, PROSE_FIRST)
    return turns


def _malformed(case: dict, gt: list[list[str]]) -> Turns | None:
    first = _first_nonempty(gt)
    if first is None:
        return None
    turns = _gt_turn(case, gt)
    text = turns[first][0]
    cut = text[: len(text) // 2].rstrip(" ,")
    turns[first][0] = cut[:-1] if cut.endswith(")") else cut
    return turns


def _positional(case: dict, gt: list[list[str]]) -> Turns | None:
    return _rewrite_first_keyword_call(gt, _make_first_keyword_positional)


def _early(case: dict, gt: list[list[str]]) -> Turns | None:
    held_out = sorted(int(turn) for turn in case.get("missed_function") or {})
    if not held_out or held_out[0] == 0:
        return None
    turns = _gt_turn(case, gt)
    for turn in held_out:
        calls = gt[turn - 1] + gt[turn]
        turns[turn - 1] = [step(calls), END] if calls else [END]
        turns[turn] = [END]
    return turns


VARIANTS: dict[str, Callable[[dict, list[list[str]]], Turns | None]] = {
    "gt_turn": _gt_turn,
    "gt_call": _gt_call,
    "drop": _drop,
    "changed": _changed,
    "extra": _extra,
    "empty_turn": _empty_turn,
    "calls_where_none": _calls_where_none,
    "force_quit_first": _force_quit_first,
    "force_quit_last": _force_quit_last,
    "prose_end": _prose_end,
    "prose_first": _prose_first,
    "malformed": _malformed,
    "positional": _positional,
    "early": _early,
}


def _first_nonempty(gt: list[list[str]]) -> int | None:
    return next((turn for turn, calls in enumerate(gt) if calls), None)


def _last_nonempty(gt: list[list[str]]) -> int | None:
    return next((turn for turn in reversed(range(len(gt))) if gt[turn]), None)


def _first_call(gt: list[list[str]]) -> str | None:
    first = _first_nonempty(gt)
    return None if first is None else gt[first][0]


def _rewrite_first_keyword_call(gt: list[list[str]], rewrite: Callable[[ast.Call], None]) -> Turns | None:
    """`gt_turn` with the case's first call that has a keyword argument rewritten in place."""
    for turn, calls in enumerate(gt):
        for index, call in enumerate(calls):
            node = ast.parse(call, mode="eval").body
            if isinstance(node, ast.Call) and node.keywords:
                rewrite(node)
                changed = [*calls[:index], ast.unparse(node), *calls[index + 1:]]
                turns = [[step(c), END] if c else [END] for c in gt]
                turns[turn] = [step(changed), END]
                return turns
    return None


def _change_first_keyword(call: ast.Call) -> None:
    keyword = call.keywords[0]
    try:
        value = ast.literal_eval(keyword.value)
    except ValueError:
        value = None
    if isinstance(value, bool):
        new = not value
    elif isinstance(value, (int, float)):
        new = value + 1
    elif isinstance(value, str):
        new = value + "_x"
    else:
        new = "x"
    keyword.value = ast.Constant(new)


def _make_first_keyword_positional(call: ast.Call) -> None:
    call.args.append(call.keywords.pop(0).value)
