"""What a benchmark declares so shared code never looks for its names.

- `SideTable`: a per-sample table a solver writes beside samples.parquet (an agent's messages, a
  judge's answers). A solver lists its own in `side_tables`; the run records the ones it wrote in
  run.json (`side_tables`), where merge and the case view read them.
- A scorer's views, the parts of a report that exist only for some benchmarks, each optional:
  `cases` (grading.case_view.CaseView), `judge_view` (`JudgeView`: the role whose model judges, its
  dimensions and their scale), `outcome_view` (`OutcomeView`: a grade field that sorts each answer
  into a fixed taxonomy), `ablation` (`AblationAxis`: a config option whose values a sweep compares).
- `JUDGE_STATUSES`: what became of each sample sent, or not, to a judge, as a typed column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from grading.errors import GradingError

SIDE_TABLES = "side_tables"
"""run.json's key listing the side tables a run wrote."""
MESSAGES = "messages"
"""A side table of one row per message (sample_id, turn, role, content, tool_calls, tool_error):
what the case view shows as a case's turns."""
JUDGE_ANSWERS = "judge_answers"
"""A side table of one row per judged sample, holding the judge's raw answer."""


@dataclass(frozen=True)
class SideTable:
    """A per-sample table a solver writes into the run dir besides samples.parquet."""

    name: str
    """Its file name in the run dir (a Parquet file)."""
    kind: str
    """What it holds: MESSAGES, JUDGE_ANSWERS, or a kind of the benchmark's own."""
    order: tuple[str, ...] = ()
    """Columns that order one sample's rows (e.g. a message's index); rows follow sample order first."""
    key: str = "sample_id"
    """The column naming each row's sample."""
    description: str = ""
    schema: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    """Its columns and their Polars types, where the solver writes them with a fixed schema (the
    reference pages list them); not recorded in run.json."""

    def __post_init__(self) -> None:
        if not self.name.endswith(".parquet") or "/" in self.name:
            raise GradingError(f"a side table is a Parquet file in the run dir: its name must end in .parquet and "
                               f"hold no '/', got {self.name!r}")

    def fact(self) -> dict[str, Any]:
        """Its entry in run.json's `side_tables`."""
        return {"name": self.name, "kind": self.kind, "order": list(self.order), "key": self.key,
                "description": self.description}

    @classmethod
    def from_fact(cls, fact: Mapping[str, Any]) -> "SideTable":
        """The table a run.json entry describes."""
        try:
            return cls(str(fact["name"]), str(fact["kind"]), tuple(fact.get("order") or ()),
                       str(fact.get("key") or "sample_id"), str(fact.get("description") or ""))
        except (KeyError, TypeError) as exc:
            raise GradingError(f"run.json's {SIDE_TABLES} entry {fact!r} lacks {exc}: rewrite it with the run's "
                               "solvers (toolsweep grade RUN_DIR keeps it as written)") from None


def side_tables_in(facts: Mapping[str, Any]) -> list[SideTable] | None:
    """The side tables a run's facts (run.json) list; None for a run written before they were listed."""
    listed = facts.get(SIDE_TABLES)
    return None if listed is None else [SideTable.from_fact(f) for f in listed]


def side_table_of(facts: Mapping[str, Any], kind: str) -> SideTable | None:
    """The run's first side table of `kind`, or None."""
    return next((t for t in side_tables_in(facts) or [] if t.kind == kind), None)


JUDGED, JUDGE_FAILED, JUDGE_TOO_LONG, NOT_JUDGED = "judged", "failed", "too_long", "not_judged"
JUDGE_STATUSES = (JUDGED, JUDGE_FAILED, JUDGE_TOO_LONG, NOT_JUDGED)
"""A sample's judge status: `judged` (scored), `failed` (sent, but no readable answer: the judge
engine failed or its answer did not parse), `too_long` (its prompt or answer did not fit the
judge's context: a failure too), `not_judged` (never sent: judging switched off, or nothing to judge)."""
JUDGE_STATUS = "judge_status"
"""The sample and judgement column holding it."""


def check_judge_status(values: Sequence[str | None]) -> None:
    """An error naming any value outside JUDGE_STATUSES (null: no judge row)."""
    bad = sorted({v for v in values if v is not None and v not in JUDGE_STATUSES})
    if bad:
        raise GradingError(f"{JUDGE_STATUS} must be one of {list(JUDGE_STATUSES)} or null, got {bad}")


@dataclass(frozen=True)
class JudgeView:
    """A judge model's scores, as agreement and boards read them."""

    role: str
    """The model role whose model judges (run.json's `roles.<role>`)."""
    dimensions: Mapping[str, str]
    """Dimension name -> the sample column of the judge's score on it, in report order."""
    scale: tuple[int, ...]
    """The scores a dimension takes, in order (ordinal)."""
    headline: str
    """The dimension checkpoints are ranked by."""
    points: str | None = None
    """A sample column of JSON {group: {point: score}}: per key point scores, or None."""
    point_scale: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.headline not in self.dimensions:
            raise GradingError(f"a judge view's headline must be one of its dimensions {list(self.dimensions)}, "
                               f"got {self.headline!r}")


def judge_model(view: JudgeView | None, facts: Mapping[str, Any]) -> str | None:
    """The name of the model that judged a run (run.json `roles.<view.role>.model.name`; runs
    written before roles: a top-level `<view.role>`); None where its scorer declares no judge or
    the run ran none."""
    if view is None:
        return None
    model = (((facts.get("roles") or {}).get(view.role) or {}).get("model"))
    model = model if isinstance(model, dict) else facts.get(view.role)
    return model.get("name") if isinstance(model, dict) else None


@dataclass(frozen=True)
class OutcomeView:
    """A grade field that sorts each answer into one of a fixed set of outcomes (an error taxonomy)."""

    field: str
    """The grade field, per reading (`{reading}_{field}`)."""
    outcomes: tuple[str, ...]
    """Its values in report order; a null value is shown as UNDIAGNOSED."""
    colours: Mapping[str, str] = field(default_factory=dict)
    """Outcome -> a figure colour."""


UNDIAGNOSED = "not diagnosed"


@dataclass(frozen=True)
class AblationAxis:
    """A config option whose values a sweep compares, shown as a board column and a report figure."""

    name: str
    """The column heading (e.g. `history`)."""
    option: str
    """The dotted override that sets it (e.g. `dataset.history`)."""
    label: Callable[[Mapping[str, Any]], str | None]
    """A run's resolved config (run.json `config`) -> its value as a board shows it; None for a run
    that predates the option."""
    baseline: str
    """The value that ablates nothing: a board shows the column only where a job has another."""
    counterfactual: str | None = None
    """A sample column a counterfactual value of the option fills (the gold of the unablated
    record, where the ablation changed the gold): `toolsweep compare` of a baseline run against
    such a run pairs the samples both hold and counts the answers that moved with the change."""


def counterfactual(samples: Any, axis: AblationAxis | None) -> bool:
    """Whether a sample table is of a counterfactual run of `axis` (its counterfactual column filled)."""
    column = axis.counterfactual if axis is not None else None
    return column is not None and column in samples.columns and samples[column].null_count() < samples.height


# A scorer that is not a RowScorer may lack the attributes: no view.
def judge_view(scorer: Any) -> JudgeView | None:
    """The scorer's judge view, or None where no judge scores its samples."""
    return getattr(scorer, "judge_view", None)


def outcome_view(scorer: Any) -> OutcomeView | None:
    """The scorer's outcome taxonomy, or None."""
    return getattr(scorer, "outcome_view", None)


def ablation_axis(scorer: Any) -> AblationAxis | None:
    """The scorer's ablation axis, or None."""
    return getattr(scorer, "ablation", None)
