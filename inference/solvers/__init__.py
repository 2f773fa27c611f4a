"""Solvers: how a benchmark's samples become model calls, and what happened on the way.

A solver is a module of this package (or any importable module, by dotted path) that defines
`SOLVER`, an object with a `role` (the model role it generates with: `model`, the evaluated
model, or one its benchmark declares, such as `judge`) and `solve(samples, context) -> table`.
It keeps its own per-sample state (a chat, an agent's episode), asks `context.generator(role)`
for a role's generator (rendering with the model's chat template, and `generate` through the
run's store: shards, resume, cache), and calls `generate` once per step over every live sample.
It returns the sample table with the columns it adds; a failed sample is a row, never an
exception. `single_call` is one step; an agent loop and a judge are solvers too. A solver that
writes per-sample tables besides the sample table (an agent's messages, a judge's answers)
declares them in `side_tables` (grading.views.SideTable); the run lists those it wrote in run.json.

A solver whose role is switched off (`roles.<name>.enabled=false`) is not run: its `skip`
gives the table its columns, empty, so later solvers and the scorer see one shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import polars as pl

from grading.registry import NotFound, find, names_in
from grading.views import SideTable
from inference.errors import ConfigError


@dataclass
class SolveContext:
    """What a solver is given besides its samples."""

    cfg: Any
    """The run's typed config (inference.config.ToolsweepConfig)."""
    benchmark: Any
    """The run's inference.benchmarks.base.Benchmark."""
    run_dir: Path
    timer: Any
    make_generator: Callable[[str], Any]
    """role name -> a new inference.generation.Generator for it."""
    facts: dict[str, Any] = field(default_factory=dict)
    """What the solver reports for run.json (e.g. the prompt format), by key."""
    built: dict[str, Any] = field(default_factory=dict)
    """The generators asked for so far, by role."""

    def generator(self, role: str) -> Any:
        """The generator of model role `role` (one per role and context)."""
        if role not in self.built:
            self.built[role] = self.make_generator(role)
        return self.built[role]


class Solver(Protocol):
    role: str
    """The model role this solver generates with."""
    side_tables: tuple[SideTable, ...]
    """The per-sample tables it writes into the run dir; optional (read through `side_tables_of`)."""

    def solve(self, samples: pl.DataFrame, context: SolveContext) -> pl.DataFrame:
        """The samples with this solver's columns; every sample comes back, failed ones included."""
        ...

    def skip(self, samples: pl.DataFrame, context: SolveContext) -> pl.DataFrame:
        """The samples with this solver's columns left empty (its role is switched off)."""
        ...


def side_tables_of(solver: Solver) -> tuple[SideTable, ...]:
    """The side tables a solver declares (none where it declares none)."""
    return tuple(getattr(solver, "side_tables", ()))


def declared_side_tables(names: tuple[str, ...]) -> list[SideTable]:
    """The side tables of the named solvers, in solver order."""
    return [t for name in names for t in side_tables_of(get_solver(name))]


def present_side_tables(names: tuple[str, ...], run_dir: Path) -> list[SideTable]:
    """The side tables the named solvers declare that `run_dir` holds, in solver order."""
    return [t for t in declared_side_tables(names) if (Path(run_dir) / t.name).is_file()]


def solver_names() -> list[str]:
    """The solvers shipped in this package."""
    return names_in(__name__)


def get_solver(name: str) -> Solver:
    """The solver called `name` (a module here, or a dotted module path defining SOLVER)."""
    try:
        return find(name, __name__, "SOLVER")
    except NotFound as exc:
        raise ConfigError(f"unknown solver {name!r} ({exc}): choose one of {solver_names()}") from None
