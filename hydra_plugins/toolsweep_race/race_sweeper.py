"""`hydra/sweeper=race`: a racing sweep. Every job (checkpoint) is scored on growing nested
subsets of the benchmark's samples (`dataset.subsample`, one seeded order stratified by setting);
after each round, jobs worse than the round's leader with confidence are stopped (grading/race.py
says how, and how the error rate is controlled); the survivors of the last round are scored on
every sample. Rounds run through whichever launcher is configured (local, local_gpus, slurm).

Each job keeps its own dir across rounds (`hydra.sweep.subdir` = its number), so round r's run
resumes from what round r-1 stored (nothing is generated twice), and `race.json` in the sweep dir
records every round as it ends: a killed race rerun into its dir replays the recorded rounds
without launching them and continues with the first unfinished one.
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

RACE_FILE = "race.json"


@dataclass
class RaceSweeperConf:
    _target_: str = "hydra_plugins.toolsweep_race.race_sweeper.RaceSweeper"
    alpha: float = 0.05
    """Family-wise error: the chance of stopping any job no worse than delta below the best."""
    delta: float = 0.0
    """Stop only jobs worse than the leader by more than this (in the metric's units: 0.01 = 1 point)."""
    first: int = 100
    """Records in the first round; each next round `growth` times more, the last one all of them."""
    growth: float = 2.0
    keep: List[str] = field(default_factory=list)
    """Jobs never stopped: job numbers, or text found in a job's overrides (a checkpoint's name)."""
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

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context = config, hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(hydra_context=hydra_context,
                                                                task_function=task_function, config=config)

    def sweep(self, arguments: List[str]) -> Any:
        from grading.race import round_sizes

        assert self.config is not None
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        from inference.sweep import sweep_jobs

        jobs = sweep_jobs(arguments)
        sizes = round_sizes(self._records(jobs[0]), self.settings["first"], self.settings["growth"])
        record = _resumable(sweep_dir, {"settings": self.settings, "jobs": [" ".join(j) for j in jobs],
                                        "sizes": sizes, "rounds": []})
        units = race_units(jobs)
        kept = kept_jobs(jobs, self.settings["keep"])
        keep = {str(unit[0]) for unit in units if kept & set(unit)}
        alive = units
        returns, launched = [], 0
        for number, size in enumerate(sizes, start=1):
            if number <= len(record["rounds"]):  # recorded before a kill: its decisions stand
                alive = [u for u in alive if str(u[0]) not in _out(record["rounds"][number - 1])]
                continue
            if not alive:
                break
            batch = [[*jobs[k], f"++dataset.subsample={size}", f"++dataset.subsample_seed={self.settings['seed']}",
                      f"hydra.sweep.subdir={k}"] for unit in alive for k in unit]
            self.validate_batch_is_legal(batch)
            returns.append(self.launcher.launch(batch, initial_job_idx=launched))
            launched += len(batch)
            outcome = self._decide(sweep_dir, number, size, len(sizes), alive, keep)
            record["rounds"].append(outcome)
            _write(sweep_dir, record)
            _say(outcome, len(sizes))
            alive = [u for u in alive if str(u[0]) not in _out(outcome)]
        return returns

    def _records(self, job: List[str]) -> int:
        """How many records the benchmark's samples are for the first job's config, all its
        shards together (the race's whole set), read as the run reads them."""
        from inference.run import load_records
        from inference.sweep import typed_job

        assert self.hydra_context is not None and self.config is not None
        cfg, benchmark = typed_job(self.hydra_context.config_loader.load_sweep_config(self.config, list(job)))
        return load_records(cfg, benchmark).height

    def _decide(self, sweep_dir: Path, number: int, size: int, rounds: int, alive: List[List[int]],
                keep: Set[str]) -> Dict[str, Any]:
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
                               reduce=None if metric.per_sample else metric.reduce)
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


def kept_jobs(jobs: List[List[str]], keep: Sequence[str]) -> set[int]:
    """The jobs `keep` names: a number names a job by its number (not a digit in its overrides:
    `dataset.shard=1`), other text any job with that text in the value of one of its swept
    overrides (those that differ between jobs: `checkpoint-100` names a model.path, not every job
    whose shared overrides happen to hold it)."""
    shared = set.intersection(*(set(job) for job in jobs)) if jobs else set()
    found = set()
    for name in keep:
        for k, job in enumerate(jobs):
            swept = [o for o in job if o not in shared]
            if name == str(k) if name.isdigit() else any(name in o.partition("=")[2] for o in swept):
                found.add(k)
    return found


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


def _resumable(sweep_dir: Path, fresh: dict[str, Any]) -> dict[str, Any]:
    """race.json of an earlier, killed run of this same race (its rounds kept), else `fresh`."""
    from grading.race import read_race

    earlier = read_race(sweep_dir)
    same = all(earlier.get(key) == fresh[key] for key in ("settings", "jobs", "sizes"))
    return {**fresh, "rounds": earlier.get("rounds", [])} if same else fresh


def _write(sweep_dir: Path, record: Dict[str, Any]) -> None:
    from grading.files import atomic_write_text

    atomic_write_text(sweep_dir / RACE_FILE, json.dumps(record, indent=2) + "\n")


def _say(outcome: dict[str, Any], rounds: int) -> None:
    stopped = [d for d in outcome.get("decisions", []) if d["stopped"]]
    line = (f"[toolsweep] race round {outcome['round']}/{rounds}: {outcome['size']} records, leader job "
            f"{outcome['leader']}")
    if stopped:
        line += "; stopped " + ", ".join(f"job {d['job']} (behind by {d['diff']:.3f}, p={d['p']:.2g})" for d in stopped)
    if outcome.get("failed"):
        line += "; failed " + ", ".join(outcome["failed"])
    print(line, file=sys.stdout, flush=True)
