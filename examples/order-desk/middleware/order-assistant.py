"""Middleware of the order-assistant agent."""

import json

from connic import StopProcessing


async def before(content: dict, context: dict) -> dict:
    """Reject empty messages before they cost a model call; remember the channel for the prompt."""
    payload = context.get("payload") or {}
    message = str(payload.get("message") or "").strip()
    if not message:
        raise StopProcessing(json.dumps({
            "status": "rejected",
            "reason": "empty_message",
            "reply": "It looks like your message was empty. How can we help?",
        }))
    context["channel"] = payload.get("channel") or "chat"
    context["customer_id"] = payload.get("customer_id")
    return content
