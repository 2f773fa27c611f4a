"""Scorers shipped with toolsweep: one module per scoring scheme, each defining SCORER.

Nothing here lists them: `grading.scoring.get_scorer` finds a module by its name. What is declared
here is the one scorer of sample tables written before rows named their scorer.
"""

from __future__ import annotations

import polars as pl

from grading.errors import GradingError

LEGACY_SCORER = "petoolbench"
"""Tables written before samples named their scorer were PEToolBench runs."""


def legacy_scorer(samples: pl.DataFrame) -> str:
    """The scorer of a sample table with no `scorer` column, or an error where it cannot be told."""
    # Before scorers, FamilyTool and ToolSpectrum tables declared their rules in columns; their
    # scorers now read columns those tables lack, so only PEToolBench tables re-grade.
    if "official_parser" in samples.columns and (samples["official_parser"] != "tool_name_regex").any():
        raise GradingError("this sample table predates per-benchmark scorers and is not a PEToolBench run: "
                           "rerun it with toolsweep (its generations come from the cache, nothing is regenerated)")
    return LEGACY_SCORER
