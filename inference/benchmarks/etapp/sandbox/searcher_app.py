"""Tool retrieval (spec section 1.10): `search_tools` and `get_tool_doc`.

Deviation: upstream embeds each keyword with a sentence-transformers MiniLM model and ranks the
corpus by cosine similarity. No embedding model is available offline, so the same 45-entry corpus
is ranked lexically with BM25 (bm25.py) over lower-cased word tokens, with a plain-plural fold
("events" -> "event"). Like the embedding, it returns the top K whatever the scores. Upstream
merges the keywords' hits through a Python set (order depends on the hash seed); here names come
in order of first appearance, each keyword's hits sorted by score. So which names come back can
differ from upstream's, and their order always does.

The corpus is upstream's: every config entry of every app except this one, written
"<class name split at capitals, lower-cased>.<tool>:<description>"; the three smart-home classes
share one config, so each smart-home tool is indexed three times (45 entries for 33 tools).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from inference.benchmarks.etapp.apps import APPS, SEARCH_TOOLS
from inference.benchmarks.etapp.sandbox.bm25 import BM25Okapi, top_indices
from inference.benchmarks.etapp.sandbox.core import Env

if TYPE_CHECKING:
    from inference.benchmarks.etapp.sandbox.data import SandboxData

SEARCH_TOOLS_VERSION = "bm25-lexical-v1"
DEFAULT_K = 3


def class_words(name: str) -> str:
    """Upstream's prefix: HealthMonitoringApp -> "health monitoring app", Navigation_And_Map ->
    "navigation_ and_ map", ECommerce -> "e commerce"."""
    return " ".join(re.findall(r"[A-Z][^A-Z]*", name)).lower()


def tokens(text: str) -> list[str]:
    """Lower-cased alphanumeric runs, a trailing plural "s" dropped (not from "ss" or short words)."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words]


def tool_corpus(data: SandboxData) -> list[tuple[str, str]]:
    """(tool name, indexed text) for every entry, in sorted-app, class, config order."""
    configs, corpus = data.tool_configs, []
    for app in APPS:
        names = [n for n in data.app_tools[app.folder] if n not in SEARCH_TOOLS]
        for cls in app.classes:
            for name in names:
                description = configs[name]["function"].get("description", "")
                corpus.append((name, f"{class_words(cls)}.{name}:{description}"))
    return corpus


class Tool_And_History_Searcher:  # noqa: N801 -- upstream's class name, shown in Python's error messages
    """Upstream's Tool_And_History_Searcher class: same method and parameter names, so Python words the errors."""

    TOOLS = SEARCH_TOOLS

    def __init__(self, env: Env) -> None:
        self._configs = env.data.tool_configs
        self._corpus = tool_corpus(env.data)
        self._index = BM25Okapi([tokens(text) for _, text in self._corpus])

    def search_tools(self, keywords, K=DEFAULT_K):  # noqa: N803 -- upstream's parameter name
        try:
            queries = [keywords] if isinstance(keywords, str) else list(keywords)
            found: dict[str, None] = {}
            for query in queries:
                for i in top_indices(self._index.scores(tokens(query)), K):
                    found.setdefault(self._corpus[i][0])
            return {"status": "success", "input": {"keywords": keywords}, "output": list(found), "exception": None}
        except Exception as exc:  # noqa: BLE001 -- upstream reports any failure inside the result
            return {"status": "failure", "input": {"keywords": keywords}, "output": [], "exception": str(exc)}

    def get_tool_doc(self, tools_name):
        wanted = [tools_name] if isinstance(tools_name, str) else tools_name
        # Registry order, not request order; unknown names and the two search tools are left out.
        docs: dict[str, Any] = {name: entry for name, entry in self._configs.items()
                                if name not in SEARCH_TOOLS and name in wanted}
        return {"status": "success", "data": docs}
