"""A warm worker's process (`python -m inference.worker`): the jobs a sweep sends it, one JSON line
each on stdin, each run through toolsweep's entry point as its own process would run it, with the
engine pool on (inference/workers.py is the sweep's side of it)."""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

from inference.workers import DONE

IMPORTED_ENV: dict[str, str] = {}
"""Variables that libraries set in this process's environment when they were imported (joblib's
KMP_INIT_AT_FORK): they belong to the process, as its imports do, so every later job's environment
has them as a fresh process that imported those libraries would. Without them, a job's environment
differed from the one the first job's preloaded template was started with, and every later job's
solver processes were new interpreters importing torch and vLLM again (inference/preload.py)."""


def record_import_settings(event: str, args: tuple) -> None:
    """An audit hook: keeps each variable a module's import-time code sets, and forgets one it
    unsets again (numpy sets OPENBLAS_MAIN_FREE around loading its core, then removes it)."""
    if event not in ("os.putenv", "os.unsetenv") or not _importing(sys._getframe(1)):
        return
    key = os.fsdecode(args[0])
    if event == "os.putenv":
        IMPORTED_ENV[key] = os.fsdecode(args[1])
    else:
        IMPORTED_ENV.pop(key, None)


def _importing(frame: Any) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


def _with_imported(environment: dict[str, str]) -> None:
    """Make os.environ `environment`, plus what imports set where it does not say otherwise (as
    the libraries' own `setdefault` would at import in a fresh process)."""
    os.environ.clear()
    os.environ.update({**IMPORTED_ENV, **environment})


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)  # as the interpreter does for sys.exit("message")
    return 1


def run_one(argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> tuple[int, bool]:
    """One job through toolsweep's entry point, as its own process would run it (with `env` as its
    environment and `cwd` as its working dir where given); returns its exit code and whether the
    worker is still fit for another (an unexpected error may have left the engine or the
    interpreter in any state)."""
    from hydra.core.global_hydra import GlobalHydra

    from inference.cli import main
    from inference.console import library_environment

    environ, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    sys.argv = ["toolsweep", *argv]
    GlobalHydra.instance().clear()
    try:
        if env is not None:
            _with_imported(env)
        library_environment()
        if cwd is not None:
            os.chdir(cwd)
        main()
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException:  # noqa: BLE001 - the job's failure is its exit code; the worker reports it
        traceback.print_exc()
        code = 1
    finally:
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        _with_imported(environ)
        sys.stdout.flush()
        sys.stderr.flush()
    # toolsweep's own errors (exit 2: a bad input, the error budget) leave the engine as it was
    return code, code in (0, 2)


def worker_main() -> None:
    """`python -m inference.worker`: run the jobs read from stdin (one JSON line each: `argv`, and
    optionally `env` and `cwd`) until it closes, each ended on stdout by DONE and its result (and on
    stderr by DONE alone where the request asks for `split` output, its reader keeping the two apart)."""
    from inference.engines import POOL

    POOL.enabled = True
    sys.addaudithook(record_import_settings)
    out = sys.stdout.buffer
    for line in sys.stdin:
        request = json.loads(line)
        code, healthy = run_one(request["argv"], request.get("env"), request.get("cwd"))
        healthy = healthy and not POOL.broken  # a failed swap leaves the engine's memory in doubt
        if not healthy:
            POOL.clear()
        if request.get("split"):
            sys.stderr.buffer.write(DONE + b"\n")
            sys.stderr.flush()
        out.write(DONE + json.dumps({"returncode": code, "healthy": healthy}).encode() + b"\n")
        out.flush()
        if not healthy:
            return


if __name__ == "__main__":
    worker_main()
