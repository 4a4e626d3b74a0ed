"""Payloads as Connic delivers them (https://connic.co/docs/v1/test/fixtures-and-mocks)."""

from __future__ import annotations

import base64
import json
import mimetypes
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_connic.errors import ConnicError
from pytest_connic.jsonsafe import json_text, parse_json

#: ``parse_json`` is re-exported for checks/evaluate.py until it imports it from jsonsafe
__all__ = ["FilesError", "content_parts", "deliver", "is_attachments", "load_fixtures", "message_text",
           "parse_json", "tool_agent_payload"]


class FilesError(ConnicError):
    """A ``files:`` entry (``tests/files/<name>``) is missing or unreadable: the case fails before any run."""


def load_fixtures(project_root: Path, names: list[str]) -> list[dict[str, str]]:
    """Read ``tests/files/<name>`` for each name: ``{data: base64, mime_type, name}``."""
    base = project_root / "tests" / "files"
    files_dir = base.resolve()
    out = []
    for name in names:
        link = next((p for p in (base / name, base, base.parent) if p.is_symlink()), None)
        if link is not None:  # checked first: a link to /etc/passwd must not read as "missing"
            where = link.relative_to(project_root).as_posix()
            raise FilesError(f"fixture tests/files/{name}: {where} is a symbolic link; Connic refuses links")
        path = (files_dir / name).resolve()
        hidden = name.startswith(".")
        if hidden or not path.is_relative_to(files_dir) or not path.is_file():
            why = " (hidden files are never uploaded to Connic)" if hidden and path.is_file() else ""
            raise FilesError(f"missing fixture: tests/files/{name} does not exist{why}")
        if path.is_symlink() or (files_dir / name).is_symlink():
            raise FilesError(f"fixture tests/files/{name} is a symbolic link; Connic refuses links")
        mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
        out.append({"data": base64.b64encode(path.read_bytes()).decode("ascii"), "mime_type": mime, "name": name})
    return out


def deliver(payload: object, files: Sequence[object]) -> dict[str, object]:
    """The delivered payload (``context["payload"]``): a JSON object's keys, else
    ``{message: <string>}``; attached files sit next to them under ``files``."""
    value = parse_json(payload) if isinstance(payload, str) else payload
    if isinstance(value, dict):
        delivered = dict(value)
    elif isinstance(payload, str):
        delivered = {"message": payload}
    elif payload is None:
        delivered = {"message": ""}
    else:
        delivered = {"message": json.dumps(payload, default=str)}
    if files:
        existing = delivered.get("files")
        delivered["files"] = [*(existing if isinstance(existing, list) else []), *files]
    return delivered


def is_attachments(value: object) -> bool:
    """Whether ``value`` is a ``files`` list of attachments (``{data, mime_type[, name]}`` entries)."""
    return isinstance(value, list) and all(isinstance(f, dict) and "data" in f for f in value)


def message_text(delivered: Mapping[str, object]) -> str:
    """What the model reads: a ``{message[, files]}`` payload is its message text;
    anything richer is JSON text without the attached ``files`` (they travel as binary
    parts). A ``files`` key that holds something else is ordinary data and stays."""
    rest = {k: v for k, v in delivered.items() if k != "files" or not is_attachments(v)}
    if set(rest) == {"message"} and isinstance(rest["message"], str):
        return rest["message"]
    return json_text(rest)  # a builder's payload may hold a cycle, a huge int, ...


def content_parts(delivered: Mapping[str, object]) -> dict[str, object]:
    """The user content middleware ``before`` receives: ``{role, parts}`` with text and binary parts."""
    parts: list[dict[str, object]] = [{"text": message_text(delivered)}]
    files = delivered.get("files")
    for entry in files if isinstance(files, (list, tuple)) else []:
        if isinstance(entry, dict) and "data" in entry:
            try:
                data = base64.b64decode(entry["data"])
            except (ValueError, TypeError):
                data = str(entry["data"]).encode()
            parts.append({"data": data, "mime_type": entry.get("mime_type", "application/octet-stream")})
    return {"role": "user", "parts": parts}


def tool_agent_payload(delivered: dict[str, object], original: object) -> dict[str, object]:
    """The ``payload=`` argument of a tool agent's body: a JSON object as-is, other
    decoded JSON values as ``{"input": value}``, plain text as ``{"message": text}``."""
    value = parse_json(original) if isinstance(original, str) else original
    if isinstance(value, dict):
        return delivered
    if isinstance(original, str) and value is original:
        return delivered
    wrapped: dict[str, object] = {"input": value}
    if delivered.get("files"):
        wrapped["files"] = delivered["files"]
    return wrapped
