"""Files: atomic writes (a file is either whole or absent, so a killed run never leaves half a
report), reading run facts, and finding a run's samples."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from grading.errors import GradingError


def atomic_write(path: Path, write: Callable[[Path], object]) -> Path:
    """Call `write(tmp)` on a hidden temporary name beside `path`, then rename it into place."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp{path.suffix}")
    write(tmp)
    os.replace(tmp, path)
    return path


def atomic_write_text(path: Path, text: str) -> Path:
    """Write UTF-8 text atomically."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def read_facts(path: Path) -> dict:
    """A run.json as a dict; {} when it is absent (a run killed before it finished) or unreadable."""
    import json

    if not path.is_file():
        return {}
    try:
        facts = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return facts if isinstance(facts, dict) else {}


def samples_file(run: Path) -> Path:
    """The samples.parquet of a run dir or sweep job dir (or the file itself)."""
    path = run if run.suffix == ".parquet" else run / "samples.parquet"
    if not path.is_file():
        raise GradingError(f"{run} holds no samples.parquet; pass a finished run dir or a complete "
                           "job dir of a sweep (a failed job has none: see its job.json)")
    return path


def run_name(run: Path) -> str:
    """A run's name: its folder's (a samples.parquet path is named by the folder around it)."""
    return run_folder(run).resolve().name


def run_folder(run: Path) -> Path:
    """The run dir of a run dir or of its samples.parquet."""
    return run.parent if run.suffix == ".parquet" else run
