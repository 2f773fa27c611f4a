"""ETAPP's run options (`etapp.*` on the command line), typed so a typo fails at composition."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

METHODS = ("fc", "react", "e_react")
STATES = ("tool", "app", "sequential")


@dataclass
class EtappConfig:
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    """Agent methods to run: fc (the model's own tool calls), react, e_react (a plan, then ReAct)."""
    users: Optional[list[str]] = None
    """User file stems (e.g. John_Doe); None: all 16, in profiles.json order."""
    instructions: Optional[list[int]] = None
    """Instruction numbers (from 0, in instruction.json order); None: all 50."""
    max_turns: int = 20
    """Model calls per case; the last one's output is recorded but not acted on."""
    max_new_tokens: int = 1024
    """Agent tokens per model call (greedy)."""
    max_calls_per_response: int = 10
    max_calls_per_case: int = 50
    max_tokens_per_call: int = 16384
    """Prompt + answer tokens one call may use; beyond it the case ends (upstream's guard)."""
    state: str = "tool"
    """tool: upstream's per-tool tables, fresh per case; app: one state per app, fresh per case;
    sequential: upstream's per-tool tables kept across a user's cases, in file order."""
    travelplanner: Optional[str] = None
    """TravelPlanner database folder (restaurants); None: `travelplanner` next to dataset.path."""
    upstream: Optional[str] = None
    """A folder of upstream ETAPP `<User>_instruction.json` files: judge those trajectories instead
    of running an agent (name one setting and one method: the files do not say which)."""

    def problems(self) -> list[str]:
        """Every invalid value, with the fix."""
        found = []
        if not self.methods or any(m not in METHODS for m in self.methods):
            found.append(f"etapp.methods must be a non-empty subset of {list(METHODS)}, got {list(self.methods)}")
        if self.state not in STATES:
            found.append(f"etapp.state must be one of {list(STATES)}, got {self.state!r}")
        for key in ("max_turns", "max_new_tokens", "max_calls_per_response", "max_calls_per_case",
                    "max_tokens_per_call"):
            if getattr(self, key) < 1:
                found.append(f"etapp.{key} must be an integer >= 1, got {getattr(self, key)}")
        return found
