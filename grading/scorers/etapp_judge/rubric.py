"""ETAPP's judge, model-free: the per-case prompt, its guided-decoding schema, the trajectory as
the judge reads it, and the reading of the judge's answer (spec `etapp.md` section 3).

The prompt is toolsweep's own text with upstream's structure and facts: task, the three
dimensions with 0-5 anchors, the 0/1/2 key-point scale, the JSON skeleton, then query, profile
and solution, then instructions. The JSON key names are upstream's, misspellings included,
because they are data: a judge answer, or a guided schema, must use them exactly.

Upstream's own protocol (its template, skeleton and answer reader, dataset.prompts=upstream) is
upstream.py beside this module; what both read (the key names, `Judgement`) is here.

Nothing here calls a model. The engine that runs the judge lives in inference/ and passes the
judge's text back here; the scores then travel to grading as table columns.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from grading.errors import GradingError

PROCEDURE_KEYS: tuple[str, ...] = (
    "Completeness",
    "Avoid Unneccessary Action",
    "Call the tool accurate",
    "Summary the query clearly and comperhensive",
)
"""The fixed procedure sub-points, spelt as upstream's template spells them."""

DIMENSIONS: tuple[str, ...] = ("Procedure", "Personalization", "Proactivity")
KEYPOINTS_KEY: dict[str, str] = {d: f"Keypoints for {d}" for d in DIMENSIONS}
FINAL_KEY = "Final Assessment"
ANALYSIS_KEY: dict[str, str] = {"Procedure": "anlysis", "Personalization": "analysis", "Proactivity": "Analysis"}
"""The analysis key of each dimension's Final Assessment: upstream's three spellings, kept."""
POINT_ANALYSIS = "analysis"
KEYPOINT_MAX, FINAL_MAX = 2, 5

METHODS: dict[str, int] = {"fc": 2, "react": 2, "e_react": 4}
"""Method -> leading trajectory messages the judge does not see (system and query; E-ReAct
also its plan turn and the execution prompt)."""
FINISH = "finish"


def keypoints(personal: Sequence[str], proactive: Sequence[str]) -> tuple[list[str], list[str]]:
    """The key points as the judge sees them: duplicates collapsed, first appearance kept
    (they become JSON keys, so upstream's instruction 18 has 5 proactive keys, not 6)."""
    return list(dict.fromkeys(personal)), list(dict.fromkeys(proactive))


def _points_of(personal: Sequence[str], proactive: Sequence[str]) -> dict[str, list[str]]:
    unique_personal, unique_proactive = keypoints(personal, proactive)
    return {"Procedure": list(PROCEDURE_KEYS), "Personalization": unique_personal,
            "Proactivity": unique_proactive}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


ANALYSIS_CHARS = "[ !#-\\[\\]-~]"
"""What an analysis may hold under guided decoding: printable ASCII without `"` and `\\`, so no
character needs an escape and none takes more than one byte, hence at most one token."""
_RUN = 128
"""The longest single repetition xgrammar compiles (`X{0,129}` fails its grammar check)."""


def analysis_pattern(chars: int) -> str:
    """A pattern for 0..chars analysis characters, as optional runs of at most 128 plus a free
    tail of up to 128 (every length is reachable; each repetition stays compilable)."""
    runs, left = [], chars - _RUN
    while left > 0:
        runs.append(f"({ANALYSIS_CHARS}{{{min(left, _RUN)}}})?")
        left -= _RUN
    return "^" + "".join(runs) + f"{ANALYSIS_CHARS}{{0,{min(chars, _RUN)}}}$"


def _scored(analysis_key: str, top: int, analysis_chars: int) -> dict[str, Any]:
    # Analysis first: under guided decoding the judge writes its reasons before the score.
    return _object({analysis_key: {"type": "string", "pattern": analysis_pattern(analysis_chars)},
                    "score": {"type": "integer", "enum": list(range(top + 1))}})


def judge_schema(personal: Sequence[str], proactive: Sequence[str], analysis_chars: int) -> dict[str, Any]:
    """The JSON schema of one case's judge answer, for guided decoding: every property
    required in template order, no extra properties, integer score enums, analyses capped."""
    if isinstance(analysis_chars, bool) or not isinstance(analysis_chars, int) or analysis_chars < 1:
        raise GradingError(f"analysis_chars must be a positive integer, got {analysis_chars!r}; "
                           "e.g. 600 keeps a judge answer near 2k tokens")
    dimensions = {
        dim: _object({KEYPOINTS_KEY[dim]: _object({p: _scored(POINT_ANALYSIS, KEYPOINT_MAX, analysis_chars)
                                                   for p in points}),
                      FINAL_KEY: _scored(ANALYSIS_KEY[dim], FINAL_MAX, analysis_chars)})
        for dim, points in _points_of(personal, proactive).items()}
    return _object(dimensions)


def analysis_count(personal: Sequence[str], proactive: Sequence[str]) -> int:
    """How many analysis strings one answer holds: one per key point and one per dimension."""
    return sum(len(points) + 1 for points in _points_of(personal, proactive).values())


def answer_skeletons(personal: Sequence[str], proactive: Sequence[str]) -> tuple[str, str]:
    """The longest guided answer with every analysis empty, in both spellings a backend may give
    its keys (raw and ASCII-escaped): compact separators (the backends emit no optional
    whitespace), every score one digit."""
    def slot(analysis_key: str) -> dict[str, Any]:
        return {analysis_key: "", "score": 0}

    answer = {dim: {KEYPOINTS_KEY[dim]: {p: slot(POINT_ANALYSIS) for p in points}, FINAL_KEY: slot(ANALYSIS_KEY[dim])}
              for dim, points in _points_of(personal, proactive).items()}
    return tuple(json.dumps(answer, separators=(",", ":"), ensure_ascii=a) for a in (False, True))


def skeleton_bytes(personal: Sequence[str], proactive: Sequence[str]) -> int:
    """The bytes of the answer's fixed text (keys, punctuation, one-digit scores), in its longer spelling."""
    return max(len(text.encode()) for text in answer_skeletons(personal, proactive))


def fitting_analysis_chars(personal: Sequence[str], proactive: Sequence[str], max_new_tokens: int,
                           wanted: int) -> int:
    """The analysis cap (at most `wanted`) under which the longest guided answer fits
    `max_new_tokens` whatever tokens the judge picks; 0 when not even empty analyses fit.

    Every token a guided backend may emit decodes to at least one byte, so an answer of B bytes
    takes at most B tokens, plus one for the end of sequence. The longest answer is the skeleton
    plus every analysis at the cap, an analysis character being one byte (ANALYSIS_CHARS). The
    skeleton is counted in bytes, not in the tokenizer's own tokens: a guided model may spell a
    forced key in smaller tokens than its tokenizer would (seen with the embedded model)."""
    room = max_new_tokens - skeleton_bytes(personal, proactive) - 1
    return max(min(wanted, room // analysis_count(personal, proactive)), 0)


def judge_template(personal: Sequence[str], proactive: Sequence[str]) -> dict[str, Any]:
    """The skeleton the prompt shows: the schema's keys, with a hint in place of each value."""
    def slot(analysis_key: str, top: int) -> dict[str, str]:
        return {analysis_key: "<your reasons>", "score": f"<an integer from 0 to {top}>"}

    return {dim: {KEYPOINTS_KEY[dim]: {p: slot(POINT_ANALYSIS, KEYPOINT_MAX) for p in points},
                  FINAL_KEY: slot(ANALYSIS_KEY[dim], FINAL_MAX)}
            for dim, points in _points_of(personal, proactive).items()}


def _converted(message: Mapping[str, Any]) -> dict[str, Any]:
    # Spec 3.2's rules, in order; a copy, so the caller's trajectory is left as it was.
    out = dict(message)
    if "tool_calls" not in out or out["tool_calls"] is None:
        return out
    calls = out["tool_calls"]
    if isinstance(calls, dict):
        if calls.get("name") != FINISH:
            raise GradingError(f"a tool_calls value that is a single dict must be the {FINISH!r} call, got "
                               f"{calls!r}; record other calls as a list of dicts")
        return _finished(out, calls)
    if calls == []:
        out["tool_calls"] = None
    elif isinstance(calls, list) and isinstance(calls[0], dict) and calls[0].get("name") == FINISH:
        return _finished(out, calls[0])
    return out


def _finished(message: dict[str, Any], call: Mapping[str, Any]) -> dict[str, Any]:
    # The answer joins the thought: a ReAct final reads 'I now know the final answer\n<answer>',
    # an FC final (empty content) '\n<answer>'. A None content or a non-string answer would
    # crash upstream; they are read as '' and as str(answer).
    answer = call.get("arguments", "")
    message["content"] = f"{message.get('content') or ''}\n{answer if isinstance(answer, str) else str(answer)}"
    message["tool_calls"] = None
    return message


def render_trajectory(messages: Sequence[Mapping[str, Any]], method: str) -> str:
    """The solution as the judge reads it: the leading prompt messages dropped, the finish call
    folded into the final answer, each message as its Python repr, one per line."""
    if method not in METHODS:
        raise GradingError(f"method must be one of {list(METHODS)}, got {method!r}")
    return "\n".join(str(_converted(m)) for m in messages[METHODS[method]:])


def preferences_for(available_tools: Sequence[str], called_tools: Sequence[str],
                    concrete_profile: Mapping[str, Any], tool_domain: Mapping[str, str | None]) -> list[dict]:
    """The user's preference dicts the judge sees: the domains of the listed tools, then of the
    tools the agent called, each once in first-appearance order; tools without a domain
    (weather, the search tools, unknown names) add nothing."""
    domains = [tool_domain.get(name) for name in (*available_tools, *called_tools)]
    wanted = list(dict.fromkeys(d for d in domains if d is not None))
    missing = [d for d in wanted if d not in concrete_profile]
    if missing:
        raise GradingError(f"the concrete profile has no domains {missing}; it has {sorted(concrete_profile)}. "
                           "Pass the user's profile/concrete_profile/profile_<User>.json")
    return [concrete_profile[d] for d in wanted]


_TASK = """\
You are grading how well an AI assistant served one user. The assistant can call tools \
(calendar, email, health records, music, navigation, shopping, smart-home devices, weather, \
news and web pages) and it knows the user's profile and tool-use preferences. Read the user's \
query, the user's profile and the assistant's whole solution (its messages, tool calls and the \
tool results), then grade the solution on three dimensions: Procedure, Personalization and \
Proactivity."""

_DIMENSIONS = """\
## The three dimensions

### Procedure: did the assistant carry the task out well?
Four fixed points, each scored on its own:
- Completeness: every part of the query was handled.
- Avoid Unneccessary Action: no repeated, redundant or irrelevant tool calls.
- Call the tool accurate: the tools chosen fit the need, with valid and correct arguments.
- Summary the query clearly and comperhensive: the final answer sums the results up clearly \
and covers everything the user asked for.
Final Assessment (0-5):
- 5: flawless; complete, no wasted calls, every call correct, a clear and full final answer.
- 4: complete and correct, with one minor slip (a superfluous call, a small gap in the answer).
- 3: mostly done, with one clear problem: a part of the query missed, several needless or \
invalid calls, or a thin final answer.
- 2: only partly done; important parts are missing or several calls are wrong.
- 1: hardly anything useful came out of the attempt, or the answer misses the query.
- 0: no usable solution at all.

### Personalization: does the solution fit this particular user?
It should draw on the user's profile (age, work, interests, habits) and on their stated tool \
preferences when it picks tools, sets arguments and words the answer.
Final Assessment (0-5):
- 5: every relevant preference and profile detail is applied; the answer is clearly made for \
this user.
- 4: most relevant preferences are applied; a minor one is overlooked.
- 3: some personal details are used, but important preferences are missed or used only on the \
surface.
- 2: a generic answer with a token nod to the user.
- 1: almost no personalization.
- 0: none, or the solution goes against the user's known preferences.

### Proactivity: does the assistant look beyond the literal request?
It should anticipate related needs: notice relevant information, warn of conflicts or risks, \
suggest sensible next steps or take helpful extra actions, without overstepping.
Final Assessment (0-5):
- 5: anticipates the user's underlying needs thoroughly, with well-judged and useful extra help.
- 4: clear and useful initiative; one opportunity is missed.
- 3: some initiative, but several obvious opportunities are missed.
- 2: mostly reactive, with at most a vague offer of further help.
- 1: purely reactive.
- 0: no initiative at all, or an unwanted action taken unasked.

## Key points
For Personalization and Proactivity, the skeleton below lists reference key points: what an \
ideal solution for this query would do, written by people. Score each key point, and each of \
the four procedure points, on this scale:
- 2: fully achieved;
- 1: partly achieved;
- 0: not achieved.
Write the analysis before the score. Each Final Assessment is your overall judgement of its \
dimension on the 0-5 scale, informed by its key points."""

_INSTRUCTIONS = """\
## Instructions
- Judge only what the solution shows; do not assume calls or results that are not in it.
- A tool call answered with error feedback (an unknown tool, missing or malformed arguments, \
an error message) counts as an invalid call.
- Format reminders from the system (`user` messages in the solution) are evidence of format \
errors or of calls that were not needed; weigh them in Procedure.
- A key point that objectively does not apply to this query may be set aside: say why in its \
analysis.
- Judge each dimension only on what concerns it; do not let one dimension's findings lower \
another's score.
- Keep every key of the skeleton exactly as written and fill each one; every score is an integer.
- Reply with the filled skeleton as one fenced block that starts with ```json and ends with ```.

About the solution's format: it lists the messages after the query, one per line, each a \
Python dict. `assistant` messages hold the assistant's reasoning and its tool calls \
(`tool_calls`: each call's tool name and arguments); `tool` messages hold what the tool \
returned; `user` messages are reminders the system sent about the output format. The final \
answer the user saw is the `assistant` message whose content ends with it and whose `tool_calls` \
is None; a message that begins "Cannot solve this task" is the system stopping the run (too many \
turns, calls or tokens), not an answer, and it may follow the final answer."""


def judge_prompt(query: str, profile: Mapping[str, Any], preferences: Sequence[Mapping[str, Any]],
                 trajectory: str, personal: Sequence[str], proactive: Sequence[str]) -> str:
    """The judge's single user message for one case. `trajectory` is `render_trajectory`'s text;
    the key points reach the judge only as keys of the skeleton, as upstream."""
    skeleton = json.dumps(judge_template(personal, proactive), indent=4)
    # The profile block as upstream builds it: the high-level profile as JSON, then the
    # preference dicts as a Python repr.
    profile_block = json.dumps(profile) + "\n" + repr(list(preferences))
    return "\n\n".join([
        _TASK, _DIMENSIONS,
        f"## Answer skeleton\n{skeleton}",
        f"## User query\n{query}",
        f"## User profile and preferences\n{profile_block}",
        f"## Assistant's solution\n{trajectory}",
        _INSTRUCTIONS,
    ])


@dataclass(frozen=True)
class Judgement:
    """The scores of one judge answer (its analyses are not kept: only scores are aggregated)."""

    procedure: int
    """Procedure's Final Assessment, 0-5."""
    personalization: int
    """Personalization's Final Assessment, 0-5."""
    proactivity: int
    """Proactivity's Final Assessment, 0-5."""
    procedure_points: Mapping[str, int]
    """{procedure sub-point: 0-2}, in PROCEDURE_KEYS order."""
    personal_points: Mapping[str, int]
    """{personalization key point: 0-2}, duplicates collapsed, in template order."""
    proactive_points: Mapping[str, int]
    """{proactivity key point: 0-2}, duplicates collapsed, in template order."""

    def keypoint_scores(self) -> dict[str, dict[str, int]]:
        """The per-key-point scores as the sample table's `judge_keypoints` JSON holds them."""
        return {"personal": dict(self.personal_points), "proactive": dict(self.proactive_points),
                "procedure": dict(self.procedure_points)}


class _Unreadable(ValueError):
    """A judge answer that cannot be read; its message is what parse_judgement returns."""


_FENCE = re.compile(r"```[ \t]*(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_INTEGER = re.compile(r"[+-]?\d+(?:\.0*)?")


def _json_of(text: str) -> Any:
    # Upstream doubles every backslash before decoding, which breaks escaped quotes; not here.
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text.strip()
    try:
        return json.loads(body)
    except (json.JSONDecodeError, RecursionError) as exc:
        where = "its ```json block" if fenced else "the answer (no ```json block found)"
        raise _Unreadable(f"judge answer is not JSON: {exc} in {where}; the judge must reply with the "
                          "filled skeleton in a ```json fence") from None


def _at(answer: Any, path: Sequence[str]) -> Any:
    node = answer
    for depth, key in enumerate(path):
        if not isinstance(node, dict):
            raise _Unreadable(f"judge answer at {_shown(path[:depth]) or 'the top'} must be an object, got "
                              f"{_clip(node)}; the judge must fill the skeleton as given")
        if key not in node:
            raise _Unreadable(f"judge answer lacks {_shown(path[:depth + 1])}; every key of the skeleton "
                              "must be filled, spelt exactly as given")
        node = node[key]
    return node


def _score(answer: Any, path: Sequence[str], top: int) -> int:
    value = _at(answer, path)
    # Upstream int()s the score: an integer, or an integer-valued float or string, reads as that
    # integer; '4.5' crashed upstream's run and is an unreadable answer here.
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and _INTEGER.fullmatch(value.strip()) and len(value) < 20:
        number = int(value.strip().split(".")[0])
    if number is None or not 0 <= number <= top:
        raise _Unreadable(f"judge score at {_shown(path)} must be an integer from 0 to {top}, got {_clip(value)}")
    return number


def _shown(path: Sequence[str]) -> str:
    return " > ".join(repr(k) for k in path)


def _clip(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def parse_judgement(text: str, personal: Sequence[str], proactive: Sequence[str]) -> Judgement | str:
    """The scores of a judge answer (bare JSON, or JSON in a ```json fence), or a message saying
    what is wrong: not JSON, a missing key, a score out of range or not an integer. Never raises
    on model output. Only scores are read; extra keys and the analyses' spelling do not matter."""
    if not isinstance(text, str):
        return f"judge answer must be text, got {_clip(text)}"
    try:
        answer = _json_of(text)
        finals = {d: _score(answer, (d, FINAL_KEY, "score"), FINAL_MAX) for d in DIMENSIONS}
        points = {d: {p: _score(answer, (d, KEYPOINTS_KEY[d], p, "score"), KEYPOINT_MAX) for p in kps}
                  for d, kps in _points_of(personal, proactive).items()}
    except _Unreadable as exc:
        return str(exc)
    return Judgement(finals["Procedure"], finals["Personalization"], finals["Proactivity"],
                     points["Procedure"], points["Personalization"], points["Proactivity"])
