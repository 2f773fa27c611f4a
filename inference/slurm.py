"""What a SLURM job of a sweep asks for: requests that follow the model and the cluster.

conf/hydra/launcher/slurm.yaml asks through three resolvers, so that one sweep command works on
a GPU cluster and on a GPU-less one, and a 2-CPU test node is not asked for 16 CPUs:

- `toolsweep_slurm_gpus`: `model.tensor_parallel_size` GPUs per task where the engine runs the
  weights itself (vllm, transformers) and the partition has GPUs (`sinfo` lists a `gpu` gres);
  0 for replay, script and server engines, and on a partition without GPUs;
- `toolsweep_slurm_cpus`: 16 CPUs per task (grammar compilation and tokenization), or fewer
  where the partition's nodes have fewer;
- `toolsweep_slurm_mem_gb`: 64 GB per task, or the partition's smallest node's memory.

`sinfo` runs on the submitting machine, once per sweep; where it is missing (a config composed
off the cluster) the requests are the GPU cluster's. Every value is overridable on the command
line (`hydra.launcher.gpus_per_node=2`).

submitit follows its jobs with `sacct`, which fails on a cluster without accounting storage
(a warning on every poll); there `quiet_accounting` makes it read the same states from
`squeue` instead (`python -m inference.slurm JOB_ID ...` prints them in sacct's format).
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from functools import lru_cache
from typing import Optional

CPUS, MEM_GB = 16, 64
"""What a job asks for where the nodes have at least this much."""


@lru_cache(maxsize=None)
def _sinfo(fields: str, partition: Optional[str]) -> Optional[tuple[str, ...]]:
    """`sinfo`'s per-node `fields` of the partition (all partitions when None); None without sinfo."""
    if shutil.which("sinfo") is None:
        return None
    command = ["sinfo", "-h", "-N", "-o", fields, *(["-p", partition] if partition else [])]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return tuple(line.strip() for line in done.stdout.splitlines() if line.strip()) if done.returncode == 0 else None


def _partition(value: object) -> Optional[str]:
    return None if value in (None, "", "None", "null") else str(value)


def runs_weights(engine_target: str) -> bool:
    """Whether the engine `module:Class` runs the model's weights itself (needs a GPU)."""
    module = str(engine_target).partition(":")[0]
    try:
        return bool(importlib.import_module(module).CONFIG.needs_weights)
    except (ImportError, AttributeError):
        return True  # an engine that cannot be inspected here: ask as for a model


def gpus(tensor_parallel: int, engine_target: str, partition: object = None) -> int:
    """GPUs per task."""
    if int(tensor_parallel) < 1 or not runs_weights(engine_target):
        return 0
    gres = _sinfo("%G", _partition(partition))
    if gres is not None and not any("gpu" in g for g in gres):
        return 0
    return int(tensor_parallel)


def cpus(partition: object = None) -> int:
    """CPUs per task: CPUS, or the smallest node's count."""
    counts = [int(c) for c in _sinfo("%c", _partition(partition)) or () if c.isdigit()]
    return min([CPUS, *counts])


def mem_gb(partition: object = None) -> int:
    """Memory per task in GB: MEM_GB, or the smallest node's (at least 1)."""
    sizes = [int(m.rstrip("+")) // 1024 for m in _sinfo("%m", _partition(partition)) or () if m.rstrip("+").isdigit()]
    return max(1, min([MEM_GB, *sizes]))


def register() -> None:
    from omegaconf import OmegaConf

    OmegaConf.register_new_resolver("toolsweep_slurm_gpus", gpus, replace=True)
    OmegaConf.register_new_resolver("toolsweep_slurm_cpus", cpus, replace=True)
    OmegaConf.register_new_resolver("toolsweep_slurm_mem_gb", mem_gb, replace=True)


def accounting_enabled() -> bool:
    """Whether `sacct` answers on this cluster (False where accounting storage is disabled)."""
    if shutil.which("sacct") is None:
        return False
    try:
        done = subprocess.run(["sacct", "-n", "-X", "-j", "1"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False  # an accounting daemon that does not answer: follow the jobs with squeue
    return done.returncode == 0


def quiet_accounting() -> None:
    """Where the cluster keeps no accounting, have submitit poll `squeue` rather than `sacct`."""
    if accounting_enabled():
        return
    from submitit.slurm import slurm

    class SqueueWatcher(slurm.SlurmInfoWatcher):
        def _make_command(self) -> Optional[list[str]]:
            command = super()._make_command()
            if command is None:
                return None
            ids = [command[i + 1] for i, part in enumerate(command) if part == "-j"]
            return [sys.executable, "-m", "inference.slurm", *ids]

    slurm.SlurmJob.watcher = SqueueWatcher(delay_s=600)


def squeue_states(job_ids: list[str]) -> str:
    """The jobs' states from squeue, in the `sacct -o JobID,State,NodeList --parsable2` format
    submitit reads (a finished job stays listed for the cluster's MinJobAge)."""
    done = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i|%T|%N", "-j", ",".join(job_ids)],
                          capture_output=True, text=True, timeout=60)
    return "JobID|State|NodeList\n" + (done.stdout if done.returncode == 0 else "")


if __name__ == "__main__":
    print(squeue_states(sys.argv[1:]), end="")
