"""What the tests of matching rules share: a shop tool that returns a fresh ``uuid4()`` into the
conversation, its suite, the fake model that asks for it, and the rule that masks a UUID."""

from __future__ import annotations

from typing import Any

from helpers.fake_provider import Reply, text, tool_call

UUID_RULE = ("{replace: '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', "
             "with: '<uuid>'}")
TOOLS = '''
import uuid


def new_order(item: str) -> dict:
    """Place an order.

    Args:
        item: what to order
    """
    return {"order_id": str(uuid.uuid4()), "item": item}
'''
SUITE = """
tests:
  - name: orders
    payload: "one book"
    expected_tool_calls:
      - shop.new_order: params.item == "book"
    expected_result: output.item == "book"
"""


def shop_model(body: dict[str, Any]) -> Reply:
    """Ask for ``new_order``, then answer with what the tool returned."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return text(last["content"])
    return tool_call("new_order", {"item": "book"})
