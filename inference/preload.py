"""Fresh processes without fresh imports: a preloaded template forks them.

toolsweep starts new Python processes where a fresh one is the point: a sweep's warm worker after
an engine change (so that the last engine's memory is given back), and each solver of a run whose
roles run apart (an agent, then its judge: inference/run.py run_isolated). Each such process
used to import torch, transformers and vLLM again (8-10 s on a CPU core) before its engine started.
Here they are forked from a template process that imported those once (`python -m
inference.preload`, started by the first child's request, or early where a run knows it will need
one): a child starts with them loaded and with nothing else of the template's (no engine, no CUDA
context: the template never touches a device, so a child's CUDA_VISIBLE_DEVICES still decides its
GPUs; vLLM forks its own workers the same way). The child runs its module as `python -m MODULE
ARGS` would, with its own environment, working dir and standard streams.

Lifetimes: the kernel kills the template when the process that started it dies, and each child
when the template dies (PR_SET_PDEATHSIG), so a killed sweep or run leaves nothing behind. The
template ignores SIGTERM (a SLURM requeue signals every process of the job: the children take it,
the template reports how each ended). The template is started with this process's environment: a
child whose environment differs from it in a variable some library may read when imported
(anything but the per-child ones below) is started as a new interpreter instead, as is every child
where `TOOLSWEEP_PRELOAD=0`.
"""

from __future__ import annotations

import atexit
import ctypes
import io
import json
import os
import runpy
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import warnings
from typing import IO, Any, Optional, Sequence

PRELOAD = ["inference.cli", "inference.worker", "torch", "transformers", "vllm.entrypoints.llm",
           "inference.engines.vllm_offline"]
"""What the template imports once for all its children (toolsweep's console set-up first, as its
entry point does; a module missing here is skipped)."""

SWITCH = "TOOLSWEEP_PRELOAD"
PER_CHILD = ("CUDA_VISIBLE_DEVICES",)
"""Variables a child may set apart from the template's: read when used, never at import (besides
toolsweep's own TOOLSWEEP_* variables, read per run)."""

TEMPLATE_NAME = "toolsweep-tmpl"
MESSAGE = 1 << 20
"""The largest message between this process and its template (a child's request: its environment)."""


def tie_to_parent(name: Optional[str] = None) -> None:
    """Have the kernel kill this process when its parent dies; name it (/proc/PID/comm) where given."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if name:
            libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except OSError:
        pass  # not Linux: a killed parent may leave the child running


def _comparable(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in PER_CHILD and not k.startswith("TOOLSWEEP_")}


class Template:
    """The template process, seen from the process that started it."""

    def __init__(self, env: dict[str, str], here: bool = False) -> None:
        """A new interpreter that imports PRELOAD with `env`; `here`: this process forked instead,
        which has imported them already (a child of a template, before it runs anything)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.env = _comparable(env)
        self.process: Optional[subprocess.Popen] = None
        if here:
            _fork_template(ours, theirs)
        else:
            self.process = subprocess.Popen([sys.executable, "-m", "inference.preload", str(theirs.fileno())],
                                            pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL,
                                            preexec_fn=tie_to_parent)
        theirs.close()
        self.socket = ours
        self.ended: dict[int, int] = {}
        self.lock = threading.Lock()
        self.gone = False

    def start(self, module: str, args: Sequence[str], env: dict[str, str], cwd: str, name: str,
              streams: Sequence[int], nested: bool = False) -> int:
        """Fork a child running `module` with these three standard streams; returns its pid.
        `nested`: the child forks a template of its own first, for the processes it will start."""
        request = json.dumps({"module": module, "args": list(args), "env": env, "cwd": cwd, "name": name,
                              "nested": nested}).encode()
        with self.lock:
            socket.send_fds(self.socket, [request], list(streams))
            while True:
                message = self._receive(None)
                if message is None:
                    raise OSError("toolsweep's preloaded template ended before it started the process")
                if "started" in message:
                    return int(message["started"])

    def exit_code(self, pid: int, timeout: Optional[float]) -> Optional[int]:
        """The child's exit code (a signal as its negative number), or None while it runs after `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.lock:
            while pid not in self.ended:
                if self.gone:  # the template died: its children died with it (PR_SET_PDEATHSIG)
                    return -signal.SIGKILL
                left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                if self._receive(left) is None and not self.gone:
                    return None
            return self.ended[pid]

    def _receive(self, timeout: Optional[float]) -> Optional[dict[str, Any]]:
        """One message from the template (exits are recorded), None after `timeout` or at its end."""
        if self.gone:
            return None
        ready, _, _ = select.select([self.socket], [], [], timeout)
        if not ready:
            return None
        data = self.socket.recv(MESSAGE)
        if not data:
            self.gone = True
            return None
        message = json.loads(data)
        if "ended" in message:
            self.ended[int(message["ended"])] = int(message["code"])
        return message


_TEMPLATE: Optional[Template] = None
_FORKED: Optional[Template] = None
"""The template this process forked of itself at its start (`spawn(..., nested=True)`), if any."""


def _template(env: dict[str, str]) -> Optional[Template]:
    """This process's template where a child with `env` may be forked from it, else None."""
    global _TEMPLATE
    if sys.platform != "linux" or os.environ.get(SWITCH, "1") == "0" or env.get(SWITCH, "1") == "0":
        return None
    # a child of this process's own environment, or of one that adds what this process has set
    # since it started (its entry point's switches, a library imported late): the forked template
    # has exactly this process's imports, so its children start as this process did
    if _FORKED is not None and not _FORKED.gone and _FORKED.env.items() <= _comparable(env).items():
        return _FORKED
    if _TEMPLATE is None or _TEMPLATE.gone:
        _TEMPLATE = Template(dict(os.environ))
    return _TEMPLATE if _comparable(env) == _TEMPLATE.env else None


def start_early() -> None:
    """Start the template now, so that its imports run while this process does other work."""
    _template(dict(os.environ))


class Child:
    """A process forked from the template, seen as a subprocess.Popen is (pid, stdin, stdout, poll,
    wait, kill, returncode)."""

    def __init__(self, template: Template, pid: int, stdin: Optional[IO[bytes]], stdout: Optional[IO[bytes]]) -> None:
        self._template = template
        self.pid = pid
        self.stdin, self.stdout = stdin, stdout
        self.returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        if self.returncode is None:
            self.returncode = self._template.exit_code(self.pid, 0)
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        if self.returncode is None:
            self.returncode = self._template.exit_code(self.pid, timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(f"toolsweep child {self.pid}", timeout or 0)
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)


def spawn(module: str, args: Sequence[str], env: dict[str, str], name: str, pipes: bool = False,
          cwd: Optional[str] = None, loads_model: bool = True, template: Optional[Template] = None,
          nested: bool = False) -> Any:
    """Start `python -m MODULE ARGS` with `env`: forked from the template where it fits, else a new
    interpreter; either way it dies with this process. `pipes`: its stdin and stdout are pipes to
    this process (stderr joins stdout), else it shares this process's streams. `name`: the
    process's name (/proc/PID/comm, 15 characters), by which it can be found. A child that loads
    no model (`loads_model` false) is a new interpreter: it would not use the template's imports,
    and starting a template for it would import them for nothing. `template`: one the caller
    started with `env` (this process's own template is started with this process's environment).
    `nested`: the child will start processes that load a model (a run whose solvers run apart,
    started as a process of its own to be killed): forked from the template, it forks a template of
    its own at once, which has those imports already, instead of starting a new interpreter to
    import them again (8 s of a 94 s kill-and-resume test of an agent and its judge)."""
    if template is None:
        template = _template(env) if loads_model else None
    if template is None:
        return _interpreter(module, args, env, name, pipes, cwd)
    sys.stdout.flush()
    sys.stderr.flush()
    if pipes:
        child_in, our_in = os.pipe()
        our_out, child_out = os.pipe()
        streams, theirs = [child_in, child_out, child_out], [child_in, child_out]
    else:
        streams, theirs = [0, 1, 2], []
    try:
        pid = template.start(module, args, env, cwd or os.getcwd(), name, streams, nested)
    finally:
        for fd in theirs:  # the child has its copies
            os.close(fd)
    if pipes:
        return Child(template, pid, os.fdopen(our_in, "wb"), os.fdopen(our_out, "rb"))
    return Child(template, pid, None, None)


def _interpreter(module: str, args: Sequence[str], env: dict[str, str], name: str, pipes: bool,
                 cwd: Optional[str]) -> subprocess.Popen:
    extra: dict[str, Any] = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.STDOUT} \
        if pipes else {}
    return subprocess.Popen([sys.executable, "-m", "inference.preload", "--run", name, module, *args], env=env,
                            cwd=cwd, preexec_fn=tie_to_parent, **extra)


def run_as(name: str, module: str, args: Sequence[str]) -> None:
    """`python -m inference.preload --run NAME MODULE ARGS`: `python -m MODULE ARGS` under NAME (a
    name given before exec does not outlive it)."""
    tie_to_parent(name)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


# The template's side.

def serve(fd: int) -> None:
    """`python -m inference.preload FD`: import PRELOAD, then fork a child for every request on
    the socket FD, and report every child's end, until the socket closes."""
    tie_to_parent(TEMPLATE_NAME)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a SLURM requeue's SIGTERM is for the children
    channel = socket.socket(fileno=fd)
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    _serve(channel)


def _fork_template(ours: socket.socket, theirs: socket.socket) -> None:
    """Fork this process into a template serving `theirs` (in the fork: never returns). Only safe
    where this process has run nothing since it was forked from a template itself: no thread, no
    engine, no pool a fork would leave half-copied."""
    sys.stdout.flush()
    sys.stderr.flush()
    if os.fork() != 0:
        return
    code = 0
    try:
        ours.close()
        tie_to_parent(TEMPLATE_NAME)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        # its streams are its owner's (maybe a pipe someone reads to its end): it writes nothing
        quiet = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(quiet, target)
        os.close(quiet)
        _serve(theirs)
    except BaseException:  # noqa: BLE001 - its owner sees the socket close and says so
        code = 1
    finally:
        os._exit(code)


def _serve(channel: socket.socket) -> None:
    """Fork a child for every request on `channel`, and report every child's end, until it closes."""
    while True:
        _reap(channel)
        ready, _, _ = select.select([channel], [], [], 0.2)
        if not ready:
            continue
        data, fds, _, _ = socket.recv_fds(channel, MESSAGE, 3)
        if not data:
            return  # the process that started this one has ended
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            channel.close()
            _child(json.loads(data), fds)
        for received in fds:
            os.close(received)
        channel.send(json.dumps({"started": pid}).encode())


def _reap(channel: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        channel.send(json.dumps({"ended": pid, "code": os.waitstatus_to_exitcode(status)}).encode())


def _child(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: its name, signals, streams, environment, working dir and argv, then
    the module as `python -m` runs it; never returns."""
    code = 1
    try:
        tie_to_parent(request["name"])  # dies with the template
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = io.TextIOWrapper(io.open(0, "rb", closefd=False), encoding="utf-8")
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        if request.get("nested"):  # now, while nothing but the imports has run here
            # the module the child's code imports: this one runs as __main__ (`python -m`)
            from inference import preload

            preload._FORKED = preload.Template(dict(os.environ), here=True)
        sys.argv = [request["module"], *request["args"]]
        # the module was imported by the template (as another module's import): run it as `-m` would
        warnings.filterwarnings("ignore", message=".*found in sys.modules after import of package",
                                category=RuntimeWarning)
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - as the interpreter does: the traceback, exit 1
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()  # as the interpreter does at its end (log handlers, engines)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


if __name__ == "__main__":
    if sys.argv[1] == "--run":
        run_as(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        serve(int(sys.argv[1]))
