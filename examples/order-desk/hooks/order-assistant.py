"""Tool hooks of the order-assistant agent."""

from connic import AbortTool

#: refunds above this amount (EUR) are never issued by the agent; a human reviews them
AUTO_REFUND_LIMIT = 200.0


def before(tool_name: str, params: dict, context: dict) -> dict | None:
    """Normalise order ids the model passes (" a-1001" -> "A-1001") and stop large refunds."""
    changes = {}
    if isinstance(params.get("order_id"), str):
        changes["order_id"] = params["order_id"].strip().upper()
    if tool_name == "refund_order" and float(params.get("amount") or 0) > AUTO_REFUND_LIMIT:
        raise AbortTool({
            "status": "needs_review",
            "message": f"Refunds above {AUTO_REFUND_LIMIT:.0f} EUR need a human; the request was queued for review.",
        })
    return changes or None
