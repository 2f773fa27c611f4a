"""History ablations (`dataset.history`): what the model sees of the user's interaction history.

A benchmark whose prompts hold the user's history as a JSON list between `Interaction history
is:` and the tool list (its loader offers these options); an ablation rewrites only that list
(the paper's Figure 5 compares accuracy with and without it):

- `full`: as the benchmark wrote it (the prompt is not touched);
- `none`: an empty list, so the prompt stays well formed;
- `last_k`: the last `dataset.history_k` items (the most recent, in the chronological setting);
- `shuffled`: the items in an order fixed by the sample id and `dataset.history_seed`;
- `swap`: the counterfactual history (where the loader gives same-function sets and candidates).
  A same-function alternative to the gold tool (a seeded choice among the record's candidates,
  preferring one whose provider the history names) exchanges provider names with the gold's throughout the history, so the history now
  points at the alternative; the gold becomes the alternative with the same parameters, and
  `prior_gold_tool` keeps the unswapped gold (the diagnosis calls an answer of it `prior_choice`);
- `dataset.drop_ratings=true` removes the `rating` of every item (the `r` setting's signal).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from typing import Any

import polars as pl

from inference.errors import ConfigError

HISTORY_MODES = ("full", "none", "last_k", "shuffled", "swap")
HISTORY_START = "Interaction history is:\n"


def _history_list(system: str) -> tuple[int, list[Any], int] | None:
    """(start offset, the items, end offset) of the prompt's history list, or None without one."""
    start = system.find(HISTORY_START)
    if start < 0:
        return None
    at = start + len(HISTORY_START)
    try:
        items, end = json.JSONDecoder().raw_decode(system, at)
    except json.JSONDecodeError:
        return None
    return (at, items, end) if isinstance(items, list) else None


def split_history(system: str) -> tuple[str, list[Any], str] | None:
    """(text before the list, the items, text after it), or None without a history list."""
    found = _history_list(system)
    return (system[:found[0]], found[1], system[found[2]:]) if found else None


def join_history(head: str, items: list[Any], tail: str) -> str:
    # The benchmark writes the history with json.dumps defaults and raw UTF-8.
    return head + json.dumps(items, ensure_ascii=False) + tail


def drop_oldest(system: str, count: int) -> str | None:
    """The system prompt with its `count` oldest history items removed (None: no history list, or
    fewer than `count` items): the benchmark's `shorten` (decoding.drop_oldest_history)."""
    parts = split_history(system)
    if parts is None or count <= 0:
        return None if parts is None else system
    head, items, tail = parts
    return None if count > len(items) else join_history(head, items[count:], tail)


def _rng(seed: str) -> random.Random:
    return random.Random(int(hashlib.sha256(seed.encode()).hexdigest()[:16], 16))


def ablated_items(items: list[Any], mode: str, k: int, drop_ratings: bool, seed: str) -> list[Any]:
    if mode in ("full", "swap"):  # swap rewrites names in the text (swap_table), not the items
        kept = list(items)
    elif mode == "none":
        kept = []
    elif mode == "last_k":
        kept = items[-k:] if k else []
    elif mode == "shuffled":
        kept = list(items)
        _rng(seed).shuffle(kept)
    else:
        kept = list(items)
    if drop_ratings:
        kept = [{key: v for key, v in item.items() if key != "rating"} if isinstance(item, dict) else item
                for item in kept]
    return kept


def ablate(system: str | None, mode: str, k: int, drop_ratings: bool, seed: str) -> str | None:
    """The prompt with its history rewritten; unchanged for `full` without drop_ratings."""
    if system is None or (mode in ("full", "swap") and not drop_ratings):
        return system
    parts = split_history(system)
    if parts is None:
        return system
    head, items, tail = parts
    return join_history(head, ablated_items(items, mode, k, drop_ratings, seed), tail)


def ablate_table(table: pl.DataFrame, mode: str, k: int, drop_ratings: bool, seed: int, benchmark: str) -> pl.DataFrame:
    """The sample table with every prompt's history ablated (system and native_system turns)."""
    if mode == "swap":
        table = swap_table(table, seed)
    if mode in ("full", "swap") and not drop_ratings:
        return table
    if not any(split_history(s or "") for s in table["system"].to_list()):
        raise ConfigError(f"dataset.history={mode} / dataset.drop_ratings rewrite the 'Interaction history is:' "
                          f"list of prompts that hold one; {benchmark}'s prompts hold none. Leave "
                          "dataset.history=full for this benchmark.")
    rows = table.select("sample_id", "system", "native_system").iter_rows()
    systems, natives = [], []
    for sample_id, system, native in rows:
        salt = f"{seed}:{sample_id.split('-', 1)[-1]}"  # one order per record, shared by its settings
        systems.append(ablate(system, mode, k, drop_ratings, salt))
        natives.append(ablate(native, mode, k, drop_ratings, salt))
    return table.with_columns(pl.Series("system", systems, dtype=pl.String),
                              pl.Series("native_system", natives, dtype=pl.String))


def provider(tool: str) -> str:
    """`<Category>.<Tool>.<API>` -> `<Category>.<Tool>.<` (the prefix every API of the provider shares)."""
    return tool.rsplit(".<", 1)[0] + ".<"


def history_span(system: str) -> tuple[int, int] | None:
    """Where the history list lies in a prompt (start and end offsets), or None."""
    found = _history_list(system)
    return (found[0], found[2]) if found else None


def swap_alternative(gold: str, same_function: list[str], candidates: list[str], history: str, seed: str) -> str | None:
    """The same-function candidate that takes the gold's place: among the record's alternatives
    (same function, offered as candidates), those whose provider the history names come first;
    one of them by the record's seed. None when the record has none."""
    alternatives = [t for t in dict.fromkeys(same_function) if t != gold and t in candidates
                    and provider(t) != provider(gold)]
    named = [t for t in alternatives if _escaped(provider(t)) in history]
    pool = named or alternatives
    return _rng(seed).choice(pool) if pool else None


def _escaped(text: str) -> str:
    # As the benchmark writes names inside its JSON history (raw UTF-8, JSON escapes).
    return json.dumps(text, ensure_ascii=False)[1:-1]


def exchange_providers(system: str | None, first: str, second: str) -> str | None:
    """The prompt with the two providers' names exchanged inside its history list only."""
    if system is None or (span := history_span(system)) is None:
        return system
    at, end = span
    names = {_escaped(first): _escaped(second), _escaped(second): _escaped(first)}
    pattern = re.compile("|".join(re.escape(n) for n in names))
    return system[:at] + pattern.sub(lambda m: names[m[0]], system[at:end]) + system[end:]


def swap_table(table: pl.DataFrame, seed: int) -> pl.DataFrame:
    """dataset.history=swap over a table with same-function sets and candidates: per sample, the alternative exchanges names
    with the gold's provider in the history, and becomes the gold (same parameters). A sample
    whose history names neither provider has no counterfactual (its preference is not carried by
    a name: about half of the `p` setting's) and is left out, with a line saying how many."""
    missing = [c for c in ("same_func_tools", "candidate_tools", "prior_gold_tool") if c not in table.columns]
    if missing:
        raise ConfigError(f"dataset.history=swap needs each sample's same-function tools and candidates; this "
                          f"benchmark's table lacks {missing}: use a benchmark whose loader writes them")
    rows = table.select("sample_id", "system", "native_system", "gold_tool", "same_func_tools",
                        "candidate_tools").iter_rows(named=True)
    swapped = {row["sample_id"]: _swapped(row, seed) for row in rows}
    kept = [sid for sid, found in swapped.items() if found is not None]
    _report_left_out(table, set(kept))
    columns = list(zip(*(swapped[sid] for sid in kept))) or [[], [], [], []]
    return table.filter(pl.col("sample_id").is_in(kept)).with_columns(
        *[pl.Series(name, values, dtype=pl.String) for name, values in
          zip(("system", "native_system", "gold_tool", "prior_gold_tool"), columns)])


def _report_left_out(table: pl.DataFrame, kept: set[str]) -> None:
    from inference.console import marker

    left = table.filter(~pl.col("sample_id").is_in(list(kept)))
    if left.height:
        per_setting = ", ".join(f"{s}: {n}" for s, n in left.group_by("setting", maintain_order=True).len().rows())
        marker(f"dataset.history=swap: {left.height} of {table.height} samples left out, their history names neither "
               f"the gold's provider nor an alternative's ({per_setting})")


def _swapped(row: dict[str, Any], seed: int) -> tuple[str | None, str | None, str, str] | None:
    """(system, native system, new gold, old gold), or None when the history names neither the
    gold's provider nor any alternative's."""
    gold, system = row["gold_tool"], row["system"] or ""
    span = history_span(system)
    history = system[span[0]:span[1]] if span else ""
    salt = f"{seed}:{row['sample_id'].split('-', 1)[-1]}"  # one draw per record and setting history
    same, candidates = (json.loads(row[c]) if row[c] else [] for c in ("same_func_tools", "candidate_tools"))
    alternative = swap_alternative(gold, same, candidates, history, salt) if gold else None
    if alternative is None or not any(_escaped(provider(t)) in history for t in (gold, alternative)):
        return None
    first, second = provider(gold), provider(alternative)
    return (exchange_providers(row["system"], first, second), exchange_providers(row["native_system"], first, second),
            alternative, gold)

