"""The processes a test started, found by ancestry and name (/proc), not by command line: a
process forked from toolsweep's preloaded template (inference/preload.py) has the template's
command line, and its own name."""

from __future__ import annotations

import time
from pathlib import Path


def _stat(pid: int) -> tuple[str, str, int] | None:
    """(name, state, parent pid) of a live process, else None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = text[text.index("(") + 1:text.rindex(")")]
    fields = text.rsplit(")", 1)[1].split()
    return name, fields[0], int(fields[1])


def descendants(root: int) -> dict[int, str]:
    """Every live process below `root`, with its name."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            found = _stat(int(entry.name))
            if found is not None and found[1] != "Z":
                names[int(entry.name)] = found[0]
                children.setdefault(found[2], []).append(int(entry.name))
    found_below: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found_below[pid] = names[pid]
        todo.extend(children.get(pid, []))
    return found_below


def named(root: int, name: str) -> list[int]:
    """The processes below `root` with this name."""
    return sorted(pid for pid, comm in descendants(root).items() if comm == name)


def alive(pids: list[int], wait_s: float = 10.0) -> list[int]:
    """Those of `pids` still alive (not zombies) after up to `wait_s` seconds of waiting for them to go."""
    deadline = time.time() + wait_s
    while True:
        left = [pid for pid in pids if (_stat(pid) or ("", "Z", 0))[1] != "Z"]
        if not left or time.time() > deadline:
            return left
        time.sleep(0.2)
