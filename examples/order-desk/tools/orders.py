"""Order tools of the order desk: look up orders and issue refunds.

The data is an in-memory stand-in for the shop's order service, so the example
runs anywhere without credentials. In a real project these functions would call
the order API and the payment provider.
"""

from __future__ import annotations

import uuid
from typing import Any

ORDERS: dict[str, dict[str, Any]] = {
    "A-1001": {
        "order_id": "A-1001",
        "customer_id": "C-100",
        "status": "shipped",
        "carrier": "DHL",
        "tracking_number": "JD014600003828",
        "estimated_delivery": "2026-03-19",
        "currency": "EUR",
        "total": 89.90,
        "items": [{"sku": "SKU-HP-200", "name": "Aria Wireless Headphones", "quantity": 1, "price": 89.90}],
    },
    "A-1002": {
        "order_id": "A-1002",
        "customer_id": "C-100",
        "status": "delivered",
        "carrier": "UPS",
        "tracking_number": "1Z999AA10123456784",
        "estimated_delivery": "2026-03-10",
        "currency": "EUR",
        "total": 59.90,
        "items": [{"sku": "SKU-MS-050", "name": "Ergonomic Mouse", "quantity": 1, "price": 59.90}],
    },
    "A-1003": {
        "order_id": "A-1003",
        "customer_id": "C-200",
        "status": "delivered",
        "carrier": "DHL",
        "tracking_number": "JD014600007311",
        "estimated_delivery": "2026-03-08",
        "currency": "EUR",
        "total": 249.00,
        "items": [{"sku": "SKU-HP-310", "name": "Aria Pro ANC Headphones", "quantity": 1, "price": 249.00}],
    },
    "A-1004": {
        "order_id": "A-1004",
        "customer_id": "C-300",
        "status": "processing",
        "carrier": None,
        "tracking_number": None,
        "estimated_delivery": "2026-03-24",
        "currency": "EUR",
        "total": 34.50,
        "items": [{"sku": "SKU-EB-100", "name": "Pulse Earbuds", "quantity": 1, "price": 34.50}],
    },
}

REFUNDABLE_STATUSES = ("shipped", "delivered")


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up one order by its id.

    Args:
        order_id: The order id, for example "A-1001".

    Returns:
        The order with status, carrier, tracking number, items and total,
        or an error when there is no such order.
    """
    order = ORDERS.get(order_id.strip().upper())
    if order is None:
        return {"error": f"order {order_id} not found"}
    return dict(order)


def list_orders(customer_id: str, limit: int = 5) -> list[dict[str, Any]]:
    """List a customer's most recent orders.

    Args:
        customer_id: The customer id, for example "C-100".
        limit: How many orders to return at most.

    Returns:
        Order summaries (id, status, total), newest first.
    """
    found = [o for o in ORDERS.values() if o["customer_id"] == customer_id]
    found.sort(key=lambda o: o["order_id"], reverse=True)
    return [{"order_id": o["order_id"], "status": o["status"], "total": o["total"]} for o in found[:limit]]


def refund_order(order_id: str, amount: float, reason: str) -> dict[str, Any]:
    """Refund (part of) an order through the payment provider.

    Args:
        order_id: The order to refund.
        amount: The amount to refund, in the order's currency.
        reason: Why the customer gets a refund (shown on the credit note).

    Returns:
        The refund with its id and status.
    """
    order = ORDERS.get(order_id)
    if order is None:
        raise ValueError(f"order {order_id} not found")
    if order["status"] not in REFUNDABLE_STATUSES:
        raise ValueError(f"order {order_id} is {order['status']}; cancel it instead of refunding")
    if amount <= 0 or amount > order["total"]:
        raise ValueError(f"refund amount {amount:.2f} must be between 0 and the order total {order['total']:.2f}")
    return {
        "refund_id": f"RF-{uuid.uuid4().hex[:8].upper()}",
        "order_id": order_id,
        "amount": round(amount, 2),
        "currency": order["currency"],
        "reason": reason,
        "status": "issued",
    }
