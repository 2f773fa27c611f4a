"""BFCL (Berkeley Function Calling Leaderboard), its AST categories: one prompt per case, the
answer read and checked as BFCL's own code does (Patil et al., ICML 2025).

A loader (data.py: categories as settings), the single-call solver with BFCL's prompt texts
(solver.py, texts.py), a grammar of the Python call syntax for constrained decoding
(grammar.py), and scorer `bfcl` (grading/scorers/bfcl.py: BFCL's decoding and AST checker,
reimplemented in grading/scorers/bfcl/decoding.py and grading/scorers/bfcl/checker.py). docs/benchmarks/bfcl.md
lists every difference from BFCL's code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from inference.benchmarks.base import Benchmark
from inference.config import BENCHMARK_FORMAT, DatasetConfig

from .data import AST_CATEGORIES, CATEGORIES, MAX_CALLS, gold_answer, load_bfcl
from .texts import MODES, locate


@dataclass
class BfclOptions(DatasetConfig):
    """BFCL's `dataset.*` options."""

    settings: list[str] = field(default_factory=lambda: list(AST_CATEGORIES))
    prompts: str = "auto"
    """Whose prompt texts: upstream (BFCL's own, read from dataset.bfcl_eval, never shipped), own
    (toolsweep's wording), auto (BFCL's where dataset.bfcl_eval or the data folder's bfcl_eval
    has them, else own; a notice line and run.json say which)."""
    bfcl_eval: Optional[str] = None
    """BFCL's code: a gorilla checkout, its bfcl_eval folder, or the bfcl_eval wheel file (only
    its prompt texts are read, with `ast`)."""

    def problems(self) -> list[str]:
        found = []
        if self.prompts not in MODES:
            found.append(f"dataset.prompts must be one of {list(MODES)}, got {self.prompts!r}")
        if self.bfcl_eval is not None and locate(Path(self.bfcl_eval).expanduser()) is None:
            found.append(f"dataset.bfcl_eval {self.bfcl_eval!r} holds no bfcl_eval/constants/default_prompts.py and "
                         "bfcl_eval/utils.py: point it at a gorilla checkout, its bfcl_eval folder or the bfcl_eval "
                         "wheel file, or leave it null (dataset.prompts=own)")
        if self.prompts == "upstream" and self.bfcl_eval is None and locate(Path(self.path).expanduser()) is None:
            found.append("dataset.prompts=upstream needs BFCL's texts: set dataset.bfcl_eval to a gorilla checkout, "
                         "its bfcl_eval folder or the bfcl_eval wheel file")
        return found


BENCHMARK = Benchmark(
    name="bfcl", settings=CATEGORIES, default_settings=AST_CATEGORIES, load=load_bfcl, scorer="bfcl", options=BfclOptions,
    solvers=("inference.benchmarks.bfcl.solver",), prompt_format=BENCHMARK_FORMAT, max_calls=MAX_CALLS,
    answer_grammar=True, calls_optional=True, gold=gold_answer, engine_answers=("prompts", "samples", "turns"),
    path_hint="BFCL's data folder (bfcl_eval/data: BFCL_v4_<category>.json and possible_answer/)")
