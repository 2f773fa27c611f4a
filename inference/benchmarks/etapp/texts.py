"""What the agent loop says to the model, from one of two sources (`dataset.prompts`):

- `upstream`: upstream's own texts read from the user's ETAPP copy (prompt_files.py), filled
  exactly as upstream's loop fills them (`str.format` with its arguments, the one-shot example
  appended where it appends it);
- `own`: toolsweep's own wording (agent_text.py), for a copy without upstream's prompt files.

Both give the same things: the system message a method's model sees and the one the record keeps,
the first user message, E-ReAct's execution turn, and the reminders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Protocol

from inference.errors import DatasetError
from . import agent_text as own
from .prompt_files import UpstreamFiles, Reminders

TOOL_RETRIEVAL = "tool_retrieval"


@dataclass(frozen=True)
class Fill:
    """One case's values for the placeholders."""

    profile: dict[str, Any]
    preferences: list[dict[str, Any]]
    """The listed tools' preference dicts (tool_given; empty under tool_retrieval)."""
    status: dict[str, str]
    schemas: list[dict[str, Any]]
    """The tool configs the model is given (the two search tools under tool_retrieval)."""
    tool_names: tuple[str, ...]
    """The case's listed tool names, duplicates kept (upstream's `available_tools_name`)."""
    query: str


class AgentTexts(Protocol):
    source: str
    reminders: Reminders

    def system(self, method: str, setting: str, fill: Fill, *, stored: bool = False) -> str:
        """The system message (`stored=True`: as the record keeps it)."""

    def user(self, method: str, setting: str, fill: Fill) -> str:
        """The first user message."""

    def execute_turn(self, setting: str, fill: Fill) -> str:
        """E-ReAct's user turn after the plan."""


class OwnTexts:
    """toolsweep's own wording, upstream's structure and facts."""

    source = "own"
    reminders = own.REMINDERS

    def system(self, method: str, setting: str, fill: Fill, *, stored: bool = False) -> str:
        # upstream stores the ReAct system turn without its one-shot example (the model saw it)
        return own.system_prompt(method, setting, fill.profile, fill.preferences, fill.status, fill.schemas,
                                 with_example=not stored)

    def user(self, method: str, setting: str, fill: Fill) -> str:
        return fill.query

    def execute_turn(self, setting: str, fill: Fill) -> str:
        return own.e_react_execute_turn(setting)


class UpstreamTexts:
    """Upstream's texts, filled as its `predict_instruction` and `method_converter` fill them."""

    source = "upstream"

    def __init__(self, files: UpstreamFiles) -> None:
        self.files = files
        self.reminders = files.reminders or own.REMINDERS

    def system(self, method: str, setting: str, fill: Fill, *, stored: bool = False) -> str:
        retrieval = setting == TOOL_RETRIEVAL
        template, _ = self.files.system_and_user(method, retrieval)
        # upstream passes no preferences under retrieval, and an empty tool-name list there
        values = {"user_profile": fill.profile, "user_status": fill.status,
                  "available_tool_descriptions": str(fill.schemas)}
        if not retrieval:
            values.update(preferences=fill.preferences, available_tool_names=", ".join(fill.tool_names))
        text = _format(template, values, f"the {method} system prompt ({setting})")
        # `--add_example`: ReAct's model sees the one-shot example after the system text; the
        # record keeps the text without it; E-ReAct gets it in its execution turn instead
        return text + self.files.oneshot(retrieval) if method == "react" and not stored else text

    def user(self, method: str, setting: str, fill: Fill) -> str:
        _, template = self.files.system_and_user(method, setting == TOOL_RETRIEVAL)
        return _format(template, {"query": fill.query}, f"the {method} user prompt ({setting})")

    def execute_turn(self, setting: str, fill: Fill) -> str:
        retrieval = setting == TOOL_RETRIEVAL
        names = "" if retrieval else ", ".join(fill.tool_names)
        text = _format(self.files.exec_prompt, {"available_tool_names": names}, "E-ReAct's EXEC_PROMPT")
        return text + self.files.oneshot(retrieval)


def _format(template: str, values: dict[str, Any], what: str) -> str:
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError) as exc:
        raise DatasetError(f"{what} in the ETAPP copy has a placeholder upstream's loop does not fill ({exc!r}); "
                           f"it fills {sorted(values)}. Restore the file from upstream, or set "
                           "dataset.prompts=own") from None


def agent_texts(files: Optional[UpstreamFiles]) -> AgentTexts:
    return UpstreamTexts(files) if files is not None else OwnTexts()
