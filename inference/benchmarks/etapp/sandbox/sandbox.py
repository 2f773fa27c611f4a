"""The ETAPP sandbox: dispatches a tool call to its app instance and turns the result into the
observation the agent sees (spec section 0 and its corrections).

State. Upstream builds one app instance per exposed tool, each with its own copy of the tables,
so a change is seen only by later calls of the same tool (state="tool", the default). state="app"
shares one instance per app class, so a view sees the same case's additions and deletions (what
the spec's sections describe, but upstream never did). A sandbox serves one case; `advance` moves
it to the user's next case keeping every table (upstream's sequential order).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inference.benchmarks.etapp.sandbox.browser_app import Browser
from inference.benchmarks.etapp.sandbox.calendar_app import Calendar
from inference.benchmarks.etapp.sandbox.core import Clock, Env, Failed, Observation, cap, failed_status, serialise
from inference.benchmarks.etapp.sandbox.data import SandboxData
from inference.benchmarks.etapp.sandbox.email_app import Email
from inference.benchmarks.etapp.sandbox.health_app import HealthMonitoringApp
from inference.benchmarks.etapp.sandbox.music_app import MusicStreamingApp
from inference.benchmarks.etapp.sandbox.navigation_app import Navigation_And_Map
from inference.benchmarks.etapp.sandbox.searcher_app import Tool_And_History_Searcher
from inference.benchmarks.etapp.sandbox.shopping_app import ECommerce
from inference.benchmarks.etapp.sandbox.smart_home_app import Light, SmartAppliance, Thermostat
from inference.benchmarks.etapp.sandbox.tool_names import TOOL_NAMES
from inference.benchmarks.etapp.sandbox.weather_app import WeatherData
from inference.errors import ConfigError, ToolsweepError

APP_CLASSES = (Calendar, Email, HealthMonitoringApp, MusicStreamingApp, Navigation_And_Map, ECommerce,
               Thermostat, Light, SmartAppliance, Tool_And_History_Searcher, WeatherData, Browser)
TOOL_CLASSES: dict[str, type] = {name: cls for name in TOOL_NAMES for cls in APP_CLASSES if name in cls.TOOLS}
"""Tool name -> the class that implements it, in TOOL_NAMES order."""
STATES = ("tool", "app")
PREFERENCES_HEADER = "\nCorresponding preferences related to the tools you retrieve:\n"
EXECUTOR = "ToolManager.api_call()"
"""Upstream passes the arguments through its tool manager's `api_call(self, tool_name, **kwargs)`,
so Python words some failures after that method rather than the tool."""
EXECUTOR_MODULE = "PLA.toolkit.tool_manager."
"""The module upstream's executor lives in (its package is imported as PLA.toolkit), which Python
puts before the method in the `**` mapping error."""
EXECUTOR_PARAMETERS = ("self", "tool_name")


class Sandbox:
    """One case's tools for one user at a fixed "now"."""

    def __init__(self, data: SandboxData, user: str, now: str, *, state: str = "tool",
                 retrieval: bool = False) -> None:
        if state not in STATES:
            raise ConfigError(f"ETAPP sandbox state must be one of {list(STATES)}, got {state!r}")
        data.check_user(user)
        self._env = Env(data=data, user=user, clock=Clock.parse(now))
        self._state = state
        self._retrieval = retrieval
        self._apps: dict[str, Any] = {}

    @property
    def now(self) -> str:
        """The current case timestamp, as given."""
        return self._env.clock.time

    def advance(self, now: str) -> None:
        """Move to the user's next case, keeping every app's tables (sequential replication)."""
        self._env.clock = Clock.parse(now)

    def call(self, name: str, arguments: Any, *, e_react: bool = False) -> Observation:
        """Run one tool call as upstream's executor: `tool(**arguments)`, any exception's message as
        the observation (whole), the result as JSON cut to 8192 characters."""
        # Python binds the arguments to upstream's executor before it looks the tool up.
        refused = _executor_refusal(arguments)
        if refused is not None:
            return Observation(refused, True)
        if not isinstance(name, str) or name not in TOOL_CLASSES:
            return Observation(f"invalid tool name {name}.", True)
        try:
            result = getattr(self._app(name), name)(**arguments)
            error = isinstance(result, Failed) or failed_status(result)
            result = result.value if isinstance(result, Failed) else result
            if self._retrieval and name == "get_tool_doc":
                return Observation(self._doc_with_preferences(result), error)
            text = serialise(result)
        except ToolsweepError:
            raise  # the data is broken, not the call: stop the run, do not show it to the agent
        except Exception as exc:  # noqa: BLE001 -- upstream shows every exception's message to the agent
            # Not cut: upstream's cap (and E-ReAct's slice) applies to a serialised result only.
            return Observation(str(exc), True)
        return Observation(cap(text, e_react=e_react), error)

    def _app(self, name: str) -> Any:
        cls = TOOL_CLASSES[name]
        key = name if self._state == "tool" else cls.__name__
        if key not in self._apps:
            self._apps[key] = cls(self._env)
        return self._apps[key]

    def _doc_with_preferences(self, result: dict[str, Any]) -> str:
        # Upstream's retrieval harness: Python reprs, not JSON, and no length cap.
        profile, seen, preferences = self._env.data.profile(self._env.user), set(), []
        for tool in result["data"]:
            domain = self._env.data.tool_domains.get(tool)
            if domain is not None and domain not in seen:
                seen.add(domain)
                preferences.append(profile[domain])
        return repr(result) + PREFERENCES_HEADER + repr(preferences)



def _executor_refusal(arguments: Any) -> str | None:
    """The error Python raises while binding the arguments to upstream's executor, before any tool
    runs, in the order it checks: a non-mapping, a non-string key, then a key that names one of
    the executor's own parameters (the first such key in the call's order)."""
    if not isinstance(arguments, Mapping):
        return (f"{EXECUTOR_MODULE}{EXECUTOR} argument after ** must be a mapping, "
                f"not {type(arguments).__name__}")
    if not all(isinstance(key, str) for key in arguments):
        return "keywords must be strings"
    for key in arguments:
        if key in EXECUTOR_PARAMETERS:
            return f"{EXECUTOR} got multiple values for argument '{key}'"
    return None
