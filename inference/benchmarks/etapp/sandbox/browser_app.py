"""Web browsing (spec section 1.9): news by category, hot news, and an honest offline failure for
Wikipedia search (upstream downloads a multi-GB Lucene index at call time)."""

from __future__ import annotations

from inference.benchmarks.etapp.sandbox.core import Env

WIKIPEDIA_VERSION = "offline-failure-v1"
WIKIPEDIA_UNAVAILABLE = {"status": "failure", "message": "search_from_wikipedia is unavailable in this offline sandbox"}


class Browser:
    """Upstream's Browser class: same method and parameter names, so Python words the errors."""

    TOOLS = ("search_news_by_category", "search_heat_news", "search_from_wikipedia")

    def __init__(self, env: Env) -> None:
        self._news = env.data.news

    def search_news_by_category(self, category):
        # Exact and case-sensitive; "hot" works although the schema does not list it, as upstream.
        for group in self._news:
            if group["category"] == category:
                return {"status": "success", "data": group}
        return {"status": "error", "message": f"The query {category} is not in defined category"}

    def search_heat_news(self):
        hot = next(group for group in self._news if group["category"] == "hot")
        return {"status": "success", "data": hot["news"]}

    def search_from_wikipedia(self, query, topk=5):
        return dict(WIKIPEDIA_UNAVAILABLE)
