"""`hydra/sweeper=race`: a racing sweep. Every job (checkpoint) is scored on growing nested
subsets of the benchmark's samples (`dataset.subsample`, one seeded order stratified by setting);
after each round, jobs shown worse than some other job with confidence are stopped (grading/race.py
says how, and how the error rate is controlled whichever job leads); the survivors of the last round are scored on
every sample. Rounds run through whichever launcher is configured (local, local_gpus, slurm).

Each job keeps its own dir across rounds (`hydra.sweep.subdir` = its number), so round r's run
resumes from what round r-1 stored (nothing is generated twice), and `race.json` in the sweep dir
records every round as it ends: a killed race rerun into its dir replays the recorded rounds
without launching them and continues with the first unfinished one. A job that failed (not one the
race stopped) is run again on such a rerun, for each recorded round it has no decision in.
"""

# No `from __future__ import annotations`: Hydra imports plugin modules without registering them
# in sys.modules, where a dataclass's string annotations cannot be resolved.
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Set

import numpy as np
from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from inference.errors import ConfigError

RACE_FILE = "race.json"


@dataclass
class RaceSweeperConf:
    _target_: str = "hydra_plugins.toolsweep_race.race_sweeper.RaceSweeper"
    alpha: float = 0.05
    """Family-wise error: the chance of stopping any job no worse than delta below the best."""
    delta: float = 0.0
    """Stop only jobs worse than another job by more than this (in the metric's units: 0.01 = 1 point)."""
    first: int = 100
    """Records in the first round (at least 1); each next round `growth` times more, the last one all of them."""
    growth: float = 2.0
    """How much each round grows (> 1); a plan of more than 20 rounds is refused."""
    keep: List[str] = field(default_factory=list)
    """Jobs never stopped: job numbers, or a whole value the jobs differ in (`checkpoint-100` names
    model.path=/runs/checkpoint-100, not checkpoint-1000); an entry naming no job is refused."""
    metric: Optional[str] = None
    """The metric raced on (per-sample, with a direction); None: the scorer's headline metric."""
    seed: int = 0
    """The seed of the sample order (passed to every job as dataset.subsample_seed) and of the
    resampling tests."""


ConfigStore.instance().store(group="hydra/sweeper", name="race", node=RaceSweeperConf, provider="toolsweep")


class RaceSweeper(Sweeper):
    def __init__(self, alpha: float, delta: float, first: int, growth: float, keep: Sequence[str],
                 metric: Optional[str], seed: int) -> None:
        self.settings = {"alpha": float(alpha), "delta": float(delta), "first": int(first), "growth": float(growth),
                         "keep": [str(k) for k in keep], "metric": metric, "seed": int(seed)}
        self.config: Optional[DictConfig] = None
        self.launcher: Any = None
        self.hydra_context: Optional[HydraContext] = None
        self.launched = 0
        """Jobs launched by this run of the sweep: the next one's Hydra job number."""

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context = config, hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(hydra_context=hydra_context,
                                                                task_function=task_function, config=config)

    def sweep(self, arguments: List[str]) -> Any:
        from inference.sweep import expect_jobs, sweep_jobs

        assert self.config is not None
        jobs = sweep_jobs(arguments)
        sizes, kept = self._plan(jobs)
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        record = _resumable(sweep_dir, {"settings": self.settings, "jobs": [list(j) for j in jobs],
                                        "sizes": sizes, "rounds": []})
        units = race_units(jobs)
        keep = {str(unit[0]) for unit in units if kept & set(unit)}
        alive = units
        returns: List[Any] = []
        for number, size in enumerate(sizes, start=1):
            rounds = record["rounds"]
            # a recorded round (before a kill, or of an ended race) stands; it runs again only for the
            # survivors it has no decision for: those that failed in it, or in an earlier round
            runs = _undecided(alive, rounds[number - 1]) if number <= len(rounds) else alive
            if runs:
                expect_jobs(self.launched + _runs_left(alive, rounds, len(sizes), number))
                returns.append(self._launch(jobs, runs, size))
                self._round(sweep_dir, record, number, runs, units, keep)
            if number <= len(rounds):
                alive = [u for u in alive if str(u[0]) not in _out(rounds[number - 1])]
        return returns

    def _plan(self, jobs: List[List[str]]) -> tuple[List[int], set[int]]:
        """The rounds' sizes and the kept jobs; every problem with the settings said at once, before
        any job runs (exit 2, as the sweep's own configuration errors)."""
        from grading.errors import GradingError
        from grading.race import round_sizes

        problems, sizes, kept = setting_problems(self.settings), [], set()
        try:
            kept = kept_jobs(jobs, self.settings["keep"])
        except ConfigError as exc:
            problems.append(str(exc))
        try:
            sizes = round_sizes(self._records(jobs[0]), self.settings["first"], self.settings["growth"])
        except GradingError as exc:
            problems.append(str(exc))
        if problems:
            print("toolsweep: error: hydra/sweeper=race cannot run this race, so no job was started:\n  "
                  + "\n  ".join(problems), file=sys.stderr, flush=True)
            sys.exit(2)
        return sizes, kept

    def _launch(self, jobs: List[List[str]], units: List[List[int]], size: int) -> Any:
        batch = [[*jobs[k], f"++dataset.subsample={size}", f"++dataset.subsample_seed={self.settings['seed']}",
                  f"hydra.sweep.subdir={k}"] for unit in units for k in unit]
        self.validate_batch_is_legal(batch)
        launched = self.launcher.launch(batch, initial_job_idx=self.launched)
        self.launched += len(batch)
        return launched

    def _round(self, sweep_dir: Path, record: Dict[str, Any], number: int, runs: List[List[int]],
               units: List[List[int]], keep: Set[str]) -> None:
        """Decide round `number` for the candidates just run (`runs`) and record it: a new round, or,
        in a recorded one, their decisions against its recorded leader (kept: its own decisions, and
        the round's others, stand)."""
        size, rounds = record["sizes"][number - 1], len(record["sizes"])
        if number > len(record["rounds"]):
            outcome = self._decide(sweep_dir, number, size, rounds, runs, keep, len(units))
            record["rounds"].append(outcome)
            again: List[str] = []
        else:
            recorded = record["rounds"][number - 1]
            leader = [u for u in units if str(u[0]) == recorded.get("leader")]
            outcome = self._decide(sweep_dir, number, size, rounds, leader + runs, keep | {str(u[0]) for u in leader},
                                   len(units))
            again = [str(u[0]) for u in runs]
            record["rounds"][number - 1] = _rejoined(recorded, outcome, set(again))
        _write(sweep_dir, record)
        _say(outcome, rounds, again)

    def _records(self, job: List[str]) -> int:
        """How many records the benchmark's samples are for the first job's config, all its
        shards together (the race's whole set), read as the run reads them."""
        from inference.run import load_records
        from inference.sweep import typed_job

        assert self.hydra_context is not None and self.config is not None
        cfg, benchmark = typed_job(self.hydra_context.config_loader.load_sweep_config(self.config, list(job)))
        return load_records(cfg, benchmark).height

    def _decide(self, sweep_dir: Path, number: int, size: int, rounds: int, alive: List[List[int]],
                keep: Set[str], candidates: int) -> Dict[str, Any]:
        from grading.race import decide_round, job_scores

        failed, scores, metric = {}, {}, None
        for unit in alive:
            name = str(unit[0])
            problems = [f"job {k}: {status}" for k in unit if (status := _job_status(sweep_dir / str(k)))]
            if problems:
                failed[name] = "; ".join(problems)
                continue
            scores[name] = {}
            for k in unit:  # a candidate's shards hold disjoint samples
                values, metric, _ = job_scores(sweep_dir / str(k), self.settings["metric"])
                scores[name].update(values)
        ids = sorted(set.intersection(*(set(v) for v in scores.values()))) if scores else []
        arrays = {k: np.array([v[i] for i in ids], dtype=np.float64) for k, v in scores.items()}
        outcome: dict[str, Any] = {"round": number, "size": size, "failed": failed}
        if not arrays:
            return {**outcome, "leader": None, "alpha": None, "metric": None, "decisions": []}
        decided = decide_round(number, size, arrays, bool(metric.higher_is_better), self.settings["alpha"], rounds,
                               keep=sorted(keep), delta=self.settings["delta"], seed=self.settings["seed"],
                               reduce=None if metric.per_sample else metric.reduce, candidates=candidates,
                               pooled=None if metric.per_sample else metric.pooled)
        members = {str(unit[0]): unit for unit in alive}
        return {**outcome, "leader": decided.leader, "alpha": decided.alpha, "metric": metric.name, "n": len(ids),
                "decisions": [{**asdict(d), **({"jobs": members[d.job]} if len(members[d.job]) > 1 else {})}
                              for d in decided.decisions]}


def race_units(jobs: List[List[str]]) -> List[List[int]]:
    """The race's candidates, each a list of job numbers: jobs whose overrides differ only in
    dataset.shard are the parts of one candidate (a sharded run), raced on their samples together."""
    units: Dict[tuple, List[int]] = {}
    for k, job in enumerate(jobs):
        units.setdefault(tuple(o for o in job if not o.startswith("dataset.shard=")), []).append(k)
    return list(units.values())


def setting_problems(settings: Dict[str, Any]) -> List[str]:
    """What is wrong with the race's settings that no round plan shows (growth and first: round_sizes)."""
    alpha = settings["alpha"]
    if 0 < alpha < 1:
        return []
    return [f"hydra.sweeper.alpha must lie strictly between 0 and 1, got {alpha}: e.g. hydra.sweeper.alpha=0.05"]


def kept_jobs(jobs: List[List[str]], keep: Sequence[str]) -> set[int]:
    """The jobs `keep` names. An entry of digits names a job by its number (never a digit in its
    overrides: `dataset.shard=1`); other text names a job by one of its swept overrides (those that
    differ between jobs), whole: the override (`model.path=/runs/checkpoint-100`), its value, or the
    value's last path components (`checkpoint-100`, `x/checkpoint-100`); never part of a name
    (`checkpoint-100` does not name checkpoint-1000). An entry that names no job is refused."""
    shared = set.intersection(*(set(job) for job in jobs)) if jobs else set()
    swept = [[o for o in job if o not in shared] for job in jobs]
    found, unnamed = set(), []
    for entry in keep:
        named = {k for k, overrides in enumerate(swept) if _names(entry, k, overrides)}
        found |= named
        unnamed += [] if named else [entry]
    if unnamed:
        values = list(dict.fromkeys(o for overrides in swept for o in overrides))
        listed = ", ".join(values[:20]) + (f" ... ({len(values)} in all)" if len(values) > 20 else "")
        raise ConfigError(f"hydra.sweeper.keep {unnamed} name(s) no job: an entry is a job number (0-{len(jobs) - 1}) "
                          f"or a whole value the jobs differ in, or its last path components; their values: "
                          f"{listed or 'none (the jobs differ in nothing)'}")
    return found


def _names(entry: str, number: int, overrides: List[str]) -> bool:
    from grading.sweep import override_text

    if entry.isdigit():
        return entry == str(number)
    entry = entry.rstrip("/")
    for override in overrides:
        # the value as Hydra reads it (quoted, escaped); a path's trailing / is no part of its name,
        # a leading + (++key=value) none of its key
        value = override_text(override.partition("=")[2]).rstrip("/")
        if entry in (override.lstrip("+"), value) or value.endswith("/" + entry):
            return True
    return False


def _job_status(job_dir: Path) -> Optional[str]:
    """None for a job whose run completed, else why it did not."""
    try:
        job = json.loads((job_dir / "job.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "no job.json: the job did not run"
    return None if job.get("status") == "complete" else str(job.get("reason") or "failed")


def _out(outcome: dict[str, Any]) -> set[str]:
    """The candidates (by their first job's number) a round ended: stopped or failed."""
    return {d["job"] for d in outcome.get("decisions", []) if d["stopped"]} | set(outcome.get("failed", {}))


def _undecided(alive: List[List[int]], outcome: dict[str, Any]) -> List[List[int]]:
    """The survivors a recorded round has no decision for: they failed in it, or before it, and
    are run again (a failed job is retried, as a plain sweep retries it; a stopped one is out)."""
    decided = {d["job"] for d in outcome.get("decisions", [])}
    return [unit for unit in alive if str(unit[0]) not in decided]


def _runs_left(alive: List[List[int]], rounds: List[dict[str, Any]], planned: int, number: int) -> int:
    """Job runs still to come from round `number` on, if no survivor stops: each survivor's jobs run
    once in every later round, except in the recorded rounds that decided it."""
    return sum(len(unit) for q in range(number, planned + 1)
               for unit in (alive if q > len(rounds) else _undecided(alive, rounds[q - 1])))


def _rejoined(recorded: dict[str, Any], outcome: dict[str, Any], again: Set[str]) -> dict[str, Any]:
    """A recorded round with the decisions of the candidates run again for it (`again`) taken now
    (`outcome`): theirs replace their failures; its other decisions and its leader stand."""
    failed = {**{k: v for k, v in recorded.get("failed", {}).items() if k not in again},
              **{k: v for k, v in outcome["failed"].items() if k in again}}
    taken = [{**d, "again": True} for d in outcome["decisions"] if d["job"] in again]
    decisions = [*recorded.get("decisions", []), *taken]
    merged = {**recorded, "failed": failed, "decisions": decisions}
    if recorded.get("leader") is None:  # every candidate had failed in it: the round is theirs now
        merged.update({key: outcome.get(key) for key in ("leader", "alpha", "metric", "n")})
    return merged


def _resumable(sweep_dir: Path, fresh: dict[str, Any]) -> dict[str, Any]:
    """race.json of an earlier, killed run of this same race (its rounds kept), else `fresh`."""
    from grading.race import read_race

    earlier = read_race(sweep_dir)
    same = all(earlier.get(key) == fresh[key] for key in ("settings", "jobs", "sizes"))
    return {**fresh, "rounds": earlier.get("rounds", [])} if same else fresh


def _write(sweep_dir: Path, record: Dict[str, Any]) -> None:
    from grading.files import atomic_write_text

    atomic_write_text(sweep_dir / RACE_FILE, json.dumps(record, indent=2) + "\n")


def _stop_said(decision: dict[str, Any]) -> str:
    """A stopped job as the console says it: whom it was shown worse than, by how much, and the p
    adjusted for every comparison the race makes (race.json's older records have only the leader's)."""
    if decision.get("against") is None:
        return f"job {decision['job']} (behind by {decision['diff']:.3f}, p={decision['p']:.2g})"
    return (f"job {decision['job']} (behind job {decision['against']} by {decision['diff']:.3f}, one-sided "
            f"p={decision['p']:.2g}, adjusted p={decision['adjusted_p']:.2g})")


def _say(outcome: dict[str, Any], rounds: int, again: Sequence[str] = ()) -> None:
    stopped = [d for d in outcome.get("decisions", []) if d["stopped"]]
    rerun = f" (run again for job {', '.join(again)})" if again else ""
    line = (f"[toolsweep] race round {outcome['round']}/{rounds}{rerun}: {outcome['size']} records, leader job "
            f"{outcome['leader']}")
    if stopped:
        line += "; stopped " + ", ".join(_stop_said(d) for d in stopped)
    if outcome.get("failed"):
        line += "; failed " + ", ".join(outcome["failed"])
    print(line, file=sys.stdout, flush=True)
