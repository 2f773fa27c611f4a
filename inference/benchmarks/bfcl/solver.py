"""BFCL's solver: the single-call solver, with the system prompt and the function docs built
from the texts `dataset.prompts` picks (BFCL's own, read from the user's copy, or toolsweep's).

It adds `call_reader`, which names how the scorer reads a native answer: BFCL's own Hermes-style
reader (`bfcl_hermes`) for the hermes family, whose FC handler BFCL reimplements; for another
family, vLLM's parser of that family (`vllm:<parser>`, the `calls` column), since toolsweep has no
reimplementation of BFCL's handler for it.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from grading.scorers.bfcl import HERMES_READER
from inference.console import marker
from inference.errors import ConfigError
from inference.generation import MODEL_ROLE
from inference.solvers import SolveContext
from inference.solvers.single_call import SOLVER as SINGLE_CALL

from .multi_turn_solver import MULTI_TURN, solve_multi_turn
from .texts import PromptTexts, resolve


def prompt_texts(options: Any) -> PromptTexts:
    """The run's texts, with one notice line saying whose they are."""
    texts = resolve(options.prompts, options.bfcl_eval, options.path)
    marker(f"BFCL prompt texts: BFCL's own, read from {texts.origin}" if texts.source == "upstream" else
           f"BFCL prompt texts: toolsweep's own wording (dataset.prompts={options.prompts}; "
           "set dataset.bfcl_eval to a copy of BFCL's code for BFCL's)")
    return texts


def with_texts(samples: pl.DataFrame, texts: PromptTexts) -> pl.DataFrame:
    """The samples' system turns and tool specs built from `texts`."""
    rows = samples.select("functions", "native_system").iter_rows()
    systems, specs = [], []
    for functions_json, question_system in rows:
        functions = json.loads(functions_json)
        systems.append(texts.system(functions, question_system))
        specs.append(json.dumps(texts.functions_with_hint(functions), ensure_ascii=False))
    return samples.with_columns(pl.Series("system", systems, dtype=pl.String),
                                pl.Series("tool_specs", specs, dtype=pl.String))


def call_reader(prompt_facts: dict[str, Any]) -> str | None:
    """How the scorer reads this run's native answers (None: the benchmark format)."""
    if prompt_facts.get("format") != "native":
        return None
    parser = prompt_facts.get("tool_parser")
    return HERMES_READER if parser == "hermes" else f"vllm:{parser}"


class BfclSolver:
    """AST categories: one prompt per case, BFCL's texts in it, the answer read at grading time;
    multi-turn categories: BFCL's loop over each case's turns (multi_turn.py)."""

    role = MODEL_ROLE

    def solve(self, samples: pl.DataFrame, context: SolveContext) -> pl.DataFrame:
        texts = prompt_texts(context.cfg.dataset)
        samples = with_texts(samples, texts)
        is_multi = pl.col("setting").is_in(list(MULTI_TURN))
        parts = []
        if samples.filter(~is_multi).height:
            parts.append(SINGLE_CALL.solve(samples.filter(~is_multi), context))
        if samples.filter(is_multi).height:
            parts.append(solve_multi_turn(samples.filter(is_multi), context, texts))
        order = samples.select("sample_id", *(["sample_index"] if "sample_index" in samples.columns else []))
        solved = order.join(pl.concat(parts, how="diagonal_relaxed"), on=order.columns, how="left",
                            maintain_order="left")
        reader = call_reader(context.facts.get("prompt", {}))
        context.facts["bfcl"] = {**texts.facts(), "call_reader": reader}
        context.facts["report_facts"] = {"BFCL texts": "BFCL's own, read from " + str(texts.origin)
                                         if texts.source == "upstream" else "toolsweep's own wording"}
        return solved.with_columns(pl.lit(reader, dtype=pl.String).alias("call_reader"))

    def skip(self, samples: pl.DataFrame, context: SolveContext) -> pl.DataFrame:
        raise ConfigError("the evaluated model's role cannot be switched off")


SOLVER = BfclSolver()
