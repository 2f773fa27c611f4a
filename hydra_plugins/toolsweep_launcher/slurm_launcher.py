"""`hydra/launcher=slurm` and `slurm_local`: hydra-submitit's launchers, with `jobs_per_task`.

`jobs_per_task=1` (the default) is the submitit launcher exactly: one array task per job, each a
process of its own that starts its own engine. With `jobs_per_task=N>1` the sweep's jobs are first
put in the warm launcher's order (warm_launcher.warm_plan: the jobs of one engine back to back,
checkpoints of one shape after each other) and each engine group is cut into tasks of at most N of
its jobs; an array task runs its jobs one after another on a warm worker of its own
(warm_launcher.run_warm), which keeps the engine, or reads the next checkpoint into it, from one
job to the next. Two engine groups never share a task: the second would start its own engine
anyway, and the two would run one after the other instead of side by side.

A task's requests (GPUs, CPUs, memory) stay one job's, since its jobs run one at a time, and its
`timeout_min` covers all of them. A task that SLURM stops and requeues (a time limit through
submitit's checkpoint, preemption, `scontrol requeue`) runs its jobs again: those that completed
are kept (inference.sweep.kept_outcome), the one it was running resumes from its shards.
"""

# No `from __future__ import annotations`: Hydra imports plugin modules without registering them
# in sys.modules, where a dataclass's string annotations cannot be resolved.
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from hydra.core.config_store import ConfigStore
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, filter_overrides, setup_globals
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf, LocalQueueConf, SlurmQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher
from omegaconf import OmegaConf, open_dict

from hydra_plugins.toolsweep_launcher.warm_launcher import WarmLauncher, WarmPlan, run_warm, warm_plan

log = logging.getLogger(__name__)


@dataclass
class WarmSlurmConf(SlurmQueueConf):
    _target_: str = "hydra_plugins.toolsweep_launcher.slurm_launcher.WarmSlurmLauncher"
    jobs_per_task: int = 1
    """Jobs one array task runs one after another on one warm worker (jobs of one engine only, a
    checkpoint of the same shape read into it in place); 1: one task, and engine, per job. The
    task's timeout_min covers all of its jobs."""


@dataclass
class WarmSubmititLocalConf(LocalQueueConf):
    _target_: str = "hydra_plugins.toolsweep_launcher.slurm_launcher.WarmSubmititLocalLauncher"
    jobs_per_task: int = 1
    """As WarmSlurmConf.jobs_per_task, the tasks run on this machine by submitit's local executor."""


ConfigStore.instance().store(group="hydra/launcher", name="toolsweep_slurm", node=WarmSlurmConf,
                             provider="toolsweep")
ConfigStore.instance().store(group="hydra/launcher", name="toolsweep_submitit_local", node=WarmSubmititLocalConf,
                             provider="toolsweep")


def array_tasks(groups: Sequence[Sequence[int]], jobs_per_task: int) -> List[List[int]]:
    """The array's tasks: each engine group (in the plan's order) cut into as few tasks of at most
    `jobs_per_task` jobs as it needs, of even size (5 jobs at 4 a task: 3 and 2, so the longest
    task, which timeout_min must cover, is as short as it can be), each in the plan's order."""
    tasks: List[List[int]] = []
    for group in groups:
        count = -(-len(group) // jobs_per_task)
        size, extra = divmod(len(group), count)
        start = 0
        for task in range(count):
            end = start + size + (1 if task < extra else 0)
            tasks.append(list(group[start:end]))
            start = end
    return tasks


def task_plan(plan: WarmPlan, configs: Sequence[Any], task: Sequence[int]) -> WarmPlan:
    """The plan's part that one task needs (its jobs' keys and checkpoints), not the whole sweep's."""
    mine = [tuple(configs[index].hydra.overrides.task) for index in task]  # as warm_plan keys them
    return WarmPlan(order=list(task), groups=[list(task)], keys={o: plan.keys[o] for o in mine},
                    paths={o: plan.paths[o] for o in mine})


class WarmTask:
    """The array tasks' callable: a task's jobs (index, overrides, job number) one after another on
    the task's warm worker; returns each job's (index, JobReturn)."""

    def __init__(self, launcher: Any) -> None:
        self.launcher = launcher

    def __call__(self, jobs: List[Tuple[int, List[str], int]], plan: WarmPlan,
                 singleton_state: Dict[type, Singleton]) -> List[Tuple[int, JobReturn]]:
        import submitit

        from inference.workers import close_active

        launcher = self.launcher
        # as the submitit launcher's __call__ sets up each of its jobs
        Singleton.set_state(singleton_state)
        setup_globals()
        job_id = submitit.JobEnvironment().job_id
        configs = []
        for index, overrides, number in jobs:
            config = launcher.hydra_context.config_loader.load_sweep_config(launcher.config, list(overrides))
            with open_dict(config.hydra.job):
                config.hydra.job.id = job_id
                config.hydra.job.num = number
            configs.append((index, config))
        hydra_logging = launcher.config.hydra.hydra_logging
        try:
            done = run_warm(launcher.hydra_context, launcher.task_function, configs, plan,
                            lambda: configure_log(hydra_logging, launcher.config.hydra.verbose))
        finally:
            close_active()  # the worker and its engine end with the task, not with the interpreter
        return [(index, done[index]) for index, _ in configs]

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """Requeued (a time limit): the same jobs again; the completed ones are kept."""
        import submitit

        return submitit.helpers.DelayedSubmission(self, *args, **kwargs)


class WarmTasks:
    """`jobs_per_task` on a submitit launcher (mixed in before it)."""

    def __init__(self, jobs_per_task: int = 1, **params: Any) -> None:
        if int(jobs_per_task) < 1:
            # said as toolsweep says a sweep's configuration errors (exit 2, one line), before any job
            # is submitted; Hydra would wrap an exception raised here in its instantiation error
            print(f"toolsweep: error: hydra.launcher.jobs_per_task must be at least 1, got {jobs_per_task}: set "
                  "it to 1 (one array task per job) or to how many jobs one task may run one after another",
                  file=sys.stderr, flush=True)
            sys.exit(2)
        super().__init__(**params)  # type: ignore[call-arg]
        self.jobs_per_task = int(jobs_per_task)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        if self.jobs_per_task == 1:
            return super().launch(job_overrides, initial_job_idx)  # type: ignore[misc]
        setup_globals()
        configs = [self._job_config(overrides, initial_job_idx + i) for i, overrides in enumerate(job_overrides)]
        plan = warm_plan(configs)
        tasks = array_tasks(plan.groups, self.jobs_per_task)
        self._sweep_dir()
        log.info(f"Submitit '{self._EXECUTOR}' sweep output dir : {self.config.hydra.sweep.dir}")
        log.info(f"{len(job_overrides)} jobs in {len(tasks)} array tasks of at most {self.jobs_per_task}, "
                 "each task's jobs on one warm worker")
        for number, task in enumerate(tasks):
            for index in task:
                log.info(f"\t#{initial_job_idx + index} : {' '.join(filter_overrides(job_overrides[index]))} "
                         f"(task {number})")
        work = [[(index, list(job_overrides[index]), initial_job_idx + index) for index in task] for task in tasks]
        plans = [task_plan(plan, configs, task) for task in tasks]
        submitted = self._executor().map_array(WarmTask(self), work, plans, [Singleton.get_state()] * len(tasks))
        returns: Dict[int, JobReturn] = {}
        for job in submitted:
            returns.update(job.results()[0])
        return [returns[index] for index in range(len(job_overrides))]

    # each job composed as the local launcher composes it (its number, dir and overrides)
    _job_config = WarmLauncher._job_config

    def _sweep_dir(self) -> None:
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if "mode" in self.config.hydra.sweep:
            os.chmod(sweep_dir, mode=int(str(self.config.hydra.sweep.mode), 8))

    def _executor(self) -> Any:
        """submitit's executor with the launcher's parameters, as hydra-submitit-launcher 1.2.0's
        launch builds it (the parameters its executor takes at start, the others as updates)."""
        import submitit

        init_keys = {"submitit_folder", "max_num_timeout"}
        first = {f"{self._EXECUTOR}_max_num_timeout": self.params["max_num_timeout"]} \
            if "max_num_timeout" in self.params else {}
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, folder=self.params["submitit_folder"], **first)
        base = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(**{key if key in base else f"{self._EXECUTOR}_{key}": value
                                      for key, value in self.params.items() if key not in init_keys})
        return executor


class WarmSlurmLauncher(WarmTasks, SlurmLauncher):
    """hydra/launcher=slurm: SLURM array tasks, `jobs_per_task` jobs each."""


class WarmSubmititLocalLauncher(WarmTasks, LocalLauncher):
    """hydra/launcher=slurm_local: the same tasks on this machine, through submitit's local executor."""
