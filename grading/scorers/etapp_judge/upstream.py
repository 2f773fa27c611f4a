"""ETAPP's judge as upstream runs it (dataset.prompts=upstream), model-free: the answer skeleton
its evaluator builds, its judge message filled as its evaluator fills it, and a free answer read as
its evaluator reads it (spec `etapp.md` section 3).

The texts are upstream's, read from the user's ETAPP copy by inference/benchmarks/etapp/
prompt_files.py and passed in; the project's own protocol, and what both share (the key names,
the `Judgement`), live in rubric.py.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

from grading.errors import GradingError
from grading.scorers.etapp_judge.rubric import (DIMENSIONS, FINAL_KEY, FINAL_MAX, KEYPOINT_MAX, KEYPOINTS_KEY,
                                                Judgement, _at, _clip, _points_of, _shown, _Unreadable,
                                                judge_template, keypoints)

PERSONAL_MARK, PROACTIVE_MARK = "\0personal", "\0proactive"
"""Where upstream's skeleton dict holds its per-case key-point dicts (read from its evaluator)."""


def upstream_skeleton(personal: Sequence[str], proactive: Sequence[str],
                      hints: tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]] | None) -> dict[str, Any]:
    """The skeleton upstream's evaluator builds: its `output_format` dict (hints = that dict with
    the two marks, and one slot each for a personal and a proactive key point) with one slot per
    key point, duplicates collapsed as its dict assignment collapses them. Without upstream's
    evaluator file (hints None) the project's own hints stand in."""
    if hints is None:
        return judge_template(personal, proactive)
    layout, personal_slot, proactive_slot = hints
    points = {PERSONAL_MARK: {p: dict(personal_slot) for p in personal},
              PROACTIVE_MARK: {p: dict(proactive_slot) for p in proactive}}

    def filled(node: Any) -> Any:
        if isinstance(node, str) and node in points:
            return points[node]
        return {k: filled(v) for k, v in node.items()} if isinstance(node, Mapping) else node

    return filled(layout)


def upstream_judge_prompt(template: str, skeleton: Mapping[str, Any], query: str, profile: Mapping[str, Any],
                          preferences: Sequence[Mapping[str, Any]], trajectory: str, personal: Sequence[str],
                          proactive: Sequence[str]) -> str:
    """Upstream's judge message: its template filled with the arguments its evaluator passes
    (`personal`/`proactive`: the case's key point lists as written, duplicates included)."""
    unique_personal, unique_proactive = keypoints(personal, proactive)
    values = {"profile": json.dumps(profile) + "\n" + str(list(preferences)), "query": query,
              "personal": {p: skeleton_slot(skeleton, "Personalization", p) for p in unique_personal},
              "proactive": {p: skeleton_slot(skeleton, "Proactivity", p) for p in unique_proactive},
              "output_format": json.dumps(skeleton, indent=4), "keypoint_for_personal": list(personal),
              "keypoint_for_proactive": list(proactive), "output": trajectory}
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError) as exc:
        raise GradingError(f"the judge template has a placeholder upstream's evaluator does not fill ({exc!r}); it "
                           f"fills {sorted(values)}. Restore evaluation/evaluate_prompt.py, or set "
                           "dataset.prompts=own") from None


def skeleton_slot(skeleton: Mapping[str, Any], dimension: str, point: str) -> Any:
    return skeleton.get(dimension, {}).get(KEYPOINTS_KEY[dimension], {}).get(point)


_UPSTREAM_FENCE = re.compile(r"```json(.*?)```", re.DOTALL)


def read_upstream_answer(text: str, personal: Sequence[str], proactive: Sequence[str]) -> Judgement | str:
    """A free judge answer read as upstream's evaluator reads it: the first ```json fence (no
    other fence, no bare JSON), every backslash doubled before decoding (so escapes stay literal,
    an invalid escape such as `\\d` passes, and an escaped backslash before a closing quote breaks
    the string), each Final Assessment score through `int()` (4.9 reads 4, "4.5" is unreadable).
    Key-point scores, which upstream never reads, are kept where they read the same way. A score
    outside 0-5 is refused here (upstream would add it to its sums)."""
    if not isinstance(text, str):
        return f"judge answer must be text, got {_clip(text)}"
    fenced = _UPSTREAM_FENCE.search(text)
    if not fenced:
        return "judge answer has no ```json block (upstream's reader needs one)"
    body = fenced.group(1).strip().replace("\\", "\\\\").replace('\\"', '\\\\"')
    try:
        answer = json.loads(body)
        finals = {d: _upstream_score(_at(answer, (d, FINAL_KEY, "score")), (d, FINAL_KEY), FINAL_MAX)
                  for d in DIMENSIONS}
    except json.JSONDecodeError as exc:
        return f"judge answer's ```json block is not JSON after upstream's backslash doubling: {exc}"
    except _Unreadable as exc:
        return str(exc)
    points = {d: _readable_points(answer, d, kps) for d, kps in _points_of(personal, proactive).items()}
    return Judgement(finals["Procedure"], finals["Personalization"], finals["Proactivity"],
                     points["Procedure"], points["Personalization"], points["Proactivity"])


def _upstream_score(value: Any, path: Sequence[str], top: int) -> int:
    try:
        number = int(value)  # upstream's reading exactly: int() of whatever the judge wrote
    except (TypeError, ValueError, OverflowError):
        raise _Unreadable(f"judge score at {_shown(path)} does not read through int(): {_clip(value)}") from None
    if not 0 <= number <= top:
        raise _Unreadable(f"judge score at {_shown(path)} must be from 0 to {top}, got {_clip(value)}")
    return number


def _readable_points(answer: Any, dimension: str, points: Sequence[str]) -> dict[str, int]:
    found = {}
    for point in points:
        try:
            found[point] = _upstream_score(_at(answer, (dimension, KEYPOINTS_KEY[dimension], point, "score")),
                                           (dimension, point), KEYPOINT_MAX)
        except _Unreadable:
            continue
    return found
