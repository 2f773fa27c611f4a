"""ETAPP: personalized, proactive tool use over several turns in a sandbox of personal apps,
scored by a judge model against human-written key points (Hao et al., ACL 2025).

A loader, two solvers and a scorer, on the shared run path: cases (cases.py) -> the agent
solver, every turn one batched generate over the live episodes through the `model` role
(agent_solver.py, agent.py, sandbox/) -> the judge solver through the `judge` role
(judge_solver.py) -> scorer `etapp_judge` (grading/scorers/etapp_judge.py). Its options are
`dataset.*` (options.py); conf/dataset/etapp.yaml configures the judge role.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from inference.benchmarks.base import Benchmark
from .options import METHODS, EtappOptions

SETTINGS = ("tool_given", "tool_retrieval")


def _load(path: Path, settings: tuple[str, ...], limit: int | None) -> pl.DataFrame:
    from .cases import case_table, load_cases

    table = case_table(load_cases(path, None, None), settings, METHODS)
    return table.filter(pl.int_range(pl.len()).over("setting") < limit) if limit else table


def _select(table: pl.DataFrame, options: EtappOptions) -> pl.DataFrame:
    """The loaded cases of the chosen users, instructions and methods (checked by `_check`
    before): settings, then methods and users in the order the options name them, then
    instructions in file order."""
    keep = pl.col("method").is_in(options.methods)
    if options.users:
        keep &= pl.col("user").is_in(options.users)
    if options.instructions:
        keep &= pl.col("instruction").is_in(options.instructions)
    if options.subset == "reasoning":
        from .cases import read_profiles

        pairs = [f"{u}-{i}" for u, i in reasoning_cases(list(read_profiles(Path(options.path).expanduser())))]
        keep &= pl.col("case_id").is_in(pairs)
    order = [_rank("etapp_setting", table["etapp_setting"].unique(maintain_order=True).to_list()),
             _rank("method", options.methods), *([_rank("user", options.users)] if options.users else [])]
    chosen = table.filter(keep).sort(order, maintain_order=True)
    return chosen.with_columns(pl.lit(float(options.pass_score), dtype=pl.Float64).alias("pass_score"))


def _rank(column: str, values: list) -> pl.Expr:
    return pl.col(column).replace_strict({v: i for i, v in enumerate(values)}, return_dtype=pl.Int32)


def reasoning_cases(users: list[str]) -> set[tuple[str, int]]:
    """The paper's 100-case subset for reasoning models: for each of the 50 instructions, two of
    the 16 users (in profiles.json order), drawn as upstream's reasoning run draws them (Python's
    `random.Random(1).sample(range(16), 2)` per instruction, in instruction order)."""
    import random

    draw = random.Random(1)
    return {(users[u], number) for number in range(50) for u in draw.sample(range(16), 2)}


def _shard_key(table: pl.DataFrame, options: EtappOptions) -> pl.Series:
    """A case's episodes (every setting and method) in one shard; under state=sequential, a
    user's cases, which run one after another on one sandbox."""
    return table["user"] if options.state == "sequential" else table["case_id"]


def _script_turn(row: dict, sample_id: str) -> str:
    from .script import script_turn

    return script_turn(row, sample_id)


def _check(cfg) -> list[str]:
    from .checks import input_problems, unused_options

    return [*unused_options(cfg), *input_problems(cfg.dataset)]


BENCHMARK = Benchmark(
    name="etapp", settings=SETTINGS, load=_load, options=EtappOptions, select=_select, check=_check, roles=("judge",),
    solvers=("inference.benchmarks.etapp.agent_solver", "inference.benchmarks.etapp.judge_solver"),
    engine_answers=("prompts", "turns"),
    path_hint="the ETAPP folder holding data/instruction/instruction.json, profile/, toolkit/ and database/",
    scorer="etapp_judge", shard_key=_shard_key, script_turn=_script_turn)
