"""Deterministic substitutes for the two catalogues upstream never published (spec section 1.12):
the music catalogue behind `play_music` and the product table behind
`search_products_in_shopping_manager`.

Music: every distinct (title, artist) pair of the 16 users' favourites, in first-appearance order
over the files sorted by name; `annotation_count` (upstream's popularity column) is the number of
favourites rows, over all users, with that title.

Products: the users' real cart rows (read from the ETAPP data at run time, one record per distinct
(asin, title, price), first appearance in sorted file order, price rewritten from "USD 129.99" to
the catalogue's "$129.99", fields a cart does not hold left NaN), then the invented, frozen items of
`datasets/etapp/products-v1.jsonl` (families listed in its README). A JSON null there is a blank
cell of upstream's CSV, so it reaches the agent as NaN, as pandas would read it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from inference.errors import DatasetError

MUSIC_CATALOGUE_VERSION = "favorites-union-v1"
CATALOGUE_VERSION = "products-v1"
PRODUCTS_FILE = Path(__file__).resolve().parents[4] / "datasets" / "etapp" / f"{CATALOGUE_VERSION}.jsonl"
PRODUCT_COLUMNS = ("asin", "product_title", "product_price", "product_original_price", "currency",
                   "product_star_rating", "product_num_ratings", "product_url", "sales_volume",
                   "delivery", "has_variations")
"""A product record's fields, in the order upstream's product table has them."""


@dataclass(frozen=True)
class Track:
    title: str
    artist: str
    annotation_count: int


def music_catalogue(favorites: Iterable[pd.DataFrame]) -> tuple[Track, ...]:
    """The catalogue from the users' favourites frames, given in sorted file order."""
    rows = [(r.title, r.artist) for frame in favorites for r in frame.itertuples(index=False)]
    counts: dict[str, int] = {}
    for title, _ in rows:
        counts[title] = counts.get(title, 0) + 1
    pairs = dict.fromkeys(rows)
    return tuple(Track(title, artist, counts[title]) for title, artist in pairs)


def cart_products(carts: Iterable[pd.DataFrame]) -> list[dict[str, Any]]:
    """One catalogue record per distinct (asin, title, price) cart row, in first-appearance order.
    Not one per ASIN: the data reuses an ASIN for unrelated products (B092JHV39L is a speaker in
    one cart, a backpack in another)."""
    rows = (tuple(row) for frame in carts
            for row in frame[["asin", "product_title", "product_price"]].itertuples(index=False))
    return [_cart_record(*row) for row in dict.fromkeys(rows)]


def _cart_record(asin: str, title: str, price: str) -> dict[str, Any]:
    amount = str(price).removeprefix("USD").strip()
    record = dict.fromkeys(PRODUCT_COLUMNS, math.nan)
    record.update(asin=asin, product_title=title, product_price=f"${amount}", currency="USD",
                  product_url=f"https://www.example.com/dp/{asin}", has_variations=False)
    return record


def read_products(path: Path) -> list[dict[str, Any]]:
    """The frozen invented items; every bad line is reported at once."""
    items, problems = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"line {number}: not JSON ({exc})")
            continue
        missing = [c for c in ("family", *PRODUCT_COLUMNS) if not isinstance(raw, dict) or c not in raw]
        if missing:
            problems.append(f"line {number}: missing fields {missing}")
            continue
        items.append({c: math.nan if raw[c] is None else raw[c] for c in PRODUCT_COLUMNS})
    if problems:
        raise DatasetError(f"{path}: bad product records ({'; '.join(problems)}); restore the file from git")
    return items


def product_catalogue(carts: Iterable[pd.DataFrame], path: Path = PRODUCTS_FILE) -> tuple[dict[str, Any], ...]:
    """Cart rows first, then the invented items, as the BM25 corpus and its tie order."""
    return tuple(cart_products(carts) + read_products(path))
