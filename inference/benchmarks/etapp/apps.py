"""ETAPP's apps: where each one's tool schemas live, the class name upstream gave it, and the
profile domain whose preferences go with its tools.

The tool -> domain map is read from the schemas (`toolkit/<App>/config.json`), so it cannot
drift from the files a run actually uses.
"""

from __future__ import annotations

from dataclasses import dataclass

# Tools whose data upstream never shipped: they run on deterministic substitutes here (spec
# section 1.12), so a case that lists or calls one is left out of the `clean` subset. The scorer,
# which defines that subset, declares them (grading never imports inference); re-exported here.
from grading.scorers.etapp_judge import SUBSTITUTED_TOOLS  # noqa: F401 (re-exported)


@dataclass(frozen=True)
class App:
    folder: str
    """`toolkit/<folder>/config.json` holds its tool schemas."""
    classes: tuple[str, ...]
    """Upstream's class name(s); the three smart-home classes share one config file."""
    domain: str | None
    """Key into `profile/concrete_profile/profile_<User>.json`; None: no preferences attach."""


# Sorted by folder: upstream listed apps in directory order, which depends on the filesystem.
APPS: tuple[App, ...] = (
    App("Calendar", ("Calendar",), "calendar"),
    App("Email", ("Email",), "email"),
    App("Health_control", ("HealthMonitoringApp",), "health"),
    App("Music_control", ("MusicStreamingApp",), "music"),
    App("Navigation", ("Navigation_And_Map",), "navigation"),
    App("Shopping_manager", ("ECommerce",), "shopping"),
    App("Smart_home_devices", ("Thermostat", "Light", "SmartAppliance"), "smart_home_devices"),
    App("Toolsearcher", ("Tool_And_History_Searcher",), None),
    App("Weather", ("WeatherData",), None),
    App("Web_Browsing", ("Browser",), "web_browsing"),
)
SEARCH_TOOLS = ("search_tools", "get_tool_doc")
"""The retrieval setting's only declared tools (callable in both settings)."""

