"""ACEBench's single call: its prompt texts put in (texts.py), one answer per sample through the
`model` role, constrained to its answer format (grammar.py) in the benchmark format.

single_call (inference/solvers/single_call.py) runs it, over samples whose system and user turns
are rendered from the texts `dataset.prompts` picks and whose `answer_regex` (the regex of
`[ApiName(...)]` over the case's APIs) constrains each request instead of the JSON call schema;
single_call's `gold_in_schema` then says whether the gold answer, as ACEBench writes it, matches
that regex.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from inference.console import marker
from inference.errors import ConfigError
from inference.generation import MODEL_ROLE
from inference.solvers import SolveContext
from inference.solvers.single_call import SOLVER as SINGLE_CALL
from . import prompt_root, read_cases, texts
from .grammar import answer_regex


def with_texts(samples: pl.DataFrame, chosen: texts.PromptTexts, path: Path) -> pl.DataFrame:
    """The samples with their system and user turns rendered from `chosen`."""
    cases = {(s, q["id"]): q for s in samples["setting"].unique().to_list() for q, _ in read_cases(path, s)}
    turns = [chosen.render(q["profile"], q["function"], q["question"])
             for q in (cases[(s, f"{s}_{n}")] for s, n in samples.select("setting", "entry_id").iter_rows())]
    return samples.with_columns(pl.Series("system", [t[0] for t in turns], dtype=pl.String),
                                pl.Series("user", [t[1] for t in turns], dtype=pl.String))


def with_grammar(samples: pl.DataFrame) -> pl.DataFrame:
    """`answer_regex` per sample: single_call constrains a request by it, and reads the gold's
    coverage from it."""
    regexes = [answer_regex(json.loads(functions)) for functions in samples["functions"].to_list()]
    return samples.with_columns(pl.Series("answer_regex", regexes, dtype=pl.String))


class AceBenchSolver:
    """single_call with ACEBench's texts in the prompt and its answer format as the constraint."""

    role = MODEL_ROLE

    def solve(self, samples: pl.DataFrame, context: SolveContext) -> pl.DataFrame:
        cfg = context.cfg
        chosen = texts.resolve(cfg.dataset.prompts, prompt_root(cfg.dataset))
        marker(f"ACEBench prompt texts: {chosen.line()} (dataset.prompts={cfg.dataset.prompts})")
        samples = with_grammar(with_texts(samples, chosen, Path(cfg.dataset.path).expanduser()))
        solved = SINGLE_CALL.solve(samples, context)
        if context.facts["prompt"].get("format") != "native" and cfg.decoding.constraint != "none":
            context.facts["prompt"]["grammar"] = "ACEBench's answer format (a regex)"
        context.facts["acebench"] = chosen.facts()
        context.facts["report_facts"] = {"prompt texts": chosen.line()}
        return solved.drop("answer_regex")

    def skip(self, samples: pl.DataFrame, context: SolveContext) -> pl.DataFrame:
        raise ConfigError("the evaluated model's role cannot be switched off")


SOLVER = AceBenchSolver()
