"""ETAPP's dataset options (`dataset.*` under dataset=etapp), typed so a typo or an option ETAPP
does not use fails before any model loads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from grading.scorers.etapp_judge.rubric import METHODS as _RECORD_STARTS
from inference.config import DatasetConfig
from .prompt_files import MODES as PROMPT_SOURCES

METHODS = tuple(_RECORD_STARTS)
"""Agent methods: fc (the model's own tool calls), react, e_react (a plan, then ReAct); one list,
the judge's reading of each method's record (grading/scorers/etapp_judge/rubric.py) names them."""
STATES = ("tool", "app", "sequential")
SUBSETS = ("reasoning",)


@dataclass
class EtappOptions(DatasetConfig):
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    """Agent methods to run: fc (the model's own tool calls), react, e_react (a plan, then ReAct)."""
    users: Optional[list[str]] = None
    """User file stems (e.g. John_Doe); None: all 16, in profiles.json order."""
    instructions: Optional[list[int]] = None
    """Instruction numbers (from 0, in instruction.json order); None: all 50."""
    subset: Optional[str] = None
    """reasoning: the paper's 100 cases for reasoning models (two users per instruction, drawn as
    upstream's reasoning evaluator draws them); None: every selected case."""
    max_turns: int = 20
    """Model calls per case; the last one's output is recorded but not acted on."""
    max_calls_per_response: int = 10
    max_calls_per_case: int = 50
    max_tokens_per_call: int = 16384
    """Prompt + answer tokens one call may use; beyond it the case ends (upstream's guard)."""
    episodes_per_batch: Optional[int] = None
    """Episodes driven together, turn by turn, in one batched generate per turn; None: all of them
    (fastest). 1 runs one case to its end before the next starts, as upstream does."""
    reasoning: bool = False
    """Upstream's --reasoning: every ReAct step loses its `<think>...</think>` blocks (and is
    stripped) before it is read and kept in the chat. False (upstream's default): read as written.
    ReAct only, as upstream: E-ReAct and FC turns are always read as written, reasoning included."""
    state: str = "tool"
    """tool: upstream's per-tool tables, fresh per case; app: one state per app, fresh per case;
    sequential: upstream's per-tool tables kept across a user's cases, in file order."""
    prompts: str = "auto"
    """Whose texts the agent and the judge read: upstream (upstream's own prompt files, read from
    the ETAPP copy at dataset.path, never shipped), own (toolsweep's wording), auto (upstream's
    when the files are there, else own; a notice says which, and run.json records it)."""
    travelplanner: Optional[str] = None
    """TravelPlanner database folder (restaurants); None: `travelplanner` next to dataset.path."""
    upstream: Optional[str] = None
    """A folder of upstream ETAPP `<User>_instruction.json` files: judge those trajectories instead
    of running an agent (name one setting and one method: the files do not say which)."""
    judge_analysis_chars: int = 300
    """The most characters of an analysis string in the judge's guided schema; lowered per case so the
    longest answer fits roles.judge.decoding.max_new_tokens (recorded as judge_analysis_chars)."""
    judge_retries: int = 1
    """Extra judge attempts for an answer that does not parse, each with analysis strings half as long."""
    pass_score: float = 4.0
    """A judge score at or above it passes (the `*_pass` metrics, and their pass@k and pass^k under
    decoding.samples > 1). Kept in samples.parquet, so a re-grade reads the same threshold."""

    def problems(self) -> list[str]:
        """Every invalid value, with the fix."""
        found = []
        if not self.methods or any(m not in METHODS for m in self.methods):
            found.append(f"dataset.methods must be a non-empty subset of {list(METHODS)}, got {list(self.methods)}")
        if self.subset is not None and self.subset not in SUBSETS:
            found.append(f"dataset.subset must be one of {list(SUBSETS)} or null, got {self.subset!r}")
        if self.prompts not in PROMPT_SOURCES:
            found.append(f"dataset.prompts must be one of {list(PROMPT_SOURCES)}, got {self.prompts!r}")
        if self.state not in STATES:
            found.append(f"dataset.state must be one of {list(STATES)}, got {self.state!r}")
        for key in ("max_turns", "max_calls_per_response", "max_calls_per_case", "max_tokens_per_call",
                    "judge_analysis_chars"):
            if getattr(self, key) < 1:
                found.append(f"dataset.{key} must be an integer >= 1, got {getattr(self, key)}")
        if self.episodes_per_batch is not None and self.episodes_per_batch < 1:
            found.append(f"dataset.episodes_per_batch must be an integer >= 1 or null (all), got {self.episodes_per_batch}")
        if not 0 <= self.pass_score <= 5:
            found.append(f"dataset.pass_score must be a judge score in [0, 5], got {self.pass_score}")
        if self.judge_retries < 0:
            found.append(f"dataset.judge_retries must be an integer >= 0, got {self.judge_retries}")
        if self.reasoning and "react" not in self.methods:
            found.append("dataset.reasoning=true drops <think> blocks from ReAct steps only (upstream's --reasoning); "
                         "add react to dataset.methods, or leave dataset.reasoning false")
        if self.reasoning and self.upstream:
            found.append("dataset.reasoning=true reads the agent's ReAct steps, and dataset.upstream runs no agent "
                         "(its files were read when they were made); leave dataset.reasoning false")
        return found
