"""Okapi BM25 as the `rank_bm25` package computes it (BM25Okapi), written here to avoid the
dependency. Three ETAPP tools rank with it: email search, product search and, as our offline
stand-in for an embedding model, tool search.

The idf floor is rank_bm25's: a term in more than half of the documents would get a negative idf
log((N - n + 0.5) / (n + 0.5)); it gets epsilon times the mean idf of the vocabulary instead.
Scores add up per query token in query order (a repeated token counts twice), each term written
in the same order of operations as the vectorised original, so ties fall exactly as upstream's.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Sequence


class BM25Okapi:
    """Scores of every document of a fixed, pre-tokenised corpus for a tokenised query."""

    def __init__(self, corpus: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75,
                 epsilon: float = 0.25) -> None:
        self.k1, self.b = k1, b
        self.doc_freqs = [Counter(doc) for doc in corpus]
        self.doc_len = [len(doc) for doc in corpus]
        total = sum(self.doc_len)
        # rank_bm25 divides by zero for a corpus of empty documents; every tf is 0 there anyway.
        self.avgdl = total / len(corpus) if total else 1.0
        self.idf = self._idf(epsilon)

    def _idf(self, epsilon: float) -> dict[str, float]:
        containing: Counter[str] = Counter()
        for freqs in self.doc_freqs:
            containing.update(freqs.keys())
        size = len(self.doc_freqs)
        idf = {word: math.log(size - n + 0.5) - math.log(n + 0.5) for word, n in containing.items()}
        floor = epsilon * (sum(idf.values()) / len(idf)) if idf else 0.0
        return {word: (floor if value < 0 else value) for word, value in idf.items()}

    def scores(self, query: Sequence[str]) -> list[float]:
        """One score per document, in corpus order."""
        totals = [0.0] * len(self.doc_freqs)
        for token in query:
            idf = self.idf.get(token) or 0
            for i, freqs in enumerate(self.doc_freqs):
                tf = freqs.get(token) or 0
                norm = tf + self.k1 * (1 - self.b + self.b * self.doc_len[i] / self.avgdl)
                totals[i] += idf * (tf * (self.k1 + 1) / norm)
        return totals


def top_indices(scores: Sequence[float], k: int, allowed: Sequence[bool] | None = None) -> list[int]:
    """The k best documents, highest score first; equal scores keep corpus order, so a query that
    matches nothing still returns the first k (upstream returns its top-k whatever the scores)."""
    candidates = [i for i in range(len(scores)) if allowed is None or allowed[i]]
    return sorted(candidates, key=lambda i: -scores[i])[:k]
