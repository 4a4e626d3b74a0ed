"""Catalog tools: search the product catalog (an in-memory stand-in for the shop's search API)."""

from __future__ import annotations

from typing import Any

PRODUCTS: list[dict[str, Any]] = [
    {"sku": "SKU-HP-200", "name": "Aria Wireless Headphones", "category": "headphones",
     "price": 89.90, "stock": 12, "tags": ["wireless", "bluetooth", "over-ear"]},
    {"sku": "SKU-HP-310", "name": "Aria Pro ANC Headphones", "category": "headphones",
     "price": 249.00, "stock": 0, "tags": ["wireless", "noise cancelling", "over-ear"]},
    {"sku": "SKU-HP-120", "name": "Studio Wired Headphones", "category": "headphones",
     "price": 59.00, "stock": 4, "tags": ["wired", "over-ear"]},
    {"sku": "SKU-EB-100", "name": "Pulse Earbuds", "category": "earbuds",
     "price": 34.50, "stock": 30, "tags": ["wireless", "in-ear"]},
    {"sku": "SKU-MS-050", "name": "Ergonomic Mouse", "category": "accessories",
     "price": 59.90, "stock": 8, "tags": ["wireless", "mouse"]},
]


def search_products(query: str, in_stock_only: bool = True, max_results: int = 5) -> list[dict[str, Any]]:
    """Search the product catalog.

    Args:
        query: Words to search for in product names, categories and tags, e.g. "wireless headphones".
        in_stock_only: Only return products that can ship today.
        max_results: The maximum number of products to return.

    Returns:
        Products matching every word (sku, name, price, stock), cheapest first.
    """
    words = [w for w in query.lower().split() if w]
    found = []
    for product in PRODUCTS:
        if in_stock_only and product["stock"] <= 0:
            continue
        text = " ".join([product["name"], product["category"], *product["tags"]]).lower()
        if words and all(w in text for w in words):
            found.append(product)
    found.sort(key=lambda p: p["price"])
    return [{"sku": p["sku"], "name": p["name"], "price": p["price"], "stock": p["stock"]} for p in found[:max_results]]
