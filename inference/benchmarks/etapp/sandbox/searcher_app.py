"""Tool retrieval (spec section 1.10): `search_tools` and `get_tool_doc`.

`search_tools` ranks as upstream does (spec correction 13): each keyword is embedded with
paraphrase-MiniLM-L3-v2 (run offline through ONNX Runtime, embeddings.py) and compared by cosine
similarity with every corpus entry; upstream's own top-K loop keeps the K best (a later entry
replaces the lowest kept one only when it scores strictly higher), and the keywords' hits are
merged through a set. Upstream's set order depends on Python's hash seed; here names come in
order of first appearance, each keyword's hits best first, so only the order of the union can
differ from upstream's. A failure is reported inside the result with `"output": null`.

The corpus is upstream's: every config entry of every app except this one, written
"<class name split at capitals, lower-cased>.<tool>:<description>"; the three smart-home classes
share one config, so each smart-home tool is indexed three times (45 entries for 33 tools).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from inference.benchmarks.etapp.apps import APPS, SEARCH_TOOLS
from inference.benchmarks.etapp.sandbox.core import Env
from inference.benchmarks.etapp.sandbox.embeddings import VERSION, cosine, embed

if TYPE_CHECKING:
    from inference.benchmarks.etapp.sandbox.data import SandboxData

SEARCH_TOOLS_VERSION = VERSION
DEFAULT_K = 3


def class_words(name: str) -> str:
    """Upstream's prefix: HealthMonitoringApp -> "health monitoring app", Navigation_And_Map ->
    "navigation_ and_ map", ECommerce -> "e commerce"."""
    return " ".join(re.findall(r"[A-Z][^A-Z]*", name)).lower()


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

    def search_tools(self, keywords, K=DEFAULT_K):  # noqa: N803 -- upstream's parameter name
        queries = [keywords] if isinstance(keywords, str) else keywords
        try:
            found: dict[str, None] = {}
            for query in queries:
                for name in self._top_k(query, K):
                    found.setdefault(name)
            return {"status": "success", "input": {"keywords": keywords}, "output": list(found), "exception": None}
        except Exception as exc:  # noqa: BLE001 -- upstream reports any failure inside the result
            return {"status": "failure", "input": {"keywords": keywords}, "output": None, "exception": str(exc)}

    def _top_k(self, query: Any, k: int) -> list[str]:
        """Upstream's loop: the first K entries kept, then each later one replaces the lowest kept
        one when it scores strictly higher; best first (K of 0 fails on `min()` as upstream)."""
        wanted = embed(query)
        kept: list[tuple[float, str]] = []
        for name, text in self._corpus:
            score = cosine(wanted, embed(text))
            if len(kept) < k:
                kept.append((score, name))
            else:
                low = kept.index(min(kept, key=lambda item: item[0]))
                if score > kept[low][0]:
                    kept[low] = (score, name)
            kept.sort(key=lambda item: item[0], reverse=True)
        return [name for _, name in kept]

    def get_tool_doc(self, tools_name):
        wanted = [tools_name] if isinstance(tools_name, str) else tools_name
        # Registry order, not request order; unknown names and the two search tools are left out.
        # The request is iterated, as upstream, so a number or null fails as "'int' object is not
        # iterable" (a membership test would word it differently).
        docs: dict[str, Any] = {}
        for name, entry in self._configs.items():
            if name not in SEARCH_TOOLS and any(name == asked for asked in wanted):
                docs[name] = entry
        return {"status": "success", "data": docs}
