"""Sweeps: one child process per Hydra multirun job, checkpoint discovery, the leaderboard hook.

vLLM does not give GPU memory back between models in one process, and a job that crashes
or runs out of memory must not end the sweep. So under `-m` each job re-runs `toolsweep`
for its own overrides in a child process; the parent only records how the child ended
(`job.json`) and, when the sweep ends, writes the leaderboard.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from hydra.experimental.callback import Callback

from grading.sweep import override_value, parse_step

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
        raise SystemExit(f"toolsweep-checkpoints: no model folders matching {pattern!r} under {root} "
                         "(each needs a config.json or adapter_config.json)")
    return sorted(found, key=lambda p: (checkpoint_step(p) is None, checkpoint_step(p) or 0, p.name))


def main_checkpoints(argv: list[str] | None = None) -> None:
    """`toolsweep-checkpoints DIR`: print the checkpoint folders as a Hydra sweep list."""
    parser = argparse.ArgumentParser(description="List a training run's checkpoints for "
                                     "`toolsweep -m model.path=$(toolsweep-checkpoints DIR)`.")
    parser.add_argument("root", type=Path)
    parser.add_argument("--pattern", default="checkpoint-*", help="glob under ROOT (default checkpoint-*)")
    args = parser.parse_args(argv)
    print(",".join(str(p.resolve()) for p in checkpoint_dirs(args.root, args.pattern)))


def visible_devices(job_num: int, gpus_per_job: int) -> str | None:
    """CUDA_VISIBLE_DEVICES for a job: slot `job_num % slots` of the node's GPUs, or None."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        gpus = [g for g in listed.split(",") if g.strip()]
    elif shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
        gpus = [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]
    else:
        return None
    slots = len(gpus) // max(gpus_per_job, 1)
    if slots == 0:
        return None
    slot = job_num % slots
    return ",".join(gpus[slot * gpus_per_job:(slot + 1) * gpus_per_job])


def run_child_job(task_overrides: Sequence[str], run_dir: Path, job_num: int,
                  gpus_per_job: int) -> dict[str, Any]:
    """Run one sweep job as `toolsweep <overrides>` in a child process; record how it ended."""
    run_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, CHILD_FLAG: "1"}
    devices = visible_devices(job_num, gpus_per_job)
    if devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = devices
    command = [sys.executable, "-m", "inference.cli", *task_overrides, f"hydra.run.dir={run_dir}"]
    start = time.perf_counter()
    returncode, log = _stream(command, env, run_dir / "job.log")
    outcome = {"status": "complete" if returncode == 0 else "failed",
               "reason": None if returncode == 0 else failure_reason(returncode, log),
               "returncode": returncode, "overrides": list(task_overrides),
               "model_path": override_value(task_overrides, "model.path"),
               "cuda_visible_devices": devices, "wall_s": round(time.perf_counter() - start, 3)}
    (run_dir / "job.json").write_text(json.dumps(outcome, indent=2) + "\n", encoding="utf-8")
    print(f"[toolsweep] job {job_num}: {outcome['status']}"
          + (f" ({outcome['reason']})" if outcome["reason"] else ""), flush=True)
    return outcome


def _stream(command: list[str], env: dict[str, str], log_path: Path) -> tuple[int, str]:
    # Chunks, not lines: progress bars redraw with \r and would otherwise stall until done.
    with open(log_path, "wb") as log, subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                                       stderr=subprocess.STDOUT) as child:
        assert child.stdout is not None
        while chunk := child.stdout.read1(4096):
            log.write(chunk)
            sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
        returncode = child.wait()
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
    """Writes leaderboard.parquet/.md (and the accuracy-vs-step plot) when a multirun ends."""

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        from grading.leaderboard import write_leaderboard

        sweep_dir = Path(config.hydra.sweep.dir)
        if not sweep_dir.is_dir():
            return
        for path in write_leaderboard(sweep_dir):
            print(f"[toolsweep] wrote {path}", flush=True)
