"""ETAPP: personalized, proactive tool use over several turns in a sandbox of personal apps,
scored by a judge model against human-written key points (Hao et al., ACL 2025).

A benchmark with its own stages (`runner`): cases (cases.py) -> agent episodes, every turn one
batched generate over the live episodes (agent.py, sandbox/) -> trajectories.parquet ->
judge in its own process (judge.py) -> scorer `etapp_judge` (grading/scorers/etapp_judge.py).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from inference.benchmarks.base import Benchmark

SETTINGS = ("tool_given", "tool_retrieval")


def _load(path: Path, settings: tuple[str, ...], limit: int | None) -> pl.DataFrame:
    from .cases import case_table, load_cases
    from .options import METHODS

    table = case_table(load_cases(path, None, None), settings, METHODS)
    return table.filter(pl.int_range(pl.len()).over("setting") < limit) if limit else table


BENCHMARK = Benchmark(
    name="etapp", settings=SETTINGS, load=_load,
    path_hint="the ETAPP folder holding data/instruction/instruction.json, profile/, toolkit/ and database/",
    scorer="etapp_judge", solver="single_call", runner="inference.benchmarks.etapp.run")
