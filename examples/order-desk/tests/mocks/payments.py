"""Mocks for cases that must not move money.

``mock_orders_refund_order`` replaces the tool ``orders.refund_order`` (the most
specific name of the ladder mock_orders_refund_order -> mock_orders -> mock).
The agent's arguments are still checked against the real tool's signature.
"""


def mock_orders_refund_order(tool_name: str, params: dict, context: dict) -> dict:
    return {
        "refund_id": "RF-TEST-0001",
        "order_id": params["order_id"],
        "amount": params["amount"],
        "currency": "EUR",
        "reason": params["reason"],
        "status": "issued",
    }
