"""Shopping (spec section 1.6): the user's cart, a no-op add, and BM25 product search over the
substitute catalogue (catalogues.py)."""

from __future__ import annotations

from inference.benchmarks.etapp.sandbox.bm25 import BM25Okapi, top_indices
from inference.benchmarks.etapp.sandbox.core import Env, records

TOP_FOR_TEXT, TOP_PER_ITEM = 10, 3


class ECommerce:
    """Upstream's ECommerce class: same method and parameter names, so Python words the errors."""

    TOOLS = ("add_product_to_cart", "search_products_in_shopping_manager", "view_cart_in_shopping_manager")

    def __init__(self, env: Env) -> None:
        self._env = env
        self._products = env.data.products
        # Whitespace tokens, case kept, as upstream: "pot" does not match "Pot".
        self._index = BM25Okapi([product["product_title"].split() for product in self._products])

    def add_product_to_cart(self, product_id, product_name, quantity):
        # Upstream neither validates nor stores the addition.
        return {"status": "success", "message": f"{quantity} of {product_id} added to cart."}

    def search_products_in_shopping_manager(self, query):
        if isinstance(query, list):
            picked = [i for item in query for i in top_indices(self._index.scores(item.split()), TOP_PER_ITEM)]
        else:
            picked = top_indices(self._index.scores(query.split()), TOP_FOR_TEXT)
        if not picked:
            return {"status": f"No products found for '{query}'", "products": []}
        return {"status": "success", "products": [dict(self._products[i]) for i in picked]}

    def view_cart_in_shopping_manager(self):
        # A bare list, without upstream's usual status wrapper.
        return records(self._env.data.table(self._env.user, "cart"))
