"""Sweeps: each Hydra multirun job in a process of its own, checkpoint discovery, the leaderboard hook.

vLLM does not give GPU memory back between models in one process, and a job that crashes
or runs out of memory must not end the sweep. So under `-m` each job re-runs `toolsweep`
for its own overrides in another process: a warm worker that keeps its engine for the next job
with the same one (inference/workers.py, under the local and local_gpus launchers), else a new child
process; the parent only records how the job ended (`job.json`) and, when the sweep ends, writes the
leaderboard.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import signal
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import polars as pl
from hydra.experimental.callback import Callback

from grading.scoring import format_value, get_scorer, primary_reading
from grading.sweep import override_key, override_value, parse_step
from inference.errors import ToolsweepError

CHILD_FLAG = "TOOLSWEEP_SWEEP_CHILD"
_ERROR_PREFIX = "toolsweep: error: "


def checkpoint_step(path: str | Path) -> int | None:
    """The training step in a folder name like checkpoint-500, step_500 or global_step500."""
    return parse_step(str(path))


def checkpoint_dirs(root: Path, pattern: str = "checkpoint-*") -> list[Path]:
    """Model folders under `root` matching `pattern`, ordered by training step."""
    found = [p for p in root.glob(pattern) if (p / "config.json").is_file() or
             (p / "adapter_config.json").is_file()]
    if not found:
        raise SystemExit(f"toolsweep checkpoints: no model folders matching {pattern!r} under {root} "
                         "(each needs a config.json or adapter_config.json)")
    return sorted(found, key=lambda p: (checkpoint_step(p) is None, checkpoint_step(p) or 0, p.name))


def checkpoints_parser(prog: str = "toolsweep-checkpoints") -> argparse.ArgumentParser:
    """The parser of `toolsweep checkpoints`."""
    parser = argparse.ArgumentParser(prog=prog, description="List a training run's checkpoints for "
                                     "`toolsweep -m model.path=$(toolsweep checkpoints DIR)`.")
    parser.add_argument("root", type=Path)
    parser.add_argument("--pattern", default="checkpoint-*", help="glob under ROOT (default checkpoint-*)")
    return parser


def main_checkpoints(argv: list[str] | None = None, prog: str = "toolsweep-checkpoints") -> None:
    """`toolsweep checkpoints DIR`: print the checkpoint folders as a Hydra sweep list."""
    args = checkpoints_parser(prog).parse_args(argv)
    print(",".join(str(p.resolve()) for p in checkpoint_dirs(args.root, args.pattern)))


def node_gpus() -> list[str]:
    """The GPUs a job may be given: CUDA_VISIBLE_DEVICES's entries where set, else nvidia-smi's."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g.strip() for g in listed.split(",") if g.strip()]
    from inference.gpu import probe

    return [gpu.index for gpu in probe().gpus]


def visible_devices(job_num: int, gpus_per_job: int) -> str | None:
    """CUDA_VISIBLE_DEVICES for a job: slot `job_num % slots` of the node's GPUs, or None."""
    gpus = node_gpus()
    slots = len(gpus) // max(gpus_per_job, 1)
    return _slot_devices(gpus, job_num % slots, gpus_per_job) if slots else None


def _slot_devices(gpus: list[str], slot: int, gpus_per_job: int) -> str:
    return ",".join(gpus[slot * gpus_per_job:(slot + 1) * gpus_per_job])


@contextmanager
def gpu_slot(sweep_dir: Path, job_num: int, gpus_per_job: int) -> Iterator[str | None]:
    """The GPUs of a free slot, held (a lock file per slot and host) while the job runs.

    Parallel jobs finish in any order: job k's slot `k % slots` may still be busy with an earlier
    job when k starts, and two engines on one GPU fail. So a job takes the first free slot from
    its own, waiting when all are busy. Under SLURM the allocation decides and nothing is locked."""
    gpus = node_gpus()
    slots = len(gpus) // max(gpus_per_job, 1)
    if slots == 0 or os.environ.get("SLURM_JOB_ID"):
        yield visible_devices(job_num, gpus_per_job)
        return
    locks = sweep_dir / ".gpu-slots" / socket.gethostname()
    locks.mkdir(parents=True, exist_ok=True)
    while True:
        for slot in [(job_num + i) % slots for i in range(slots)]:
            handle = open(locks / f"slot-{slot}.lock", "w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            try:
                yield _slot_devices(gpus, slot, gpus_per_job)
            finally:
                handle.close()  # releases the lock
            return
        time.sleep(0.5)


def check_gpu_launcher(n_jobs: Any, tensor_parallel_size: int, gpus: int) -> str | None:
    """Why hydra/launcher=local_gpus cannot run this sweep on a node with `gpus` visible GPUs
    (None where it can): every parallel job needs model.tensor_parallel_size GPUs of its own."""
    tp = max(int(tensor_parallel_size), 1)
    if gpus == 0:
        return ("hydra/launcher=local_gpus needs NVIDIA GPUs, and none is visible here (nvidia-smi lists none, "
                "or CUDA_VISIBLE_DEVICES hides them): use hydra/launcher=local")
    if gpus < tp:
        return (f"model.tensor_parallel_size={tp} needs {tp} GPUs per job and this node shows {gpus}: lower "
                "model.tensor_parallel_size or run on a larger node")
    slots = gpus // tp
    if int(n_jobs) > slots:
        return (f"hydra.launcher.n_jobs={n_jobs} is more than this node's {slots} GPU slot(s) ({gpus} GPU(s) / "
                f"model.tensor_parallel_size={tp}): jobs would share a GPU and fail to start; leave n_jobs "
                "unset (it defaults to the slots)")
    return None


def gpu_slots(tensor_parallel_size: Any) -> int:
    """hydra/launcher=local_gpus' default n_jobs: the visible GPUs / model.tensor_parallel_size
    (at least 1: a node without enough GPUs is refused when the sweep starts, with the reason)."""
    return max(len(node_gpus()) // max(int(tensor_parallel_size), 1), 1)


def run_child_job(task_overrides: Sequence[str], run_dir: Path, job_num: int,
                  gpus_per_job: int, search_path: Sequence[str] = (), fork: bool = False) -> dict[str, Any]:
    """Run one sweep job as `toolsweep <overrides>` on the sweep's warm worker where the launcher
    started one, else in a new child process (`fork`: forked from the sweep's preloaded template,
    which imported torch, transformers and vLLM once for all its jobs); record how it ended.

    Rerunning a sweep into the same sweep dir keeps the jobs that completed with the same
    overrides (no process, no engine call), resumes a killed job from its shards (the child
    reruns into the same run dir) and retries a failed one."""
    run_dir.mkdir(parents=True, exist_ok=True)
    # where the sweep's metrics go when it ends is the sweep's business: a job that only differs in it is the same job
    task_overrides = [o for o in task_overrides if not override_key(o).startswith("export.")]
    kept = kept_outcome(run_dir, task_overrides)
    if kept is not None:
        _report(job_num, kept, True, run_dir)
        return kept
    from inference import workers

    # the sweep's hydra.searchpath (config groups of the user's own) composes the child's config too
    argv = [*task_overrides, *search_path, f"hydra.run.dir={run_dir}"]
    start = time.perf_counter()
    worker = why = None
    if workers.ACTIVE is not None:  # the warm launcher's: the job runs on its worker
        returncode, log, worker, devices = workers.ACTIVE.run(
            task_overrides, argv, run_dir / "job.log", {**os.environ, CHILD_FLAG: "1"},
            lambda: gpu_slot(run_dir.parent, job_num, gpus_per_job))
        why = workers.ACTIVE.why_fresh
    else:
        env = {**os.environ, CHILD_FLAG: "1"}
        with gpu_slot(run_dir.parent, job_num, gpus_per_job) as devices:
            if devices is not None:
                env["CUDA_VISIBLE_DEVICES"] = devices
            returncode, log = _stream(_new_process(argv, env, fork), run_dir / "job.log")
    if returncode == -signal.SIGTERM and os.environ.get("SLURM_JOB_ID"):
        await_requeue(job_num)
    outcome = {"status": "complete" if returncode == 0 else "failed",
               "reason": None if returncode == 0 else failure_reason(returncode, log),
               "returncode": returncode, "overrides": list(task_overrides),
               "model_path": override_value(task_overrides, "model.path"),
               "cuda_visible_devices": devices, "worker": worker,
               **({"fresh_worker_because": why} if why else {}), "wall_s": round(time.perf_counter() - start, 3)}
    (run_dir / "job.json").write_text(json.dumps(outcome, indent=2) + "\n", encoding="utf-8")
    _report(job_num, outcome, False, run_dir)
    return outcome


def await_requeue(job_num: int) -> None:
    """SLURM stopped the job (preemption, `scontrol requeue`, a time limit) and will run it
    again: end here without an outcome, so that the requeued run, not this one, reports the job
    (it resumes from the shards written so far). SLURM's SIGKILL ends the wait."""
    print(f"[toolsweep] job {job_num}: stopped by SLURM (SIGTERM); it resumes from its shards when requeued",
          flush=True)
    while True:
        time.sleep(60)


def kept_outcome(run_dir: Path, task_overrides: Sequence[str]) -> dict[str, Any] | None:
    """The job.json of a job this dir already completed with these overrides, else None."""
    try:
        job = json.loads((run_dir / "job.json").read_text(encoding="utf-8"))
        state = json.loads((run_dir / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    done = job.get("status") == "complete" and state.get("status") == "complete"
    same = list(job.get("overrides") or []) == list(task_overrides)
    return job if done and same and (run_dir / "samples.parquet").is_file() else None


# Sweep progress, per process: how many jobs the sweep has, and the wall times of those run here.
_PROGRESS: dict[str, Any] = {"total": None, "walls": [], "seen": 0}


def expect_jobs(total: int) -> None:
    """How many job runs the sweep makes in all, for the progress line, where its sweeper learns it
    only as it goes (a race: every survivor runs once a round, and a stopped job no more)."""
    _PROGRESS["total"] = total


def task_jobs(config: Any) -> list[list[str]] | None:
    """Each job's overrides of a multirun (None for a sweep syntax this cannot expand); read
    unresolved: an override's own interpolation (engine.predictions=${model.path}/x) is the job's."""
    from omegaconf import OmegaConf

    # the sweeper's own params (a suite preset's `dataset: a,b`) come first, as Hydra's basic sweeper puts them
    params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
    preset = [f"{key}={value}" for key, value in OmegaConf.to_container(params, resolve=False).items()] \
        if params else []
    try:
        return sweep_jobs([*preset, *OmegaConf.to_container(config.hydra.overrides.task, resolve=False)])
    except Exception:  # noqa: BLE001 - an unusual sweep syntax only costs the ETA and the early check
        return None


def _report(job_num: int, outcome: dict[str, Any], kept: bool, run_dir: Path) -> None:
    """One line per job: status, wall time, headline metric, and an estimate for the rest."""
    _PROGRESS["seen"] += 1
    if not kept:
        _PROGRESS["walls"].append(outcome.get("wall_s") or 0.0)
    total, walls = _PROGRESS["total"], _PROGRESS["walls"]
    status = "complete (kept from an earlier run of this sweep)" if kept else outcome["status"]
    parts = [f"[toolsweep] job {job_num}{f'/{total}' if total else ''}: {status}"]
    if not kept:
        parts.append(f"in {outcome.get('wall_s', 0):.1f} s")
    if outcome.get("reason"):
        parts.append(f"({outcome['reason']})")
    headline = _headline(run_dir) if outcome["status"] == "complete" else None
    if headline:
        parts.append(headline)
    left = max(total - _PROGRESS["seen"], 0) if total else None
    if left and walls:
        parts.append(f"| about {_duration(left * sum(walls) / len(walls))} left for {left} job(s)")
    print(" ".join(parts), flush=True)


def _headline(run_dir: Path) -> str | None:
    # The first headline metric of the job's scorer, pooled, under its primary reading.
    try:
        metrics = pl.read_parquet(run_dir / "metrics.parquet")
        scorer = get_scorer(pl.read_parquet(run_dir / "samples.parquet", columns=["scorer"])["scorer"][0])
    except Exception:  # noqa: BLE001 - a missing or old report only costs the headline
        return None
    metric = next((m for m in scorer.metrics if m.headline), scorer.metrics[0])
    row = metrics.filter((pl.col("setting") == "all") & (pl.col("parser") == primary_reading(scorer)))
    if row.height == 0:
        return None
    return f"{metric.name} {format_value(metric, row[metric.name][0])}"


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def fork_job(job_config: Any, launcher_config: Any) -> bool:
    """Whether a cold job's process is forked from this process's preloaded template: where the
    sweep's own process runs every job (the local launcher, `reuse_engine=false`), so that one
    template's imports serve them all, and the job's engine loads a model in its process (not
    replay, a script, a server's client; a job whose config does not resolve fails before it
    would). A process that runs one job (a SLURM or joblib task) gains nothing by it, and a job
    that fails before loading would wait for the template's imports (9-10 s) for nothing."""
    from inference.workers import engine_key

    if not str(launcher_config.get("_target_", "")).endswith("warm_launcher.WarmLauncher"):
        return False
    key = engine_key(job_config)
    return bool(key) and not key.startswith("unresolved")


def _new_process(argv: list[str], env: dict[str, str], fork: bool) -> Any:
    """`toolsweep ARGV` as a new process with nothing of an earlier job's: forked from the template
    where `fork` (a new interpreter imported torch, transformers and vLLM for every job before, 8-10 s
    a job on a CPU core); else a new interpreter."""
    from inference.preload import spawn

    child = spawn("inference.cli", argv, env, "toolsweep-job", pipes=True, loads_model=fork)
    child.stdin.close()  # the job reads no input
    return child


def _stream(child: Any, log_path: Path) -> tuple[int, str]:
    # Chunks, not lines: progress bars redraw with \r and would otherwise stall until done.
    with open(log_path, "wb") as log:
        try:
            while chunk := child.stdout.read1(4096):
                log.write(chunk)
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
            returncode = child.wait()
        finally:
            child.stdout.close()
    return returncode, log_path.read_text(encoding="utf-8", errors="replace")


def failure_reason(returncode: int, log: str) -> str:
    """One line saying why a job failed: toolsweep's own message, a signal, or the last error line."""
    lines = log.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(_ERROR_PREFIX)]
    if starts:
        # a multi-line message (every config problem) continues on indented lines
        first = starts[-1]
        rest = [ln.strip() for ln in lines[first + 1:] if ln.startswith((" ", "\t"))]
        return " ".join([lines[first][len(_ERROR_PREFIX):].strip(), *rest])[:2000]
    if returncode < 0:
        name = signal.Signals(-returncode).name
        hint = " (out of memory? the kernel's OOM killer sends SIGKILL)" if name == "SIGKILL" else ""
        return f"killed by {name}{hint}"
    errors = [ln.strip() for ln in log.splitlines() if re.search(r"(Error|Exception)\b", ln)]
    return (errors[-1] if errors else f"exit code {returncode}")[:500]


class LeaderboardCallback(Callback):
    """Counts the sweep's jobs when a multirun starts (for the ETA); writes leaderboard.parquet/.md
    (and the plot against step) when it ends, also after a rerun that kept earlier jobs."""

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        jobs = task_jobs(config)
        _PROGRESS.update(total=len(jobs) if jobs is not None else None, walls=[], seen=0)
        trackers = export_problems(config)
        if trackers:
            print(f"{_ERROR_PREFIX}this sweep exports to trackers when it ends, and cannot, so no job was started:\n  "
                  + "\n  ".join(trackers), file=sys.stderr, flush=True)
            sys.exit(2)
        if config.hydra.runtime.choices.get("hydra/launcher") == "local_gpus":
            problem = check_gpu_launcher(config.hydra.launcher.n_jobs, config.model.tensor_parallel_size,
                                         len(node_gpus()))
            if problem:
                print(f"{_ERROR_PREFIX}{problem}", file=sys.stderr, flush=True)
                sys.exit(2)
        missing = missing_data_problems(config, jobs or [])
        if missing:
            print(f"{_ERROR_PREFIX}the data of this sweep's benchmarks is not where it was looked for, so no job was "
                  "started:\n  " + "\n  ".join(missing), file=sys.stderr, flush=True)
            sys.exit(2)
        shared = shared_config_error(config, jobs or [])
        if shared:
            print(f"{_ERROR_PREFIX}every job of this sweep has this configuration error, so none was started: "
                  f"{shared}", file=sys.stderr, flush=True)
            sys.exit(2)
        if "SlurmLauncher" in str(config.hydra.launcher.get("_target_", "")):
            from inference.slurm import quiet_accounting

            quiet_accounting()

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        from grading.leaderboard import write_leaderboard
        from inference.workers import close_active

        close_active()
        sweep_dir = Path(config.hydra.sweep.dir)
        if not sweep_dir.is_dir():
            return
        try:
            written = write_leaderboard(sweep_dir)
        except Exception as exc:  # noqa: BLE001 - Hydra would turn it into a warning and exit 0
            print(f"{_ERROR_PREFIX}the sweep's board and report in {sweep_dir} could not be written: "
                  f"{type(exc).__name__}: {exc}; rerun them with `toolsweep grade {sweep_dir}`",
                  file=sys.stderr, flush=True)
            sys.exit(1)
        for path in written:
            print(f"[toolsweep] wrote {path}", flush=True)
        merge_if_sharded(sweep_dir)
        statuses = pl.read_parquet(sweep_dir / "leaderboard.parquet", columns=["job", "status"]).unique("job")
        if statuses.height and not (statuses["status"] == "complete").any():
            # the leaderboard and report of the failures are written; the shell learns of them too
            print(f"{_ERROR_PREFIX}no job of this sweep completed ({statuses.height} failed; their reasons are in "
                  f"{sweep_dir / 'leaderboard.md'})", file=sys.stderr, flush=True)
            sys.exit(1)
        export_at_end(config, sweep_dir)


def export_config(config: Any) -> Any:
    """The sweep's `export` options, typed (inference.config.ExportConfig)."""
    from omegaconf import OmegaConf

    from inference.config import ExportConfig

    node = OmegaConf.select(config, "export", default=None)
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(ExportConfig), node or {}))


def export_problems(config: Any) -> list[str]:
    """Why the sweep could not export to its trackers when it ends (unknown names, a library missing):
    said before the first job, not after the last."""
    from grading.trackers import missing_libraries
    from inference.config import export_problems as name_problems

    try:
        trackers = export_config(config).to
    except Exception as exc:  # noqa: BLE001 - a mistyped export option is the user's to fix before the sweep
        return [f"export: {str(exc).splitlines()[0]}"]
    return name_problems(trackers) or missing_libraries(trackers)


def export_at_end(config: Any, sweep_dir: Path) -> None:
    """The sweep's metrics into the trackers of `export.to`, as `toolsweep export` writes them."""
    from grading.errors import GradingError
    from grading.export import export_to

    destinations = export_config(config).destinations()
    if not destinations:
        return
    try:
        for line in export_to(sweep_dir, destinations):
            print(f"[toolsweep] export: {line}", flush=True)
    except GradingError as exc:
        print(f"{_ERROR_PREFIX}the sweep's metrics could not be exported: {exc}; the sweep's outputs are written, "
              f"export them again with `toolsweep export {sweep_dir} --to TRACKER`", file=sys.stderr, flush=True)
        sys.exit(1)


def sweep_jobs(task_overrides: Sequence[str]) -> list[list[str]]:
    """Each job's overrides, as Hydra's basic sweeper makes them from the command line's."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(task_overrides))
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def typed_job(composed: Any) -> tuple[Any, Any]:
    """A job's composed config, typed, with its benchmark (inference.run.run_config). The hydra node
    is dropped: its runtime fields exist only in the job's own process."""
    from omegaconf import OmegaConf, open_dict

    from inference.run import run_config

    with open_dict(composed):
        composed.pop("hydra", None)
    return run_config(OmegaConf.to_container(composed, resolve=True))


def missing_data_problems(config: Any, jobs: list[list[str]]) -> list[str]:
    """Benchmark folders missing under the data root (or no root set) for the jobs that read their
    data from it (inference.dataroot); composed only, nothing loaded, so said within seconds."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from inference.dataroot import missing_data

    hydra_app = GlobalHydra.instance().hydra
    if hydra_app is None:
        return []
    return missing_data(jobs, lambda job: hydra_app.compose_config(config.hydra.job.config_name, job,
                                                                   run_mode=RunMode.RUN))


def shared_config_error(config: Any, jobs: list[list[str]]) -> str | None:
    """The configuration error that every job of the sweep would stop with (the same message for
    each), else None: said once before any job starts, instead of once per job. Jobs are checked
    in order and the check ends at the first job without an error (one check for a sound sweep)."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from inference.config import validate
    from inference.run import prepare_models

    hydra_app = GlobalHydra.instance().hydra
    if hydra_app is None:
        return None
    messages = set()
    for job in jobs:
        try:
            cfg, benchmark = typed_job(hydra_app.compose_config(config.hydra.job.config_name, job,
                                                                run_mode=RunMode.RUN))
            prepare_models(cfg, benchmark)
            validate(cfg, benchmark)
        except ToolsweepError as exc:
            messages.add(str(exc))
        except Exception:  # noqa: BLE001 - anything else is each job's to report
            return None
        else:
            return None
    return messages.pop() if len(messages) == 1 else None


def merge_if_sharded(sweep_dir: Path) -> None:
    """A sweep whose jobs are the parts of one run (dataset.shard) ends with the merged run;
    one with unfinished parts says how to finish them."""
    from inference.merge import merge_shards, shard_jobs

    if shard_jobs(sweep_dir) is None:
        return
    try:
        print(f"[toolsweep] merged the shards into {merge_shards(sweep_dir)}", flush=True)
    except ToolsweepError as exc:
        print(f"[toolsweep] not merged: {exc}", flush=True)
