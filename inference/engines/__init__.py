"""Engines turn prompts into outputs. Each takes the same requests and returns the same records.

Only the `vllm_*.py` modules import vllm, and only when used, so the rest of toolsweep (and
all of grading) runs where vllm is not installed. An engine is named by its config's
`target` (`module:Class`) and builds itself with `from_config`; nothing lists the engines.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from dataclasses import dataclass
from typing import Any, Optional, Protocol


@dataclass(frozen=True)
class Request:
    """One prompt to generate for, with the constraint for its answer."""

    sample_id: str
    prompt: str
    """The rendered chat prompt (text), for engines that tokenize themselves."""
    prompt_token_ids: tuple[int, ...]
    """The same prompt as token ids: what vLLM is given, so counts match exactly."""
    schema_json: Optional[str]
    """The call schema (order kept), or None for free decoding."""
    call_format: Optional[str] = None
    """Native format: the family (inference.toolcalls.CALL_FORMATS) whose wrapper the grammar adds."""
    max_calls: int = 1
    """Native format: how many wrapped calls the grammar allows."""
    calls_optional: bool = False
    """Native format: a plain-text answer (no call) is allowed too, as an agent's final answer is."""
    regex: Optional[str] = None
    """A regex the whole answer must match (e.g. one ReAct step); overrides schema_json."""
    sample_index: int = 0
    """Which of a record's `decoding.samples` generations this is: it picks the sampling seed
    (`request_seed`) and enters the cache key, so the k samples of one prompt differ."""
    grammar: Optional[str] = None
    """A Lark grammar the whole answer must match (xgrammar and guidance; a benchmark whose answer
    is not one JSON object, e.g. Python calls); overrides schema_json."""
    chat_json: Optional[str] = None
    """The chat itself, compact JSON `{"messages": [...], "tools": [...] | null}`: what a
    chat-completions engine (engine=chat) sends instead of the rendered text. Set only for an
    engine that sends chats (`EngineConfig.sends_chat`), so the others' cache keys are unchanged."""


@dataclass(frozen=True)
class Generation:
    """What an engine produced for one request; a failed request is a record, not an exception."""

    sample_id: str
    output: Optional[str]
    finish_reason: str
    """stop | length | error | missing (replay)."""
    output_tokens: Optional[int] = None
    error: Optional[str] = None
    """Error class and message when the engine failed on this sample."""
    prompt_tokens: Optional[int] = None
    """The prompt's tokens as the server counted them (a chat server's `usage`), for a request
    whose prompt was not tokenized here; None where the request's token ids are the count."""
    native_calls: Optional[str] = None
    """engine=chat: the server's own tool calls, JSON `[{"name", "arguments"}]`, when `output`'s
    call text was written from them (not generated as text); None otherwise."""


@dataclass(frozen=True)
class EngineContext:
    """What an engine needs besides its own options: the model, decoding and the run's samples."""

    model: Any
    """inference.config.ModelConfig"""
    decoding: Any
    """inference.config.DecodingConfig"""
    max_model_len: Optional[int]
    sample_ids: list[str]
    partial: bool = False
    """The run is one shard of several (dataset.shard): stored answers may cover other shards' samples."""
    benchmark: Any = None
    """inference.benchmarks.base.Benchmark: the run's benchmark, for what it declares to engines
    (engine=script: how its shorthand rows are written); None outside a run."""


def prompt_tokens(request: Request, generation: Generation) -> int:
    """The prompt's tokens: counted here where the chat was rendered here, else the server's count
    (a remote-only model behind engine=chat), else 0."""
    return len(request.prompt_token_ids) or generation.prompt_tokens or 0


def request_seed(seed: int, sample_index: int) -> int:
    """The sampling seed of one request: `decoding.seed` itself for sample 0 (a one-sample run
    samples as it always did), a seed drawn from (seed, index) for the others, so that neither
    two samples of a run nor two runs with nearby seeds share one (seed 0's sample 1 is not
    seed 1's sample 0)."""
    if sample_index == 0:
        return seed
    digest = hashlib.sha256(f"{seed}:{sample_index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def engine_class(target: str) -> Any:
    """The class a `module:Class` target names."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


class Engine(Protocol):
    """The interface every engine implements (plus `from_config(engine_cfg, context)`)."""

    backend: str
    """The structured-output backend that really ran ("none" for free decoding)."""

    def generate(self, requests: list[Request]) -> list[Generation]:
        """One Generation per request, in request order."""
        ...


FRESH_BECAUSE = "TOOLSWEEP_FRESH_WORKER_BECAUSE"
"""Set by a sweep (inference/workers.py) for a job whose worker is a fresh one where a worker with
another engine was there: why (the job's run.json keeps it beside how its engine started)."""


class EnginePool:
    """Keeps the last engine built in this process for the next job that asks for the same one.

    Off in a plain run (every engine is built and dropped with its run, as always). A sweep's warm
    worker (inference/workers.py) turns it on: an engine class that declares `reuse_key(engine_cfg,
    context)` (everything its constructor reads, e.g. vLLM's `LLM` arguments) and `rebind(context)`
    (the per-job parts it keeps, e.g. decoding options) is kept after its job ends and handed to the
    next job with an equal key instead of being loaded again. One that also declares
    `swap_key(engine_cfg, context)` (the reuse key without the checkpoint) and `swap(context)` takes
    another checkpoint's weights in place where inference.checkpoints proves the two the same shape;
    anything else is a new engine, the reason kept for the job's run.json. One engine at most: a
    different key drops the kept one first (memory is given back before the next load)."""

    def __init__(self) -> None:
        self.enabled = False
        self.key: Optional[str] = None
        self.engine: Any = None
        self.swap_id: Optional[str] = None
        self.path: Optional[str] = None
        self.last_start = "cold"
        """How the last engine handed out came to be: cold (built), reused (kept from a job before)
        or swapped (kept, with this job's checkpoint read into it)."""
        self.last_reason: Optional[str] = None
        """Why the last cold engine was not a swap of the kept one (None: no swap was possible)."""
        self.broken = False
        """A swap failed part-way: this process's engine memory is in doubt (its worker ends)."""

    def obtain(self, target: str, engine_cfg: Any, context: EngineContext) -> Any:
        """The engine `target` names for this config: the kept one where its key is equal (or its
        checkpoint swappable), else a new one."""
        cls = engine_class(target)
        key = self._key(cls, target, engine_cfg, context)
        self.last_reason = None
        if key is not None and key == self.key:
            self.engine.rebind(context)
            self.last_start = "reused"
            return self.engine
        if key is not None and self.key is not None and hasattr(cls, "swap") and not getattr(context.model, "lora", None):
            swapped = self._swapped(cls, target, engine_cfg, context)
            if swapped is not None:
                self.key, self.path = key, str(context.model.path)
                return swapped
        if not loads_weights(cls):  # replay, a script, a server's client: the kept engine may stay
            self.last_start = "cold"
            return cls.from_config(engine_cfg, context)
        self.clear()
        engine = cls.from_config(engine_cfg, context)
        self.last_start = "cold"
        if key is not None:
            self.key, self.engine, self.path = key, engine, str(context.model.path)
            self.swap_id = f"{target}\n{cls.swap_key(engine_cfg, context)}" if hasattr(cls, "swap") else None
        return engine

    def _swapped(self, cls: Any, target: str, engine_cfg: Any, context: EngineContext) -> Any:
        """The kept engine with this job's checkpoint read into it, or None (the reason kept)."""
        from inference.checkpoints import swap_problems
        from inference.errors import EngineError

        if self.swap_id != f"{target}\n{cls.swap_key(engine_cfg, context)}":
            return None  # another engine altogether, not another checkpoint for this one
        problems = swap_problems(str(self.path), str(context.model.path))
        if problems:
            self.last_reason = "; ".join(problems)
            return None
        try:
            self.engine.swap(context)
        except Exception as exc:  # noqa: BLE001 - any failure leaves the engine's weights in doubt
            self.clear()
            self.broken = True
            raise EngineError(f"reading model.path={context.model.path!r} into the loaded engine failed "
                              f"({type(exc).__name__}: {exc}); the sweep's next job starts a new worker") from exc
        self.engine.rebind(context)
        self.last_start = "swapped"
        return self.engine

    def _key(self, cls: Any, target: str, engine_cfg: Any, context: EngineContext) -> Optional[str]:
        if not self.enabled or not hasattr(cls, "reuse_key"):
            return None
        return f"{target}\n{cls.reuse_key(engine_cfg, context)}"

    def clear(self) -> None:
        """Drop the kept engine (a job that failed in a way that may have broken it, or another key)."""
        if self.engine is not None:
            import gc

            self.key, self.engine, self.swap_id, self.path = None, None, None, None
            gc.collect()


def loads_weights(cls: Any) -> bool:
    """Whether an engine class loads a model into this process (its module's CONFIG says)."""
    config = getattr(sys.modules.get(cls.__module__), "CONFIG", None)
    return bool(getattr(config, "needs_weights", True))


POOL = EnginePool()
"""This process's pool: off unless a warm worker turned it on."""
