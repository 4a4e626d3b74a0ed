"""Builds the payload the helpdesk connector delivers for a support ticket.

build() opens a ticket for a known customer and returns the payload; whatever
it puts into ``context`` is bound as ``context`` in the case's expressions.
cleanup() closes the ticket again and fails the run when the agent's reply
does not name the customer's order.
"""

import json
import zlib

OPEN_TICKETS: dict[str, dict] = {}


def build(context: dict, builder_args: dict, test_name: str, payload: str | None, files: list[str]) -> dict:
    customer_id = builder_args["customer_id"]
    ticket_id = f"T-{zlib.crc32(test_name.encode()) % 100000:05d}"
    OPEN_TICKETS[ticket_id] = {"customer_id": customer_id, "status": "open"}
    context.update(ticket_id=ticket_id, customer_id=customer_id, order_id=builder_args["order_id"])
    return {
        "message": builder_args["message"],
        "customer_id": customer_id,
        "ticket_id": ticket_id,
        "channel": "email",
    }


def cleanup(run: dict, context: dict, builder_args: dict) -> bool:
    OPEN_TICKETS.pop(context["ticket_id"], None)
    try:
        reply = json.loads(run["output"] or "{}")
    except ValueError:
        return False
    return reply.get("order_id") == context["order_id"]
