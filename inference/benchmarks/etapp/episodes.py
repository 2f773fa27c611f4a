"""Building ETAPP episodes: their prompts and sandboxes (the role's generator renders their chats)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from . import agent_text as text
from .agent import Episode
from .apps import SEARCH_TOOLS
from .cases import Case, concrete_profile, read_profiles, read_toolkit, tool_domains
from .prompt_files import UpstreamFiles
from .texts import AgentTexts, Fill, agent_texts

TOOL_GIVEN, TOOL_RETRIEVAL = "tool_given", "tool_retrieval"


@dataclass(frozen=True)
class Slot:
    """One sample of the run: a case under a setting and method, and which of the case's
    `decoding.samples` episodes it is."""

    setting: str
    method: str
    case: Case
    sample_id: str
    sample_index: int = 0


@dataclass
class Context:
    """What every episode of a run reads: profiles, schemas, domains, the sandbox tables."""

    root: Path
    profiles: dict[str, dict[str, Any]]
    toolkit: dict[str, dict[str, Any]]
    domains: dict[str, Optional[str]]
    data: Any
    """inference.benchmarks.etapp.sandbox.SandboxData"""
    concrete: dict[str, dict[str, Any]]
    upstream: Optional[UpstreamFiles] = None
    """Upstream's texts read from the ETAPP copy (dataset.prompts); None: the project's own."""

    @classmethod
    def load(cls, root: Path, travelplanner: Path, upstream: Optional[UpstreamFiles] = None) -> "Context":
        from .sandbox import SandboxData

        profiles = read_profiles(root)
        return cls(root, profiles, read_toolkit(root), tool_domains(root), SandboxData.load(root, travelplanner),
                   {user: concrete_profile(root, user) for user in profiles}, upstream)

    @property
    def texts(self) -> AgentTexts:
        return agent_texts(self.upstream)


def listed_schemas(case: Case, setting: str, toolkit: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The schemas the model is given: the case's tools (duplicates kept, as upstream), or only
    the two search tools in the retrieval setting."""
    names = case.available_tools if setting == TOOL_GIVEN else SEARCH_TOOLS
    return [toolkit[name] for name in names]


def case_fill(case: Case, setting: str, context: Context) -> Fill:
    """The case's values for the prompts' placeholders."""
    profile = context.profiles[case.user]
    preferences = (text.preferences_for_tools(list(case.available_tools), context.concrete[case.user],
                                              context.domains) if setting == TOOL_GIVEN else [])
    return Fill(profile, preferences, text.status_for(profile, case.location, case.timestamp),
                listed_schemas(case, setting, context.toolkit), case.available_tools, case.query)


def new_episode(slot: Slot, context: Context, sandbox: Any) -> Episode:
    """An episode at its start: system prompt and query, in the chat and in the record."""
    case, setting, method = slot.case, slot.setting, slot.method
    texts, fill = context.texts, case_fill(case, setting, context)
    query = texts.user(method, setting, fill)
    episode = Episode(sample_id=slot.sample_id, case=case, setting=setting, method=method, sandbox=sandbox,
                      sample_index=slot.sample_index,
                      chat=[{"role": "system", "content": texts.system(method, setting, fill)},
                            {"role": "user", "content": query}],
                      tools=fill.schemas if method == "fc" else None, reminders=texts.reminders,
                      execute_turn=texts.execute_turn(setting, fill) if method == "e_react" else None)
    episode.add({"role": "system", "content": texts.system(method, setting, fill, stored=True)})
    episode.add({"role": "user", "content": query})
    return episode


def new_sandbox(case: Case, setting: str, state: str, context: Context) -> Any:
    from .sandbox import Sandbox

    return Sandbox(context.data, case.user, case.timestamp, state="app" if state == "app" else "tool",
                   retrieval=setting == TOOL_RETRIEVAL)
