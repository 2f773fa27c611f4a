"""`hydra/launcher=local`: a local sweep's jobs one at a time, on warm workers (inference/workers.py).

Hydra's basic launcher runs each job's task in the sweep's process; toolsweep's task then runs the
job in a process of its own. With `reuse_engine` (the default) this launcher first orders the jobs
so that those with the same engine run back to back (each keeps its Hydra job number and dir),
and the task runs each job on the sweep's warm worker, which keeps its engine for the next job
with the same one. `reuse_engine=false` is the basic launcher exactly: one new process per job
(forked from the sweep's preloaded template where the job loads a model: inference/sweep.py).
"""

# No `from __future__ import annotations`: Hydra imports plugin modules without registering them
# in sys.modules, where a dataclass's string annotations cannot be resolved.
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn, configure_log, filter_overrides, run_job, setup_globals
from omegaconf import open_dict

log = logging.getLogger(__name__)


@dataclass
class WarmLauncherConf:
    _target_: str = "hydra_plugins.toolsweep_launcher.warm_launcher.WarmLauncher"
    reuse_engine: bool = True
    """Run the jobs on a warm worker that keeps its engine for the next job with the same one (jobs
    ordered so that they follow each other); false: a new process, and engine, for every job."""


ConfigStore.instance().store(group="hydra/launcher", name="toolsweep_local", node=WarmLauncherConf,
                             provider="toolsweep")


class WarmLauncher(BasicLauncher):
    def __init__(self, reuse_engine: bool = True) -> None:
        super().__init__()
        self.reuse_engine = bool(reuse_engine)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        if not self.reuse_engine:
            return super().launch(job_overrides, initial_job_idx)
        setup_globals()
        assert self.hydra_context is not None and self.config is not None and self.task_function is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        configs = [self._job_config(overrides, initial_job_idx + i) for i, overrides in enumerate(job_overrides)]
        plan = warm_plan(configs)
        log.info(f"Launching {len(job_overrides)} jobs locally, on warm workers")
        done = run_warm(self.hydra_context, self.task_function, [(i, configs[i]) for i in plan.order], plan,
                        lambda: configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose))
        return [done[index] for index in range(len(job_overrides))]

    def _job_config(self, overrides: Sequence[str], number: int):
        config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with open_dict(config):
            config.hydra.job.id = number
            config.hydra.job.num = number
        return config


@dataclass
class WarmPlan:
    """A sweep's jobs as warm workers take them: the order (jobs with one engine back to back,
    checkpoints of one shape after each other) and each job's engine key and checkpoint, by its
    task overrides (as run_child_job hands them to inference.workers.Workers, which reads them to
    keep or replace its worker)."""

    order: List[int]
    keys: Dict[Tuple[str, ...], str]
    paths: Dict[Tuple[str, ...], Optional[str]]
    groups: List[List[int]]
    """The order cut where the engine changes: each group's jobs share one engine."""


def warm_plan(configs: Sequence[Any]) -> WarmPlan:
    from inference import workers

    keys = [workers.engine_key(config) for config in configs]
    shapes = [workers.engine_key(config, swap=True) for config in configs]
    order = engine_order(keys, shapes)
    groups: List[List[int]] = []
    for index in order:  # a job that needs no engine goes with the group before it
        if groups and shapes[index] in ("", shapes[groups[-1][0]]):
            groups[-1].append(index)
        else:
            groups.append([index])
    # by the job's task overrides, as its task function sees them (hydra.* overrides are not among them)
    tasks = [tuple(config.hydra.overrides.task) for config in configs]
    return WarmPlan(order=order, groups=groups, keys=dict(zip(tasks, shapes)),
                    paths={task: model_path(config) for task, config in zip(tasks, configs)})


def run_warm(hydra_context: Any, task_function: Any, jobs: Sequence[Tuple[int, Any]], plan: WarmPlan,
             after_job: Any = None) -> Dict[int, JobReturn]:
    """Run `jobs` (index, composed job config) one after another in this process, each on the
    process's warm worker (inference.workers.ACTIVE); returns each job's JobReturn by index. The
    local launcher runs a whole sweep so; a GPU slot's lane and a SLURM task run their share so."""
    from inference import workers

    pool = workers.ACTIVE = workers.ACTIVE or workers.Workers()
    pool.keys.update(plan.keys)
    pool.paths.update(plan.paths)
    runs: Dict[int, JobReturn] = {}
    for index, config in jobs:
        log.info(f"\t#{config.hydra.job.num} : {' '.join(filter_overrides(config.hydra.overrides.task))}")
        runs[index] = run_job(hydra_context=hydra_context, task_function=task_function, config=config,
                              job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
        if after_job is not None:
            after_job()
    return runs


def model_path(config) -> Optional[str]:
    """The job's checkpoint folder, where its config names one."""
    try:
        return str(config.model.path)
    except Exception:  # noqa: BLE001 - a config that does not resolve fails in its own job
        return None


def engine_order(keys: List[str], shapes: Optional[List[str]] = None) -> List[int]:
    """The jobs' order: those with one engine back to back (in the order each engine first comes),
    each group in its own order; jobs that need no engine where they come, with the group before.
    With `shapes` (each job's key with its checkpoint named by its shape), the groups of one shape
    follow each other too: a worker swaps from one checkpoint to the next once."""
    groups: Dict[str, List[int]] = {}
    current = None
    for index, key in enumerate(keys):
        group = key if key else (current if current is not None else "")
        groups.setdefault(group, []).append(index)
        if key:
            current = key
    order = list(groups.values())
    if shapes is not None:
        first: Dict[str, int] = {}
        for position, members in enumerate(order):
            first.setdefault(shapes[members[0]], position)
        order.sort(key=lambda members: first[shapes[members[0]]])  # stable: engines keep their order
    return [index for members in order for index in members]
