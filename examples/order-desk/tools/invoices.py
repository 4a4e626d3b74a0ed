"""Invoice parsing: turns a plain-text invoice into structured data (the body of the invoice-parser tool agent)."""

from __future__ import annotations

import base64
import re
from typing import Any

_FIELD = re.compile(r"^(?P<key>[A-Za-z ]+?)\s*(?:\d+%)?\s*:\s*(?P<value>.+)$")
_LINE = re.compile(r"^(?P<qty>\d+)\s*x\s+(?P<desc>.+?)\s*@\s*(?P<price>\d+(?:\.\d+)?)$")


def _invoice_text(payload: dict[str, Any]) -> str:
    """The invoice text: ``payload["text"]``, or the first attached text file."""
    if isinstance(payload.get("text"), str) and payload["text"].strip():
        return str(payload["text"])
    for attachment in payload.get("files") or []:
        if str(attachment.get("mime_type", "")).startswith("text/"):
            return base64.b64decode(attachment["data"]).decode("utf-8")
    raise ValueError("no invoice text: attach a .txt invoice or send it as payload.text")


def parse_invoice(payload: dict, context: dict) -> dict[str, Any]:
    """Parse a plain-text invoice into header fields, line items and totals.

    Args:
        payload: The run's payload: ``text`` with the invoice, or an attached text file in ``files``.
        context: The run context (receives ``invoice_number`` for later middleware and logs).

    Returns:
        invoice_number, vendor, date, currency, line_items, subtotal, tax, total,
        valid (whether the stated total matches the line items) and errors.
    """
    lines = [line.strip() for line in _invoice_text(payload).splitlines() if line.strip()]
    fields: dict[str, str] = {}
    items: list[dict[str, Any]] = []
    for line in lines:
        item = _LINE.match(line)
        if item:
            quantity, price = int(item["qty"]), float(item["price"])
            items.append({"description": item["desc"], "quantity": quantity, "unit_price": price,
                          "amount": round(quantity * price, 2)})
            continue
        field = _FIELD.match(line)
        if field:
            fields[field["key"].strip().lower()] = field["value"].strip()
    subtotal = round(sum(i["amount"] for i in items), 2)
    tax = float(fields.get("vat", 0) or 0)
    total = float(fields.get("total", 0) or 0)
    errors = []
    if "invoice" not in fields:
        errors.append("missing invoice number")
    if abs(subtotal + tax - total) > 0.01:
        errors.append(f"total {total:.2f} does not match subtotal {subtotal:.2f} + tax {tax:.2f}")
    invoice_number = fields.get("invoice")
    context["invoice_number"] = invoice_number
    return {
        "invoice_number": invoice_number,
        "vendor": lines[0] if lines else None,
        "date": fields.get("date"),
        "currency": fields.get("currency", "EUR"),
        "line_items": items,
        "subtotal": subtotal,
        "tax": tax,
        "total": total,
        "valid": not errors,
        "errors": errors,
    }
