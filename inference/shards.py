"""Sharded runs: one big run split into parts that run as a sweep's jobs, then merged into one.

`dataset.shards=N dataset.shard=I` keeps part I of the run's records: those whose shard key
(the benchmark's `shard_key`, else the sample id) hashes to I modulo N, SHA-256 of the key's
text, so the split is the same on every machine and Python process (never `hash()`). A
record's repeated samples (decoding.samples) stay in its shard, and so do ETAPP's episodes of a
case (all of a user's cases under state=sequential).

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
