"""Warm workers: a local sweep's jobs run in a long-lived process that keeps its engine.

A cold sweep job is a new process that imports torch, vLLM and transformers and loads its model
before its first token. Under `hydra/launcher=local` with `hydra.launcher.reuse_engine=true` (the
default) the launcher (hydra_plugins/toolsweep_launcher) orders the jobs so that those with the
same engine run back to back, and each job runs in a worker: a child process that runs the very
command a cold job's process would (`toolsweep OVERRIDES hydra.run.dir=JOB_DIR`, through the same
entry point: inference/worker.py), one job after another, with the engine pool on (inference.engines.EnginePool), so
the next job with an equal engine is handed the loaded one.

A job whose engine differs (model, dtype, length, quantization, constraint backend, seed, engine
kind: `engine_key`) gets a fresh worker, so the last one's memory is given back. A job that ends
with an unexpected error (not toolsweep's own exit 2) or a worker that dies (SIGKILL, out of
memory) also ends the worker: the next job starts a fresh one. Each job keeps its own run dir,
lock, run.log and job.log; its output reaches the sweep's console as a cold job's does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable, ContextManager, Optional, Sequence

from inference.engines import FRESH_BECAUSE

WORKER_NAME = "toolsweep-work"
"""A worker process's name (/proc/PID/comm), by which it can be found."""

DONE = b"\x1e\x1etoolsweep-worker-job-done "
"""Ends a job's output on the worker's stdout, followed by its result as one JSON line."""


def engine_key(job_config: Any, swap: bool = False) -> str:
    """Which jobs may share one worker's engine: the parts of a job's composed config that its
    engine is built from (everything of model and engine, and the decoding options vLLM takes at
    start). Two jobs with equal keys build equal engines (the pool keeps those it can; any other
    engine that loads weights here is loaded again in the same worker, the last one's memory freed
    with its job); jobs whose engine loads no weights here (replay, script, a server) share any
    worker (""). With `swap`, the checkpoint is named by its shape (inference.checkpoints) where the
    engine can take another checkpoint's weights in place: checkpoints of one shape share a key; and
    LoRA adapters of one base share its key (the engine serves each job's adapter per request)."""
    from omegaconf import OmegaConf

    from inference.engines import engine_class, loads_weights

    try:
        model = OmegaConf.to_container(job_config.model, resolve=True)
        engine = OmegaConf.to_container(job_config.engine, resolve=True)
        decoding = job_config.decoding
        started = {"seed": decoding.seed, "constraint": decoding.constraint, "sampled": decoding.temperature > 0,
                   "compile_timeout_s": decoding.get("compile_timeout_s")}
        cls = engine_class(str(engine["target"]))
        weights = loads_weights(cls)
    except Exception as exc:  # noqa: BLE001 - a job whose config does not resolve fails in its own worker
        return f"unresolved: {exc}"
    if not weights:  # no model in this process (replay, a script, a server's client)
        return ""
    if swap and hasattr(cls, "swap") and model.get("lora"):
        model = {**model, "lora": "one adapter per request"}  # adapters of one base share its engine
    elif swap and hasattr(cls, "swap"):
        from inference.checkpoints import shape_key

        shape = shape_key(str(model["path"]))
        if shape is not None:
            model = {**{k: v for k, v in model.items() if k not in ("path", "name", "embedded")}, "shape": shape}
    return json.dumps({"model": model, "engine": engine, "decoding": started}, sort_keys=True, default=str)


def key_differences(held: str, wanted: str) -> list[str]:
    """The options two engine keys differ in (`section.option: old -> new`)."""
    try:
        old, new = json.loads(held), json.loads(wanted)
    except ValueError:
        return [f"{held} -> {wanted}"]
    found = []
    for section in sorted(set(old) | set(new)):
        before, after = old.get(section) or {}, new.get(section) or {}
        for option in sorted(set(before) | set(after)):
            if before.get(option) != after.get(option):
                found.append(f"{section}.{option}: {before.get(option)!r} -> {after.get(option)!r}")
    return found


def compatible(held: Optional[str], wanted: str) -> bool:
    """A worker holding engine `held` can run a job wanting `wanted` ("" needs no engine)."""
    return held is not None and (wanted == "" or held == "" or held == wanted)


class Worker:
    """One warm worker process, seen from the sweep's process."""

    def __init__(self, env: dict[str, str], devices: Optional[str], stack: ExitStack, loads_model: bool = True) -> None:
        env = {**env, "TOOLSWEEP_WARM_WORKER": "1"}
        if devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = devices
        from inference.preload import spawn

        self.process = spawn("inference.worker", [], env, WORKER_NAME, pipes=True, loads_model=loads_model)
        self.devices = devices
        self.env = env
        self.key: Optional[str] = None
        self._stack = stack
        self._pending = b""

    def run(self, argv: Sequence[str], log_path: Path, note: Optional[str] = None) -> tuple[int, str, bool]:
        """Run one job (`toolsweep ARGV`) here, its output to `log_path` and this process's stdout;
        returns (exit code, the log's text, whether this worker can take another job). `note`: why
        this worker is a fresh one, for the job's run.json."""
        assert self.process.stdin is not None and self.process.stdout is not None
        request: dict[str, Any] = {"argv": list(argv)}
        if note:
            request["env"] = {**self.env, FRESH_BECAUSE: note}
        with open(log_path, "wb") as log:
            try:
                self.process.stdin.write((json.dumps(request) + "\n").encode())
                self.process.stdin.flush()
            except (BrokenPipeError, OSError):
                pass  # the worker is gone: its exit code is the job's
            result = self._stream(log)
        text = log_path.read_text(encoding="utf-8", errors="replace")
        if result is None:  # the worker died during the job
            return self.process.wait(), text, False
        return int(result["returncode"]), text, bool(result["healthy"])

    def _stream(self, log: Any) -> Optional[dict[str, Any]]:
        # Chunks, not lines (progress bars redraw with \r); the end marker may straddle two chunks.
        buffer = self._pending
        while True:
            at = buffer.find(DONE)
            if at >= 0:
                end = buffer.find(b"\n", at)
                if end >= 0:
                    self._emit(log, buffer[:at])
                    self._pending = buffer[end + 1:]
                    return json.loads(buffer[at + len(DONE):end])
            else:
                keep = len(DONE) - 1
                self._emit(log, buffer[:-keep] if len(buffer) > keep else b"")
                buffer = buffer[-keep:] if len(buffer) > keep else buffer
            chunk = self.process.stdout.read1(65536)  # type: ignore[union-attr]
            if not chunk:
                self._emit(log, buffer)
                self._pending = b""
                return None
            buffer += chunk

    @staticmethod
    def _emit(log: Any, data: bytes) -> None:
        if data:
            log.write(data)
            log.flush()
            sys.stdout.buffer.write(data)
            sys.stdout.flush()

    def close(self) -> None:
        """End the worker (its engine's memory is freed with the process) and give back its GPUs."""
        if self.process.poll() is None:
            try:
                self.process.stdin.close()  # type: ignore[union-attr]
            except OSError:
                pass
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._stack.close()


class Workers:
    """The sweep's warm worker: at most one alive (jobs run one at a time under this launcher)."""

    def __init__(self) -> None:
        self.keys: dict[tuple[str, ...], str] = {}
        """Each job's engine key (checkpoints named by their shape where they swap: engine_key), by
        its overrides (set by the launcher before it runs them)."""
        self.paths: dict[tuple[str, ...], str] = {}
        """Each job's checkpoint folder, by its overrides (the launcher's too)."""
        self.current: Optional[Worker] = None
        self.held_path: Optional[str] = None
        self.why_fresh: Optional[str] = None
        """Why the last job's worker is a fresh one where a worker with an engine was there before."""

    def run(self, task_overrides: Sequence[str], argv: Sequence[str], log_path: Path, env: dict[str, str],
            slot: Callable[[], ContextManager[Optional[str]]]) -> tuple[int, str, str, Optional[str]]:
        """Run a job on a worker whose engine fits it (a fresh one, started with `env` on the GPUs
        `slot` holds for it, where none does); returns its exit code, its log, how its worker came
        to be (fresh or warm) and the worker's GPUs."""
        key = self.keys.get(tuple(task_overrides), f"unknown job {' '.join(task_overrides)}")
        path = self.paths.get(tuple(task_overrides))
        worker = self.current
        how, self.why_fresh = "warm", None
        if worker is None or worker.process.poll() is not None or not compatible(worker.key, key):
            if worker is not None and worker.process.poll() is None and worker.key and key:
                self.why_fresh = self._why_not_kept(path, worker.key, key)
                print(f"[toolsweep] a new worker and engine: {self.why_fresh}", flush=True)
            self.close()
            worker = self.current = self._start(env, slot, loads_model=bool(key))
            how = "fresh"
        if key:
            worker.key = key
            self.held_path = path
        elif worker.key is None:
            worker.key = ""
        returncode, text, healthy = worker.run(argv, log_path, self.why_fresh)
        if not healthy:
            self.close()
        return returncode, text, how, worker.devices

    def _why_not_kept(self, path: Optional[str], held: str, wanted: str) -> str:
        """Why the live worker's engine cannot take this job (a new checkpoint's shape, else the
        options that differ)."""
        from inference.checkpoints import swap_problems

        if path and self.held_path and path != self.held_path:
            problems = swap_problems(self.held_path, path)
            if problems:
                return f"{path} cannot be read into the engine of {self.held_path}: {'; '.join(problems)}"
        changed = key_differences(held, wanted)
        return f"its engine's options differ from the loaded engine's: {'; '.join(changed) or 'besides the checkpoint'}"

    def _start(self, env: dict[str, str], slot: Callable[[], ContextManager[Optional[str]]],
               loads_model: bool) -> Worker:
        stack = ExitStack()
        devices = stack.enter_context(slot())  # held while the worker lives
        return Worker(env, devices, stack, loads_model)

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
            self.current = None


ACTIVE: Optional[Workers] = None
"""The sweep's workers while the warm launcher runs its jobs (None: each job is a cold process)."""


def close_active() -> None:
    """End the sweep's worker (at the sweep's end; a killed sweep's worker dies with it)."""
    global ACTIVE
    if ACTIVE is not None:
        ACTIVE.close()
        ACTIVE = None
