"""History ablations (`dataset.history`): what the model sees of the user's interaction history.

PEToolBench's prompts hold the history as a JSON list between `Interaction history is:` and the
tool list; an ablation rewrites only that list (the paper's Figure 5 compares accuracy with and
without it):

- `full`: as the benchmark wrote it (the prompt is not touched);
- `none`: an empty list, so the prompt stays well formed;
- `last_k`: the last `dataset.history_k` items (the most recent, in the chronological setting);
- `shuffled`: the items in an order fixed by the sample id and `dataset.history_seed`;
- `dataset.drop_ratings=true` removes the `rating` of every item (the `r` setting's signal).
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

import polars as pl

from inference.errors import ConfigError

HISTORY_MODES = ("full", "none", "last_k", "shuffled")
HISTORY_START = "Interaction history is:\n"


def split_history(system: str) -> tuple[str, list[Any], str] | None:
    """(text before the list, the items, text after it), or None without a history list."""
    start = system.find(HISTORY_START)
    if start < 0:
        return None
    at = start + len(HISTORY_START)
    try:
        items, end = json.JSONDecoder().raw_decode(system, at)
    except json.JSONDecodeError:
        return None
    return (system[:at], items, system[end:]) if isinstance(items, list) else None


def join_history(head: str, items: list[Any], tail: str) -> str:
    # The benchmark writes the history with json.dumps defaults and raw UTF-8.
    return head + json.dumps(items, ensure_ascii=False) + tail


def ablated_items(items: list[Any], mode: str, k: int, drop_ratings: bool, seed: str) -> list[Any]:
    if mode == "none":
        kept = []
    elif mode == "last_k":
        kept = items[-k:] if k else []
    elif mode == "shuffled":
        kept = list(items)
        random.Random(int(hashlib.sha256(seed.encode()).hexdigest()[:16], 16)).shuffle(kept)
    else:
        kept = list(items)
    if drop_ratings:
        kept = [{key: v for key, v in item.items() if key != "rating"} if isinstance(item, dict) else item
                for item in kept]
    return kept


def ablate(system: str | None, mode: str, k: int, drop_ratings: bool, seed: str) -> str | None:
    """The prompt with its history rewritten; unchanged for `full` without drop_ratings."""
    if system is None or (mode == "full" and not drop_ratings):
        return system
    parts = split_history(system)
    if parts is None:
        return system
    head, items, tail = parts
    return join_history(head, ablated_items(items, mode, k, drop_ratings, seed), tail)


def ablate_table(table: pl.DataFrame, mode: str, k: int, drop_ratings: bool, seed: int, benchmark: str) -> pl.DataFrame:
    """The sample table with every prompt's history ablated (system and native_system turns)."""
    if mode == "full" and not drop_ratings:
        return table
    if not any(split_history(s or "") for s in table["system"].to_list()):
        raise ConfigError(f"dataset.history={mode} / dataset.drop_ratings rewrite the 'Interaction history is:' "
                          f"list of PEToolBench-style prompts; {benchmark}'s prompts hold none. Leave "
                          "dataset.history=full for this benchmark.")
    rows = table.select("sample_id", "system", "native_system").iter_rows()
    systems, natives = [], []
    for sample_id, system, native in rows:
        salt = f"{seed}:{sample_id.split('-', 1)[-1]}"  # one order per record, shared by its settings
        systems.append(ablate(system, mode, k, drop_ratings, salt))
        natives.append(ablate(native, mode, k, drop_ratings, salt))
    return table.with_columns(pl.Series("system", systems, dtype=pl.String),
                              pl.Series("native_system", natives, dtype=pl.String))
