"""ETAPP's agent texts and the per-step parsers the agent loop calls (spec section 2.2-2.3).

The prompts here are toolsweep's own wording, used where the user's ETAPP copy lacks upstream's
prompt files (`dataset.prompts=own`; texts.py picks the source): upstream has no license, so they
carry its structure and facts (persona and principles, profile / preferences / status blocks, the ReAct format and its
one-shot example, the E-ReAct plan) but none of its sentences. Dicts and lists appear as Python
repr because upstream fills its placeholders with `str.format`, and a judge or a model tuned on
upstream's trajectories sees that form. The abort strings are upstream's exactly: the judge reads
them as part of the trajectory.

Pure text; no model, no tool execution.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from inference.errors import ConfigError, DatasetError

from .options import METHODS
from .prompt_files import Reminders
SETTINGS = ("tool_given", "tool_retrieval")

ABORT_TURNS = "Cannot solve this task due to trying too many times."
ABORT_CALLS = "Cannot solve this task due to calling superabundant tools."
ABORT_TOKENS = "Cannot solve this task within specified token ."  # sic: upstream's space before the period

_PERSONA = (
    "You are a personal and proactive assistant woven into the user's own data and devices: their "
    "calendar and alarms, mail, health and workout records, music, shopping cart, smart home and news. "
    "Your job is to carry out the user's request with the tools at hand, fit the result to this "
    "particular user, and look ahead to what they will need next.\n\n"
    "Principles:\n"
    "1. Personalization: read the User Profile and the user's preferences before acting. Choose tool "
    "arguments (times, places, volumes, prices, contacts, wording) that match them, and shape your reply "
    "to them. When an explicit request contradicts a stored preference, the request wins.\n"
    "2. Proactivity: think one step past the literal request. Anticipate related needs the user did not "
    "state (a reminder, a weather check, a follow-up message, an alternative) and act on them when that is "
    "safe, or offer them when they need the user's consent.\n"
    "3. Grounding: get facts from tools instead of guessing. Never invent data, tool results or tools.\n"
    "4. Context: take the user's current place and time from the User Status and use them whenever the "
    "request depends on them (\"today\", \"tonight\", \"nearby\", \"at home\").\n"
    "5. Reply: end with a clear, concise answer that says what you did, what you found, and what you "
    "suggest next."
)
_RETRIEVAL_LINES = (
    "The tools for this task are not listed for you; find them yourself.\n"
    "Use `search_tools` with keywords describing what you need to discover relevant tools.\n"
    "Before you use any tool, call `get_tool_doc` on it to read its documentation."
)
_FORMAT = (
    "Answer in this format:\n\n"
    "Thought: your reasoning about the next step\n"
    "Action: the name of the one tool to call{action_note}\n"
    "Action Input: the tool's arguments as a dictionary on one line, e.g. {{\"city\": \"Boston\"}}; "
    "{{}} when it takes none\n\n"
    "You then receive the tool's result as \"Observation: ...\". Repeat Thought / Action / Action Input "
    "as often as needed. Once you have what you need, finish with:\n\n"
    "Thought: why you can now answer\n"
    "Final Answer: your reply to the user\n\n"
    "Rules:\n"
    "- **Exact Names:** the Action is exactly a tool name, with nothing else on that line.\n"
    "- **No Invented Results:** stop after the Action Input; never write an Observation yourself.\n"
    "- **Answer Once:** write \"Final Answer:\" only when you are done, and only once.\n"
    "- **One Tool Call at a Time:** call exactly one tool in each response."
)
_ACTION_NOTE = {"tool_given": ", exactly as listed",
                "tool_retrieval": ": `search_tools`, `get_tool_doc`, or a tool you found with them"}

_EXAMPLE_GIVEN = """Example (the user, tools and data are illustrative):
User: Plan a light workout for me this evening.
Thought: Before suggesting exercise I should see how the user feels right now.
Action: get_current_health_and_mood_status
Action Input: {}
Observation: {"status": "success", "data": {"timestamp": "2024-09-06 17:00:00", "steps": 5200, "heart_rate": 72, "mood": "calm", "stress_level": 2, ...}}
Thought: They are rested and calm. Their recent workouts show what they already did this week.
Action: get_user_recent_workout_records
Action Input: {"time": "2024-09-03 00:00:00"}
Observation: {"status": "success", "data": [{"Activity Type": "Running", "Start Time": "2024-09-05 06:30:00", "Duration": 45, ...}]}
Thought: They ran hard yesterday morning, so a gentler session fits tonight. I can answer now.
Final Answer: <a light evening plan in the user's preferred kind of exercise that avoids repeating yesterday's run, e.g. 30 minutes of yoga and stretching at home, plus a proactive offer such as a reminder or a calming playlist>"""

_EXAMPLE_RETRIEVAL = """Example (the user, tools and data are illustrative):
User: Will the weather get in the way of my plans today?
Thought: I need today's plans and today's weather. I will look for tools that give them.
Action: search_tools
Action Input: {"keywords": ["today's calendar events", "today's weather"]}
Observation: {"status": "success", "input": {"keywords": ["today's calendar events", "today's weather"]}, "output": ["view_today_events_in_calendar", "get_today_weather", "get_future_weather", ...], "exception": null}
Thought: Before using them I read their documentation.
Action: get_tool_doc
Action Input: {"tools_name": ["view_today_events_in_calendar", "get_today_weather"]}
Observation: {'status': 'success', 'data': {'view_today_events_in_calendar': {...}, 'get_today_weather': {...}}}
Thought: The calendar tool takes no arguments; I start there.
Action: view_today_events_in_calendar
Action Input: {}
Observation: {"status": "success", "events": [{"title": "Team picnic", "start_time": "2024-09-06 12:00:00", ...}]}
Thought: A picnic at noon. Now today's weather in the user's city.
Action: get_today_weather
Action Input: {"location": "Boston"}
Observation: {"status": "success", "data": {"date": "2024-09-06", "hour": [{"time": "2024-09-06 12:00", "chance_of_rain": 80, ...}, ...]}}
Thought: Rain is likely at noon, when the picnic starts. I can answer now.
Final Answer: <the clash between the noon picnic and the likely rain, with proactive options fitted to the user, e.g. moving the picnic indoors, rescheduling it, or a reminder to bring an umbrella>"""

_PLAN = (
    "Before acting on the user's request, plan. Read who the user is, what they prefer, where they are "
    "and what time it is, and which tools exist, then list the key points that a good response must "
    "meet:\n"
    "- \"keypoint for personalized\": how the user's profile and preferences should shape the tool calls "
    "and the reply;\n"
    "- \"keypoint for proactive\": what useful steps or suggestions go beyond the literal request.\n"
    "Answer with only a JSON object with those two keys, each a list of short sentences. Do not call any "
    "tool yet.\n\n"
    "Example (illustrative), for the request \"Remind me about tomorrow's team meeting.\":\n"
    "{\"keypoint for personalized\": [\"Set the alarm with the lead time the user prefers for reminders "
    "(NotificationPreferences).\", \"Word the alarm message the way the user likes reminders worded.\"], "
    "\"keypoint for proactive\": [\"Check tomorrow's calendar for a clash with the meeting.\", "
    "\"Offer to email the attendees an agenda.\"]}"
)
_EXECUTE = "Now carry out the request, following your plan and using the tools.\n\n"

NUDGE_NO_ACTION = (
    "You neither called a tool nor gave a final answer. Check your output format. To call a tool, write "
    "Thought, Action and Action Input lines. If you can already answer, write:\n"
    "Thought: why you can now answer\nFinal Answer: your reply to the user")
_DESIRED = ("Thought: your reasoning about the next step\nAction: the name of the tool\n"
            "Action Input: the tool's arguments as a dictionary on one line")
NUDGE_BAD_INPUT_EREACT = ("Your output does not follow the required format; please revise it to match:\n"
                          + _DESIRED)
NUDGE_BAD_INPUT_REACT = NUDGE_BAD_INPUT_EREACT + "\nCall exactly one tool in each response."
NUDGE_FC_FORMAT = "The tool call is malformed; please generate it again."
FC_BAD_ARGUMENTS = "These arguments are not in the required format; please correct them to match it.\n\n"
"""The tool-role answer to one FC call whose arguments do not evaluate to a dict (upstream's rule)."""


REMINDERS = Reminders(NUDGE_NO_ACTION, NUDGE_BAD_INPUT_REACT, NUDGE_BAD_INPUT_EREACT, NUDGE_FC_FORMAT,
                      FC_BAD_ARGUMENTS)
"""The project's own reminders (upstream's are read from its loop file where the copy has it)."""


def _check(method: str, setting: str) -> None:
    if method not in METHODS:
        raise ConfigError(f"ETAPP method must be one of {list(METHODS)}, got {method!r}")
    if setting not in SETTINGS:
        raise ConfigError(f"ETAPP setting must be one of {list(SETTINGS)}, got {setting!r}")


def _context(setting: str, profile: dict, preferences: list[dict], status: dict) -> str:
    """Profile, preferences (tool_given only) and status blocks, as Python repr."""
    blocks = [f"User Profile:\n{profile}"]
    if setting == "tool_given":
        blocks.append(f"Specific and detailed preferences of the user:\n{preferences}")
    blocks.append(f"User Status:\n{status}")
    if setting == "tool_retrieval":
        blocks.append(_RETRIEVAL_LINES)
    return "\n\n".join(blocks)


def react_instructions(setting: str, with_example: bool = True) -> str:
    """The ReAct format rules (ending with the one-tool rule), then the setting's one-shot example."""
    _check("react", setting)
    rules = _FORMAT.format(action_note=_ACTION_NOTE[setting])
    example = _EXAMPLE_GIVEN if setting == "tool_given" else _EXAMPLE_RETRIEVAL
    return f"{rules}\n\n{example}" if with_example else rules


def system_prompt(method: str, setting: str, profile: dict, preferences: list[dict], status: dict,
                  tools: list[dict], *, with_example: bool = True) -> str:
    """The system message S for one case (for e_react, the phase-1 planning message).

    `preferences` is ignored under tool_retrieval: there they reach the model only through
    `get_tool_doc` observations. `tools` is ignored under fc (the chat template renders them).
    `with_example=False` gives the ReAct S without its one-shot example, which is what upstream
    stores in the trajectory although the model saw the example.
    """
    _check(method, setting)
    context = _context(setting, profile, preferences, status)
    head = f"{_PERSONA}\n\n{context}"
    if method == "fc":
        return head
    # E-ReAct's planning message carries the persona and principles too, as upstream's does
    tail = _PLAN if method == "e_react" else react_instructions(setting, with_example)
    return f"{head}\n\nAvailable Tools and Resources:\n{tools}\n\n{tail}"


def e_react_execute_turn(setting: str) -> str:
    """E-ReAct phase 2: the user turn after the plan (the ReAct rules plus the one-shot example)."""
    return _EXECUTE + react_instructions(setting)


def status_for(profile: dict, location: str, timestamp: str) -> dict:
    """`{'user location': '<City>:<Home|Office>', 'time': <timestamp>}` for a high-level profile."""
    try:
        city = profile["DemographicData"]["BasicInformation"]["Location"]
    except (KeyError, TypeError):
        raise DatasetError(f"ETAPP profile has no DemographicData.BasicInformation.Location (top-level keys "
                           f"{list(profile) if isinstance(profile, dict) else type(profile).__name__}); "
                           "pass the user's entry of profile/profiles.json") from None
    return {"user location": f"{city}:{location}", "time": timestamp}


def preferences_for_tools(available_tools: list[str], concrete_profile: dict,
                          tool_domain: dict[str, str | None]) -> list[dict]:
    """The concrete-profile dicts of the tools' domains, each once, in the order tools first reach it
    (the judge's reading with no tool called yet; tools without a domain add nothing)."""
    from grading.errors import GradingError
    from grading.scorers.etapp_judge.rubric import preferences_for

    try:
        return preferences_for(available_tools, [], concrete_profile, tool_domain)
    except GradingError as exc:
        raise DatasetError(str(exc)) from None


# --- Parsers -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """One parsed ReAct step. On a final answer, action is "finish" and action_input is the answer,
    so the trajectory records `{"name": action, "arguments": action_input}` either way."""

    thought: str
    action: str
    """"" when the text names no action (the loop nudges with NUDGE_NO_ACTION)."""
    action_input: str
    answer: str | None
    """Set only when the text holds "Final Answer:"."""

    @property
    def finishes(self) -> bool:
        """Rule 4: an action spelt `finish` in any case also ends the case."""
        return self.action.lower() == "finish"


def strip_think(text: str) -> str:
    """Upstream's reasoning mode: every closed `<think>...</think>` block dropped, then the text
    stripped. As upstream's pattern, a lone `</think>` (a template that opens the block in the
    prompt) drops nothing: the reasoning before it is read as part of the step."""
    return re.sub(r"<think>.*?</think>", "", text, flags=re.S).strip()


def step_text(output: str, method: str, reasoning: bool) -> str:
    """A model output as upstream's loop reads it, and keeps it in the chat: a ReAct step under
    its --reasoning flag (`dataset.reasoning`) without its reasoning (strip_think); every other
    output as written, `<think>` included. Upstream drops reasoning nowhere else: not in E-ReAct's
    plan or steps, and its open-model FC readers have no rule for it (a `<tool_call>` block inside
    `<think>` is a call, and a final answer keeps its reasoning)."""
    return strip_think(output) if reasoning and method == "react" else output


def _final_thought(text: str, end: int) -> str:
    # upstream: `Thought:(.*)Final Answer:` -- from the first "Thought:" to the last final answer, or ""
    start = text.find("Thought:")
    return text[start + len("Thought:"):end].strip() if 0 <= start < end else ""


def _step_thought(text: str, action_at: int) -> str:
    # upstream: `(?:Thought:(.*?))?(.*?)(?=Action:)` from the text's start: what follows a leading
    # "Thought:", else everything before the first "Action:"; no "Action:" at all: ""
    if action_at < 0:
        return ""
    head = text[:action_at]
    return (head[len("Thought:"):] if head.startswith("Thought:") else head).strip()


def parse_react(text: str) -> Step:
    """One ReAct step as upstream's parser reads it (spec 2.3 rules 1-2 with correction 12):
    an action needs both `Action:` and a later `Action Input:`, else it is "" (the no-action
    reminder); the input is everything after the first `Action Input:` ("" stays "", so reading it
    fails into the format reminder), `{}` only where no `Action Input:` is written at all. The
    text is read as given, reasoning and all (step_text drops it under dataset.reasoning)."""
    if "Final Answer:" in text:
        end = text.rfind("Final Answer:")
        answer = text[end + len("Final Answer:"):].strip()
        return Step(_final_thought(text, end), "finish", answer, answer)
    action_at = text.find("Action:")
    input_at = text.find("Action Input:")
    # Everything after "Action Input:", so a model that invents its own Observation fails to parse.
    action_input = text[input_at + len("Action Input:"):].replace("\n ", "").strip() if input_at >= 0 else "{}"
    closes = text.find("Action Input:", action_at) if action_at >= 0 else -1
    action = text[action_at + len("Action:"):closes].strip() if closes >= 0 else ""
    return Step(_step_thought(text, action_at), action, action_input, None)


def parse_arguments(text: str) -> dict | None:
    """Rule 5: a Python literal after `null` -> `'null'`; "null" values back to None; else None.

    JSON true/false fail (upstream's behaviour), Python True/False pass.
    """
    try:
        value = ast.literal_eval(text.replace("null", "'null'"))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    return {key: None if item == "null" else item for key, item in value.items()}


# upstream's Qwen-family reader: a block is exactly "<tool_call>\n...\n</tool_call>"
_TOOL_CALL = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.S)


def parse_fc_calls(text: str) -> list[dict] | None:
    """Hermes-family calls as upstream's open-model FC path reads them: [] when the text has no
    complete block (a final answer), None when any block is not a Python literal dict with a
    string `name` and an `arguments` entry (JSON true/false/null fail; an unclosed `<tool_call>`
    reads as no call; a block inside `<think>` is a call, as upstream reads it). `arguments` is
    kept as written: upstream evaluates `str(arguments)` per call, so a string holding a dict runs
    too (`call_arguments`)."""
    calls = []
    for payload in _TOOL_CALL.findall(text):
        try:
            value = ast.literal_eval(payload)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
        if not (isinstance(value, dict) and isinstance(value.get("name"), str) and "arguments" in value):
            return None
        calls.append({"name": value["name"], "arguments": value["arguments"]})
    return calls


def shown_arguments(arguments: Any) -> str:
    """A call's arguments as upstream records them: `str(arguments)` (a dict's repr, a string as is)."""
    return str(arguments)


def call_arguments(arguments: Any) -> dict | None:
    """The dict a call runs with: its arguments, or the Python literal a string of them holds;
    None when upstream's evaluation of `str(arguments)` gives no dict (that call is answered with
    the format message and the others still run)."""
    if isinstance(arguments, dict):
        return arguments
    try:
        value = ast.literal_eval(str(arguments))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def fc_text_before_calls(text: str) -> str:
    """The text outside the `<tool_call>` blocks (reasoning included, as upstream keeps it), stripped."""
    return _TOOL_CALL.sub("", text).strip()


def react_grammar_regex(tool_names: list[str], thought_chars: int | None = None,
                        input_chars: int | None = None, answer_chars: int | None = None) -> str:
    """A regex for one ReAct step: a one-line Thought, then a one-line Action naming a listed tool
    with a one-line `{...}` input, or a Final Answer. No lookarounds or backreferences.

    In the retrieval setting pass every tool the model may find, not only the two declared.
    The limits cap each part's characters; None (the default) leaves it unbounded, and
    max_new_tokens ends a runaway step instead. Bounds are for backends that count cheaply
    (xgrammar, guidance): Outlines unrolls a bound into DFA states, and on SmolLM2's 49k vocabulary
    its Index took 0.08 s unbounded, 8.7 s with a 50-character thought, 17.8 s with a
    2000-character answer, and failed ("number of DFA states exceeds limit") at a 400-character
    thought (the same lesson as decoding.max_string_chars).
    """
    names = list(dict.fromkeys(tool_names))
    if not names or not all(names):
        raise ConfigError(f"react_grammar_regex needs at least one non-empty tool name, got {tool_names!r}")

    def upto(chars: str, low: int, high: int | None) -> str:
        return f"{chars}{{{low},{high}}}" if high is not None else chars + ("*" if low == 0 else "+")

    # [\s\S] is refused by some backends; [^\x00] spans newlines as well.
    line, anything = "[^\\n]", "[^\\x00]"
    action = "(" + "|".join(re.escape(n) for n in names) + ")"
    call = f"Action: {action}\\nAction Input: \\{{{upto(line, 0, input_chars)}\\}}"
    final = f"Final Answer: {upto(anything, 1, answer_chars)}"
    return f"Thought: {upto(line, 0, thought_chars)}\\n({call}|{final})"
