"""The stages of one run, each a function over typed config and Polars frames.

load_samples -> build_prompts -> make_engine -> generate -> collect, then grading takes over.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from inference.config import ToolsweepConfig
from inference.engines import FAILED_FINISH, Engine, Generation, Request
from inference.petoolbench import load_petoolbench
from inference.prompts import TOO_LONG, PromptSettings, attach_schemas, render_prompts


def load_samples(cfg: ToolsweepConfig) -> pl.DataFrame:
    """The canonical sample table of the configured benchmark."""
    return load_petoolbench(cfg.dataset.path, cfg.dataset.settings, cfg.dataset.limit)


def load_tokenizer(model_path: str) -> Any:
    """The model's own tokenizer (and chat template), from the local folder only."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_path)


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
    table = attach_schemas(samples, cfg.decoding.constraint)
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
                                  batch_size=cfg.engine.batch_size, quiet=cfg.quiet)
    from inference.engines.vllm_offline import VLLMEngine

    return VLLMEngine(model_path=cfg.model.path, constraint=cfg.decoding.constraint,
                      max_model_len=max_model_len, dtype=cfg.model.dtype, lora=cfg.model.lora,
                      max_lora_rank=cfg.model.max_lora_rank,
                      tensor_parallel_size=cfg.model.tensor_parallel_size,
                      max_new_tokens=cfg.decoding.max_new_tokens,
                      temperature=cfg.decoding.temperature, seed=cfg.engine.seed,
                      enforce_eager=cfg.engine.enforce_eager,
                      gpu_memory_utilization=cfg.engine.gpu_memory_utilization,
                      max_num_seqs=cfg.engine.max_num_seqs, cpu_kvcache_gib=cfg.engine.cpu_kvcache_gib,
                      compile_timeout_s=cfg.decoding.compile_timeout_s, quiet=cfg.quiet)


def requests_for(prompts: pl.DataFrame, constraint: str) -> list[Request]:
    """Engine requests for every sample that has not already failed (too_long rows stay out)."""
    todo = prompts.filter(pl.col("failure").is_null())
    return [Request(sample_id=row["sample_id"], prompt=row["prompt"],
                    prompt_token_ids=tuple(row["prompt_token_ids"] or ()),
                    schema_json=None if constraint == "none" else row["schema_json"])
            for row in todo.select("sample_id", "prompt", "prompt_token_ids", "schema_json")
            .iter_rows(named=True)]


def collect(prompts: pl.DataFrame, generations: list[Generation]) -> pl.DataFrame:
    """The generation table: one row per sample, too_long and engine failures included."""
    gen = pl.DataFrame(
        [{"sample_id": g.sample_id, "output": g.output, "finish_reason": g.finish_reason,
          "output_tokens": g.output_tokens, "error": g.error} for g in generations],
        schema={"sample_id": pl.String, "output": pl.String, "finish_reason": pl.String,
                "output_tokens": pl.Int64, "error": pl.String})
    joined = prompts.drop("prompt", "prompt_token_ids").join(gen, on="sample_id", how="left",
                                                             maintain_order="left")
    too_long = pl.col("failure") == TOO_LONG
    return joined.with_columns(
        pl.when(too_long).then(pl.lit(TOO_LONG)).otherwise(pl.col("finish_reason")).alias("finish_reason"),
        pl.when(too_long).then(pl.lit(TOO_LONG))
        .when(pl.col("finish_reason").is_in(list(FAILED_FINISH))).then(pl.col("finish_reason"))
        .otherwise(pl.col("failure")).alias("failure"),
        pl.when(too_long)
        .then(pl.format("too_long: {} prompt tokens leave no room for the answer", pl.col("prompt_tokens")))
        .otherwise(pl.col("error")).alias("error"),
    )


def ensure_run_dir(run_dir: Path) -> Path:
    """The Hydra run dir, created if a caller outside Hydra passes a new one."""
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir
