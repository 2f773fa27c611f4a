"""Read a Hydra multirun sweep dir: its numbered job dirs and how each job ended.

The sweep runner writes `job.json` in each job dir when the job's process exits; a job dir
without one did not start or was killed with its parent. A broken job never raises here: it
becomes a failed job with a reason, so one bad job cannot hide the rest of a sweep.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import yaml

from grading.errors import GradingError

NO_JOB_JSON = "no job.json: the job did not start or was killed"
# What a backslash escapes in an unquoted override value (Hydra's OverrideLexer.g4, ESC).
_ESCAPABLE = frozenset("\\()[]{}:=, \t")
# The one step pattern: inference.sweep (toolsweep checkpoints) reads steps through parse_step
# too, so the leaderboard orders checkpoints as toolsweep checkpoints lists them.
_STEP = re.compile(r"(?:checkpoint|global_step|step)[-_]?(\d+)$", re.IGNORECASE)


@dataclass(frozen=True)
class Job:
    """One job of a sweep: its number, folder, outcome and the overrides it ran with."""

    number: int
    path: Path
    status: str
    """"complete" (samples.parquet is there) or "failed"."""
    reason: str | None
    """Why a failed job failed; None for a complete one."""
    overrides: tuple[str, ...]
    model_path: str | None
    """The model.path the job ran, when job.json or the overrides name it."""


def job_dirs(sweep_dir: Path) -> list[tuple[int, Path]]:
    """The numbered job dirs of a sweep, ordered by job number (so 10 comes after 9)."""
    if not sweep_dir.is_dir():
        return []
    found = [(int(p.name), p) for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()]
    return sorted(found)


def is_sweep_dir(path: Path) -> bool:
    """Whether `path` holds numbered job dirs, as a Hydra multirun sweep dir does."""
    return bool(job_dirs(path))


def find_jobs(sweep_dir: Path) -> list[Job]:
    """Every job of a sweep, ordered by job number; an error if there are none."""
    found = job_dirs(sweep_dir)
    if not found:
        raise GradingError(f"{sweep_dir} holds no numbered job dirs (0/, 1/, ...); pass a sweep dir "
                           "written by `toolsweep -m ...` (the folder with multirun.yaml)")
    return [read_job(number, path) for number, path in found]


def read_job(number: int, path: Path) -> Job:
    """A job as its job.json reports it, checked against the files actually present."""
    info, problem = _read_json(path / "job.json")
    overrides = tuple(info.get("overrides") or hydra_overrides(path))
    # read from the overrides first: job.json's model_path kept Hydra's escapes (`my\\ runs`) before
    model_path = override_value(overrides, "model.path") or info.get("model_path")
    status, reason = _outcome(info, problem, path)
    return Job(number, path, status, reason, overrides, model_path)


def _outcome(info: dict[str, Any], problem: str | None, path: Path) -> tuple[str, str | None]:
    if problem is not None:
        return "failed", problem
    status = info.get("status")
    if status == "complete":
        if not (path / "samples.parquet").is_file():
            return "failed", "job.json says complete but samples.parquet is missing"
        return _since(path)
    if status == "failed":
        code = info.get("returncode")
        return "failed", info.get("reason") or (f"exit code {code}" if code is not None else "no reason given")
    return "failed", f"job.json has status {status!r}; expected 'complete' or 'failed'"


def _since(path: Path) -> tuple[str, str | None]:
    """A complete job as its run dir stands now: `toolsweep judge JOB --overwrite` (or a run into
    the dir) reruns it in place after job.json was written, and its state.json says how that went."""
    state, problem = _read_json(path / "state.json")
    now = state.get("status")
    if problem is not None or now in (None, "complete"):
        return "complete", None  # a run dir from before state.json, or rerun to the end
    if now == "failed":
        return "failed", f"job.json says complete, but its run has since failed ({state.get('reason')})"
    return "failed", f"job.json says complete, but its run has since started again (state {now}) and not finished"


def _read_json(path: Path) -> tuple[dict[str, Any], str | None]:
    if not path.is_file():
        return {}, NO_JOB_JSON
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return {}, f"job.json is unreadable ({exc})"
    if not isinstance(data, dict):
        return {}, f"job.json holds a {type(data).__name__}, not an object"
    return data, None


def hydra_overrides(job_dir: Path) -> list[str]:
    # Hydra writes the job's overrides before it runs, so they are there even if it was killed.
    path = job_dir / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return []
    try:
        listed = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        return []
    return [str(item) for item in listed] if isinstance(listed, list) else []


def override_key(override: str) -> str:
    """What an override sets: `engine@roles.judge.engine` of `engine@roles.judge.engine=openai`,
    `a.b` of `++a.b=x`."""
    return override.split("=", 1)[0].lstrip("+~")


def override_value(overrides: Sequence[str], key: str) -> str | None:
    """The value of `key=value` among Hydra overrides (also `+key=`, `++key=`, `~key=`), read as
    Hydra reads it (override_text)."""
    for item in overrides:
        _, sep, value = item.partition("=")
        if sep and override_key(item) == key:
            return override_text(value)
    return None


def override_text(value: str) -> str:
    """An override's value as Hydra's override grammar reads a string: `my\\ runs/ckpt` (the
    escape Hydra's sweeper writes) and `'my runs/ckpt'` are both `my runs/ckpt`. Grading reads
    job.json without Hydra; tests hold this to Hydra's own parser."""
    stripped = value.strip(" \t")
    if len(stripped) > 1 and stripped[0] == stripped[-1] and stripped[0] in "'\"":
        return _unquoted(stripped[1:-1], stripped[0])
    return _unescaped(value)


def _unquoted(inner: str, quote: str) -> str:
    # In a quoted value only backslashes before a quote are escapes: `\'` is a quote, `\\'` a
    # backslash before the closing one; any other backslash is itself (`'C:\x'`).
    inner = re.sub(r"(\\+)(?=" + quote + ")", lambda m: "\\" * (len(m[1]) // 2), inner)
    return re.sub(r"(\\+)$", lambda m: "\\" * (len(m[1]) // 2), inner)


def _unescaped(value: str) -> str:
    """An unquoted value: `\\` before one of Hydra's escapable characters is dropped, a backslash
    before any other kept; whitespace around it, unless escaped, is not part of it."""
    chars: list[tuple[str, bool]] = []  # (character, escaped)
    index = 0
    while index < len(value):
        if value[index] == "\\" and index + 1 < len(value) and value[index + 1] in _ESCAPABLE:
            chars.append((value[index + 1], True))
            index += 2
        else:
            chars.append((value[index], False))
            index += 1
    while chars and not chars[0][1] and chars[0][0] in " \t":
        chars.pop(0)
    while chars and not chars[-1][1] and chars[-1][0] in " \t":
        chars.pop()
    return "".join(c for c, _ in chars)


def parse_step(name: str | None) -> int | None:
    """The training step in a folder name like checkpoint-500, step_500, step500 or global_step500."""
    if not name:
        return None
    match = _STEP.search(Path(name.rstrip("/")).name)
    return int(match.group(1)) if match else None


def job_step(model_path: str | None, overrides: Sequence[str]) -> int | None:
    """The step of a job's model folder, else of its LoRA adapter (`model.lora=.../checkpoint-N`)."""
    step = parse_step(model_path)
    return step if step is not None else parse_step(override_value(overrides, "model.lora"))
