"""BFCL's multi-turn categories through the `model` role: the loop of multi_turn.py over every case,
with BFCL's environment classes read from the user's copy of BFCL's code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from grading.errors import GradingError
from grading.scorers.bfcl.environments import load, source_root
from grading.scorers.bfcl.multi_turn import MULTI_TURN
from inference.config import NATIVE_FORMAT
from inference.console import marker
from inference.errors import ConfigError, DatasetError
from inference.generation import MODEL_ROLE
from inference.solvers import SolveContext

from .multi_turn import NATIVE_FAMILY, Loop, cases_of, episode_table, run, start
from .texts import PromptTexts


__all__ = ["MULTI_TURN", "solve_multi_turn", "code_path"]


def code_path(options: Any) -> Path:
    """Where BFCL's environment code is: dataset.bfcl_eval, else a bfcl_eval folder holding the data."""
    candidates = [Path(options.bfcl_eval).expanduser()] if options.bfcl_eval else [Path(options.path).expanduser()]
    for candidate in candidates:
        if source_root(candidate) is not None:
            return candidate
    raise DatasetError(f"BFCL's multi-turn categories run BFCL's own environment classes, which are not under "
                       f"{candidates[0]}: set dataset.bfcl_eval to the bfcl_eval wheel (make install puts it in "
                       ".venv/share/toolsweep/), a gorilla checkout or its bfcl_eval folder")


def solve_multi_turn(samples: pl.DataFrame, context: SolveContext, texts: PromptTexts) -> pl.DataFrame:
    """Every multi-turn case run to its end; the sample table with each case's steps and trace."""
    cfg, generator = context.cfg, context.generator(MODEL_ROLE)
    native = (cfg.prompt.format or context.benchmark.prompt_format) == NATIVE_FORMAT
    family = cfg.model.tool_parser or NATIVE_FAMILY
    if native and family != NATIVE_FAMILY:
        raise ConfigError(f"BFCL's multi-turn categories read native calls as BFCL's Hermes-style handler does; "
                          f"model.tool_parser={family} has no such reader here: use prompt.format=benchmark")
    path = code_path(cfg.dataset)
    try:
        code = load(path)
    except GradingError as exc:
        raise DatasetError(str(exc)) from None
    marker(f"BFCL environments: BFCL's own classes, read from {code.origin}")
    loop = Loop(native, texts, cfg.decoding.constraint != "none", cfg.decoding.max_new_tokens,
                generator.max_model_len or 1 << 30)
    cases = cases_of(samples)
    if any(case.held_out for case in cases):
        texts.held_out([])  # a copy of BFCL's texts without the held-out message fails here, before any step
    with context.timer.phase("generate"):
        episodes = [start(case, code.classes, loop) for case in cases]
        run(episodes, generator.generate, generator.render, loop, marker)
    if "prompt" not in context.facts:
        context.facts["prompt"] = {"format": NATIVE_FORMAT if native else "benchmark",
                                   **({"tool_parser": family} if native else {})}
    context.facts["bfcl_environments"] = code.facts()
    keys = ["sample_id", "sample_index"] if "sample_index" in samples.columns else ["sample_id"]
    table = episode_table(episodes).select(*keys, pl.exclude("sample_id", "sample_index"))
    return samples.drop([c for c in table.columns if c not in keys and c in samples.columns]).join(
        table, on=keys, how="left", maintain_order="left").with_columns(
        pl.lit(str(path)).alias("bfcl_code"), pl.col("end_reason").alias("finish_reason"))
