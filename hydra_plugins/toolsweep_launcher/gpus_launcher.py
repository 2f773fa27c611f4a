"""`hydra/launcher=local_gpus`: a multi-GPU node's sweep, one warm worker per GPU slot.

Hydra's joblib launcher runs every job in a process of a loky pool, n_jobs at once, and toolsweep's
task runs the job in a process of its own on a free GPU slot: each job loads its engine again.
With `reuse_engine` (the default) this launcher plans the jobs as the local launcher does
(warm_launcher.warm_plan: the jobs of one engine back to back, in groups), deals the groups whole
to n_jobs lanes, balanced by job count, and runs the lanes side by side in the loky pool. A lane
runs its jobs one after another on its own warm worker (inference/workers.py), which takes a free
GPU slot when it starts and holds it while it lives, so two lanes never share a GPU; the worker
keeps its engine for the next job of its group and ends with the lane. `reuse_engine=false` is the
joblib launcher exactly: one new process, and engine, per job.
"""

# No `from __future__ import annotations`: Hydra imports plugin modules without registering them
# in sys.modules, where a dataclass's string annotations cannot be resolved.
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from hydra.core.config_store import ConfigStore
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, setup_globals
from hydra_plugins.hydra_joblib_launcher._core import process_joblib_cfg
from hydra_plugins.hydra_joblib_launcher.config import JobLibLauncherConf
from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher
from hydra_plugins.toolsweep_launcher import warm_launcher

log = logging.getLogger(__name__)


@dataclass
class GpusLauncherConf(JobLibLauncherConf):
    _target_: str = "hydra_plugins.toolsweep_launcher.gpus_launcher.GpusLauncher"
    reuse_engine: bool = True
    """Run each lane of jobs (whole groups of jobs with one engine) on a warm worker that holds one GPU
    slot and keeps its engine for the lane's next job with the same one; false: a new process, and
    engine, for every job (Hydra's joblib launcher)."""


ConfigStore.instance().store(group="hydra/launcher", name="toolsweep_local_gpus", node=GpusLauncherConf,
                             provider="toolsweep")


class GpusLauncher(JoblibLauncher):
    def __init__(self, reuse_engine: bool = True, **joblib: Any) -> None:
        super().__init__(**joblib)  # joblib.Parallel's options only: Parallel takes every one of them
        self.reuse_engine = bool(reuse_engine)

    # each job keeps its Hydra number, dir and overrides, composed as the local launcher composes them
    _job_config = warm_launcher.WarmLauncher._job_config

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        if not self.reuse_engine:
            return super().launch(job_overrides, initial_job_idx)
        setup_globals()
        assert self.hydra_context is not None and self.config is not None and self.task_function is not None
        hydra = self.config.hydra
        configure_log(hydra.hydra_logging, hydra.verbose)
        Path(str(hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        if not job_overrides:
            return []
        configs = [self._job_config(overrides, initial_job_idx + i) for i, overrides in enumerate(job_overrides)]
        plan = warm_launcher.warm_plan(configs)
        options = {**self.joblib, "backend": "loky"}  # as the joblib launcher: threads do not suit Hydra
        process_joblib_cfg(options)
        lanes = split_lanes(plan.groups, lane_count(options.get("n_jobs")))
        log.info(f"Launching {len(job_overrides)} jobs in {len(lanes)} lane(s), one warm worker and GPU slot each")
        state = Singleton.get_state()
        from joblib import Parallel, delayed

        done = Parallel(**{**options, "n_jobs": len(lanes)})(
            delayed(run_lane)(self.hydra_context, self.task_function, state, [(i, configs[i]) for i in lane], plan,
                              hydra.hydra_logging, hydra.verbose)
            for lane in lanes)
        runs: Dict[int, JobReturn] = {index: ran for lane_runs in done for index, ran in lane_runs.items()}
        return [runs[index] for index in range(len(job_overrides))]


def lane_count(n_jobs: Any) -> int:
    """How many lanes hydra.launcher.n_jobs asks for, read as joblib reads it (-1: one per CPU)."""
    from joblib import effective_n_jobs

    return effective_n_jobs(n_jobs if n_jobs is not None else 1)


def split_lanes(groups: Sequence[Sequence[int]], lanes: int) -> List[List[int]]:
    """Deal the plan's groups (the jobs of one engine, in the plan's order) whole to at most `lanes`
    lanes, balanced by job count: the largest group first, each to the lane with the fewest jobs (the
    first such lane on a tie). A lane runs its groups in the plan's order (checkpoints of one shape
    after each other); the lanes come in the order of their first group, and a lane without a group
    is left out. The same plan always gives the same lanes."""
    dealt: List[List[int]] = [[] for _ in range(max(int(lanes), 1))]
    jobs = [0] * len(dealt)
    for position in sorted(range(len(groups)), key=lambda p: -len(groups[p])):  # stable: ties in plan order
        lane = min(range(len(dealt)), key=lambda n: jobs[n])
        dealt[lane].append(position)
        jobs[lane] += len(groups[position])
    used = sorted((sorted(positions) for positions in dealt if positions), key=lambda positions: positions[0])
    return [[index for position in positions for index in groups[position]] for positions in used]


def run_lane(hydra_context: Any, task_function: Any, singleton_state: Dict[Any, Any], jobs: Sequence[Tuple[int, Any]],
             plan: Any, hydra_logging: Any, verbose: Any) -> Dict[int, JobReturn]:
    """Run one lane's jobs (index, composed job config) in this loky process, on its warm worker, and
    end the worker with the lane (its GPU slot given back, its engine's memory freed): a loky process
    outlives the launch, and the next launch (a racing sweep's next round) deals its lanes afresh."""
    from inference import workers

    setup_globals()
    Singleton.set_state(singleton_state)  # Hydra's config store and plugins, as the joblib launcher's jobs get them
    configure_log(hydra_logging, verbose)
    try:
        return warm_launcher.run_warm(hydra_context, task_function, jobs, plan,
                                      lambda: configure_log(hydra_logging, verbose))
    finally:
        workers.close_active()
