"""Files: atomic writes (a file is either whole or absent, so a killed run never leaves half a
report), and reading run facts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


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
