"""Repeated samples: `decoding.samples=k` asks every record of the benchmark k times.

Each of the k is its own row of the sample table, so every solver, the store, the cache and
grading see ordinary samples: `record_id` is the benchmark's id of the record, `sample_index`
0..k-1 which generation it is, and `sample_id` stays unique (`{record_id}#{i}` when k > 1, the
record's id itself when k = 1, so a one-sample run looks as it always did). The seed of each
generation comes from its index (inference.engines.request_seed), and so does its cache key.
"""

from __future__ import annotations

import polars as pl

SEPARATOR = "#"
"""Between a record's id and its sample index in the sample_id of a repeated run."""


def sample_key(record_id: str, sample_index: int, samples: int) -> str:
    """The sample_id of generation `sample_index` of a record in a run of `samples` per record."""
    return record_id if samples == 1 else f"{record_id}{SEPARATOR}{sample_index}"


def repeat_samples(table: pl.DataFrame, samples: int) -> pl.DataFrame:
    """`table` with `record_id` and `sample_index`, each record repeated `samples` times in a row
    (record order kept, so `dataset.limit` and shards see records as before)."""
    base = table.with_columns(pl.col("sample_id").alias("record_id"), pl.lit(0, dtype=pl.Int64).alias("sample_index"))
    if samples == 1:
        return base
    order = "__record_order"
    numbered = base.with_row_index(order)
    copies = [numbered.with_columns(pl.lit(i, dtype=pl.Int64).alias("sample_index"),
                                    (pl.col("record_id") + f"{SEPARATOR}{i}").alias("sample_id"))
              for i in range(samples)]
    return pl.concat(copies).sort(order, "sample_index", maintain_order=True).drop(order)
