"""ACEBench's single call: its prompt texts put in (texts.py), one answer per sample through the
`model` role, constrained to its answer format (grammar.py) in the benchmark format.

The steps are single_call's (inference/solvers/single_call.py); two differ: the system and user
turns are rendered from the texts `dataset.prompts` picks, and under a constraint each request
carries the regex of `[ApiName(...)]` over the case's APIs instead of the JSON call schema (whose
`gold_in_schema` then says whether the gold answer, as written, matches that regex).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import polars as pl

from inference.console import marker
from inference.errors import ConfigError
from inference.generation import MODEL_ROLE
from inference.solvers import SolveContext
from inference.solvers.single_call import attach_chats, build_prompts, collect, plan_prompts, read_calls, requests_for
from . import prompt_root, read_cases, texts
from .grammar import answer_regex, gold_answer


def with_texts(samples: pl.DataFrame, chosen: texts.PromptTexts, path: Path) -> pl.DataFrame:
    """The samples with their system and user turns rendered from `chosen`."""
    cases = {(s, q["id"]): q for s in samples["setting"].unique().to_list() for q, _ in read_cases(path, s)}
    turns = [chosen.render(q["profile"], q["function"], q["question"])
             for q in (cases[(s, f"{s}_{n}")] for s, n in samples.select("setting", "entry_id").iter_rows())]
    return samples.with_columns(pl.Series("system", [t[0] for t in turns], dtype=pl.String),
                                pl.Series("user", [t[1] for t in turns], dtype=pl.String))


def with_grammar(prompts: pl.DataFrame) -> pl.DataFrame:
    """`answer_regex` per sample, and `gold_in_schema`: whether the gold answer matches it."""
    regexes, fits = [], []
    for functions, truth in prompts.select("functions", "ground_truth").iter_rows():
        regex = answer_regex(json.loads(functions))
        regexes.append(regex)
        fits.append(re.fullmatch(regex, gold_answer(json.loads(truth))) is not None)
    return prompts.with_columns(pl.Series("answer_regex", regexes, dtype=pl.String),
                                pl.Series("gold_in_schema", fits, dtype=pl.Boolean))


class AceBenchSolver:
    """Ask every sample once, in ACEBench's words and answer format; its answer is `output`."""

    role = MODEL_ROLE

    def solve(self, samples: pl.DataFrame, context: SolveContext) -> pl.DataFrame:
        cfg, generator = context.cfg, context.generator(self.role)
        chosen = texts.resolve(cfg.dataset.prompts, prompt_root(cfg.dataset))
        marker(f"ACEBench prompt texts: {chosen.line()} (dataset.prompts={cfg.dataset.prompts})")
        samples = with_texts(samples, chosen, Path(cfg.dataset.path).expanduser())
        with context.timer.phase("prompts"):
            marker("building prompts")
            tokenizer = generator.tokenizer
            plan = plan_prompts(cfg, context.benchmark, tokenizer)
            prompts = build_prompts(cfg, samples, tokenizer, generator.max_model_len, plan,
                                    render=generator.loads_model)
            if not plan.native:
                prompts = with_grammar(prompts)
            if generator.role.engine.sends_chat:
                prompts = attach_chats(prompts, plan, generator)
        constrained = not plan.native and cfg.decoding.constraint != "none"
        context.facts["prompt"] = {**plan.facts(), **({"grammar": "ACEBench's answer format (a regex)"}
                                                      if constrained else {})}
        context.facts["acebench"] = chosen.facts()
        context.facts["report_facts"] = {"prompt texts": chosen.line()}
        with context.timer.phase("generate"):
            requests = requests_for(prompts, cfg.decoding.constraint, plan)
            if constrained:
                regex = dict(prompts.select("sample_id", "answer_regex").iter_rows())
                requests = [replace(r, regex=regex[r.sample_id]) for r in requests]
            generations = generator.generate(requests)
        return read_calls(collect(prompts.drop("answer_regex", strict=False), generations), plan, tokenizer)

    def skip(self, samples: pl.DataFrame, context: SolveContext) -> pl.DataFrame:
        raise ConfigError("the evaluated model's role cannot be switched off")


SOLVER = AceBenchSolver()
