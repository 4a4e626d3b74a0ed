"""What the tests of ``api:`` tools share (the billing API's spec, its desk suite and tool hooks are
the equivalence session's: ``helpers.equivalence.BILLING_SPEC``, ``DESK_SUITE``, ``DESK_HOOKS``): a
tiny billing API on 127.0.0.1 that keeps the headers of every request, and the fake model that
asks for an invoice."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

from helpers.fake_provider import Reply, text, tool_call
from helpers.network import LocalHttpServer, send

KEY = "sk-test-DONOTLEAK-1234567890"
TOKEN = "billing-token-DONOTLEAK-42"
FAST_RETRIES = {"attempts": 2, "initial_delay": 0, "max_delay": 1}


class BillingApi(LocalHttpServer):
    """A tiny billing API; keeps the headers of every request it received."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                api.requests.append(("GET", self.path, {k.lower(): v for k, v in self.headers.items()}))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._send(401, {"error": "unauthorized"})
                if self.path == "/v1/invoices/inv_1":
                    return self._send(200, {"id": "inv_1", "amount": 120})
                return self._send(404, {"error": f"no such invoice: {self.path}"})

            def _send(self, status: int, body: Any) -> None:
                send(self, status, json.dumps(body).encode(), "application/json")

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)


def answer_with_tool_result(body: dict[str, Any]) -> Reply:
    """The fake model: ask for the invoice, then answer with what the tool returned."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return text(last["content"])
    return tool_call("invoice_get", {"id": "inv_1"})
