"""ETAPP's tool sandbox: the 35 tools of upstream's personal apps, re-implemented from the
behavioural spec, over the released per-user tables and deterministic substitutes for the data
upstream never published.

    data = SandboxData.load(etapp_root, travelplanner_root)      # once per run
    box = Sandbox(data, "James_Harrington", "2024-09-06 07:15:00")
    box.call("view_today_alarms", {}).text

Modules: core (clock, observations, serialisation), data (files and shared tables), bm25 (mail
and product search), embeddings (search_tools' MiniLM),
catalogues and flights (the substitutes), one module per app, sandbox (dispatch and state).
"""

from __future__ import annotations

from .browser_app import WIKIPEDIA_VERSION
from .catalogues import CATALOGUE_VERSION, MUSIC_CATALOGUE_VERSION
from .core import OBSERVATION_CAP, Observation
from .data import SandboxData
from .flights import GENERATOR_VERSION
from .sandbox import Sandbox
from .searcher_app import SEARCH_TOOLS_VERSION
from .tool_names import TOOL_NAMES

RESTAURANTS_VERSION = "travelplanner-958f30d"
"""find_restaurants reads TravelPlanner's restaurant table from that commit (its SOURCE.md)."""
SUBSTITUTE_VERSIONS: dict[str, str] = {
    "play_music": MUSIC_CATALOGUE_VERSION,
    "find_restaurants": RESTAURANTS_VERSION,
    "find_flight": GENERATOR_VERSION,
    "search_products_in_shopping_manager": CATALOGUE_VERSION,
    "search_from_wikipedia": WIKIPEDIA_VERSION,
    "search_tools": SEARCH_TOOLS_VERSION,
}
"""Tool -> the version of the substitute it runs on, for run.json. The first five are apps.py's
SUBSTITUTED_TOOLS; search_tools runs upstream's own model through another runtime (ONNX)."""

__all__ = ["OBSERVATION_CAP", "Observation", "SUBSTITUTE_VERSIONS", "Sandbox", "SandboxData", "TOOL_NAMES"]
