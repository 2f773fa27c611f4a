"""`toolsweep` commands for tests, run as a sweep's jobs run: in a warm worker (inference/worker.py).

A new `python -m inference.cli` per command imports torch, vLLM and transformers again (8-10 s
here) and loads its model again; most tests run several such commands. Each pytest process keeps
a worker instead for each of two environments, its own and the session's scratch one
(tests/conftest.py `scratch_env`): a command whose environment is one of those (its TOOLSWEEP_*
variables, which toolsweep reads per run, aside) runs there through the same entry point, its engine kept for the next command
that builds an equal one (the pool's reuse is what tests/inference/test_warm_workers.py proves equal
to a cold process). Any other command, and every test whose subject is the process itself (a kill,
a signal, a lock held by a live process), runs in a new process; `forked` starts such a process
from a template that imported those libraries once per environment (inference/preload.py).

The result is a `subprocess.CompletedProcess` with the command's stdout and stderr apart, so tests
read it as they read a process's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Optional, Sequence

from inference.worker import IMPORTED_ENV, record_import_settings
from inference.workers import DONE

PER_RUN_PREFIX = "TOOLSWEEP_"
"""Variables toolsweep reads during a run (not at import): they may differ from the worker's own."""
PER_TEST = ("PYTEST_CURRENT_TEST",)
"""Variables pytest sets anew for every test and phase (no library reads them): with them compared,
no command given this process's environment ever matched the worker of it, and each ran cold."""


# Variables that this process's own imports set (torch's TORCHINDUCTOR_CACHE_DIR, once a fixture has
# imported torch) are no part of a command's environment either: the worker's imports set them too.
# Compared, they sent every command of a test that had imported torch to a cold process.
sys.addaudithook(record_import_settings)


def signature(env: dict[str, str]) -> dict[str, str]:
    """What must equal the worker's environment for a command to run in it."""
    return {key: value for key, value in env.items()
            if not key.startswith(PER_RUN_PREFIX) and key not in PER_TEST and IMPORTED_ENV.get(key) != value}


class _Reader(threading.Thread):
    """Reads one pipe of the worker up to the job's end marker."""

    def __init__(self, stream) -> None:
        super().__init__(daemon=True)
        self.stream, self.data, self.ended = stream, b"", False

    def run(self) -> None:
        while True:
            at = self.data.find(DONE)
            if at >= 0 and self.data.find(b"\n", at) >= 0:
                self.ended = True
                return
            chunk = os.read(self.stream.fileno(), 65536)
            if not chunk:
                return
            self.data += chunk

    def parts(self) -> tuple[str, bytes]:
        """(the job's output, what followed the marker on its line)."""
        at = self.data.find(DONE)
        if at < 0:
            return self.data.decode("utf-8", "replace"), b""
        end = self.data.find(b"\n", at)
        return self.data[:at].decode("utf-8", "replace"), self.data[at + len(DONE):end]


class WarmCommands:
    """This pytest process's workers: one for the environment it was started in (commands given no
    environment) and one for the session's scratch environment, each started on its first command."""

    def __init__(self) -> None:
        self.homes: list[dict[str, str]] = [dict(os.environ)]
        self.processes: dict[str, subprocess.Popen] = {}

    def home(self, env: dict[str, str]) -> None:
        """Commands run with `env` (or one that differs only in TOOLSWEEP_* variables) go to a worker."""
        self.homes.append(dict(env))

    def _home_of(self, env: Optional[dict[str, str]]) -> Optional[dict[str, str]]:
        wanted = signature(dict(os.environ) if env is None else env)
        return next((home for home in self.homes if signature(home) == wanted), None)

    def run(self, argv: Sequence[str], env: Optional[dict[str, str]], cwd: Path,
            timeout: float) -> subprocess.CompletedProcess:
        """`toolsweep ARGV` with `env` (None: this process's) in `cwd`: in a worker where `env` fits
        one, else in a new process."""
        command = [sys.executable, "-m", "inference.cli", *argv]
        home = self._home_of(env)
        if home is None:
            return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        key = json.dumps(signature(home), sort_keys=True)
        process = self._worker(key, home)
        request = {"argv": list(argv), "env": dict(os.environ) if env is None else env, "cwd": str(cwd), "split": True}
        process.stdin.write((json.dumps(request) + "\n").encode())
        process.stdin.flush()
        out, err = _Reader(process.stdout), _Reader(process.stderr)
        out.start(), err.start()
        out.join(timeout)
        err.join(max(1.0, timeout / 10))
        stdout, result = out.parts()
        stderr, _ = err.parts()
        if not out.ended:  # the worker died (its code is the command's), or the command ran out of time
            timed_out = out.is_alive()
            self.close(key)
            if timed_out:
                raise subprocess.TimeoutExpired(command, timeout, stdout, stderr)
            return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
        outcome = json.loads(result)
        if not outcome["healthy"]:
            self.close(key)
        return subprocess.CompletedProcess(command, int(outcome["returncode"]), stdout, stderr)

    def _worker(self, key: str, env: dict[str, str]) -> subprocess.Popen:
        process = self.processes.get(key)
        if process is None or process.poll() is not None:
            from inference.preload import tie_to_parent

            process = self.processes[key] = subprocess.Popen(
                [sys.executable, "-m", "inference.worker"], env=env, cwd=Path(__file__).resolve().parent.parent,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=tie_to_parent)
        return process

    def close(self, key: str) -> None:
        process = self.processes.pop(key, None)
        if process is not None:
            process.kill()
            process.wait()


WARM = WarmCommands()
"""This pytest process's commands (the `scratch_env` fixture adds its environment as a home)."""


_TEMPLATES: dict[str, Any] = {}
"""This pytest process's preloaded templates (inference/preload.py), one per environment."""


def forked(args: Sequence[str], env: dict[str, str], name: str = "toolsweep", module: str = "inference.cli") -> Any:
    """`toolsweep ARGS` as a process of its own, for a test whose subject is that process (killed,
    signalled): forked from a template that imported torch, transformers and vLLM once for this
    environment, as a sweep's fresh workers are, instead of a new interpreter importing them again
    (10-16 s each on a CPU); nested: a run whose solvers run apart forks them from a template it
    forked of itself, not from one more new interpreter. Its stdout and stderr are one pipe,
    `.stdout`; `.pid`, `.wait()`, `.returncode` as a Popen's; it dies with this pytest process.
    `module`: another module to run so (a test's probe of the engine), `python -m MODULE ARGS`."""
    from inference.preload import Template, spawn

    key = json.dumps(signature(env), sort_keys=True)
    template = _TEMPLATES.get(key)
    if template is None or template.gone:
        template = _TEMPLATES[key] = Template(env)
    return spawn(module, list(args), env, name, pipes=True, cwd=str(Path(__file__).resolve().parent.parent),
                 template=template, nested=True)


def toolsweep(args: Sequence[str], env: Optional[dict[str, str]] = None, timeout: float = 900,
              cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    """`toolsweep ARGS` as a test runs it: in a warm worker where its environment fits one (a sweep
    too: its jobs still run in workers or processes of their own, started by the warm one)."""
    return WARM.run(args, env, cwd or Path(__file__).resolve().parent.parent, timeout)
