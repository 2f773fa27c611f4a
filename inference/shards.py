"""Sharded runs: one big run split into parts that run as a sweep's jobs, then merged into one.

`dataset.shards=N dataset.shard=I` keeps part I of the run's records: those whose shard key
(the benchmark's `shard_key`, else the sample id) hashes to I modulo N, SHA-256 of the key's
text, so the split is the same on every machine and Python process (never `hash()`). A
record's repeated samples (decoding.samples) stay in its shard, and so do the samples its
benchmark's `shard_key` keeps together (e.g. an agent benchmark's episodes of a case).

`-m dataset.shards=3 dataset.shard=range(3)` runs the parts as the jobs of a sweep (on SLURM, an
array); a rerun of the same sweep keeps finished parts and resumes the others from their stored
generations; inference/merge.py joins the parts into one run.
"""

from __future__ import annotations

import hashlib
from typing import Any

import polars as pl


def shard_number(key: str, shards: int) -> int:
    """The part `key` falls in: SHA-256 of its text, modulo `shards`."""
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:16], 16) % shards


def shard_of(records: pl.DataFrame, benchmark: Any, options: Any) -> pl.DataFrame:
    """The records of this run's shard (all of them where `dataset.shard` is unset)."""
    if options.shard is None:
        return records
    keys = benchmark.shard_key(records, options) if benchmark.shard_key else records["sample_id"]
    parts = pl.Series([shard_number(str(k), options.shards) for k in keys.to_list()], dtype=pl.Int64)
    return records.filter(parts == options.shard)


def subsample(records: pl.DataFrame, benchmark: Any, options: Any, seed: int = 0) -> pl.DataFrame:
    """The first `dataset.subsample` records of one order: within each setting, units (the shard
    key, else the sample id) by SHA-256 of the seed and the unit; settings interleaved by each
    record's rank / its setting's size, so every prefix holds the settings in proportion. A prefix
    of the order is inside every longer one (nested subsets), on every machine."""
    if options.subsample is None or options.subsample >= records.height:
        return records
    keys = benchmark.shard_key(records, options) if benchmark.shard_key else records["sample_id"]
    ranked = records.with_columns(
        pl.Series("_unit", [hashlib.sha256(f"{seed}:{k}".encode("utf-8")).hexdigest() for k in keys.to_list()]),
        pl.int_range(pl.len()).alias("_row"))
    ranked = ranked.with_columns(
        (pl.col("_unit").rank("dense").over("setting") / pl.col("_unit").n_unique().over("setting")).alias("_place"))
    keep = ranked.sort("_place", "setting", "_unit", "_row").head(options.subsample)["_row"]
    return records.filter(pl.int_range(pl.len()).is_in(keep.implode()))
