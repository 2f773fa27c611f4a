"""Solvers: how a benchmark's samples become model calls, and what happened on the way.

A solver is a module of this package (or any importable module, by dotted path) that defines
`SOLVER`, an object with `solve(conversations, generate) -> conversations`. A conversation is
a sample's chat messages plus the rendered request of its next model turn; `generate` runs
requests through the engine (with the run's cache and shards) and returns one Generation per
request. `single_call` asks once and appends the answer; a multi-turn agent loop calls
`generate` once per turn over every live conversation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from grading.registry import NotFound, find, names_in
from inference.engines import Generation, Request
from inference.errors import ConfigError

Generate = Callable[[list[Request]], list[Generation]]


@dataclass
class Conversation:
    """One sample's chat so far, and the request for the model's next turn (None: finished)."""

    sample_id: str
    messages: list[dict[str, Any]]
    request: Optional[Request]
    generations: list[Generation] = field(default_factory=list)
    """Every model turn's generation, in order."""


class Solver(Protocol):
    def solve(self, conversations: list[Conversation], generate: Generate) -> list[Conversation]:
        """Run the conversations to their end; every one comes back, failed ones included."""
        ...


def solver_names() -> list[str]:
    """The solvers shipped in this package."""
    return names_in(__name__)


def get_solver(name: str) -> Solver:
    """The solver called `name` (a module here, or a dotted module path defining SOLVER)."""
    try:
        return find(name, __name__, "SOLVER")
    except NotFound as exc:
        raise ConfigError(f"unknown solver {name!r} ({exc}): choose one of {solver_names()}") from None
