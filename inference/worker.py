"""A warm worker's process (`python -m inference.worker`): the jobs a sweep sends it, one JSON line
each on stdin, each run through toolsweep's entry point as its own process would run it, with the
engine pool on (inference/workers.py is the sweep's side of it)."""

from __future__ import annotations

import json
import os
import sys
import traceback

from inference.workers import DONE


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
            os.environ.clear()
            os.environ.update(env)
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
        os.environ.clear()
        os.environ.update(environ)
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
