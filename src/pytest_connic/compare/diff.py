"""The diffs a comparison shows: word-level for text, key-level for JSON, and a tool-call
sequence diff. Each is plain data (lists of operations), rendered by ``render.py`` and ``html.py``."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence

from pytest_connic.jsonsafe import parse_json

#: a word, a run of white space, or one other character
_TOKENS = re.compile(r"\s+|\w+|[^\w\s]")
#: unchanged words kept on each side of a change; a longer unchanged stretch is elided as `…`
CONTEXT_WORDS = 8
#: keys shown of a key-level diff
MAX_KEYS = 50

#: an operation: ``=`` unchanged, ``-`` only in the reference, ``+`` only in the subject, ``…`` elided
Op = list[str]


def words(text: str) -> list[str]:
    return _TOKENS.findall(text)


def word_diff(before: str, after: str) -> list[Op]:
    """``[[op, text], ...]`` turning ``before`` into ``after``, word by word; long unchanged
    stretches are elided (``["…", ""]``)."""
    a, b = words(before), words(after)
    ops: list[Op] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            ops.append(["=", "".join(a[i1:i2])])
            continue
        if i2 > i1:
            ops.append(["-", "".join(a[i1:i2])])
        if j2 > j1:
            ops.append(["+", "".join(b[j1:j2])])
    return _elided(ops)


def _elided(ops: list[Op]) -> list[Op]:
    out: list[Op] = []
    for i, (op, text) in enumerate(ops):
        if op != "=":
            out.append([op, text])
            continue
        parts = words(text)
        keep = CONTEXT_WORDS * 2  # words and the spaces between them
        head = parts[:keep] if i > 0 else []
        tail = parts[-keep:] if i < len(ops) - 1 else []
        if len(parts) <= len(head) + len(tail) + 2:
            out.append(["=", text])
            continue
        if head:
            out.append(["=", "".join(head)])
        out.append(["…", ""])
        if tail:
            out.append(["=", "".join(tail)])
    return out


def _flat(value: object, path: str, into: dict[str, object]) -> None:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _flat(item, f"{path}.{key}" if path else str(key), into)
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            _flat(item, f"{path}[{index}]", into)
    else:
        into[path or "(value)"] = value


def key_diff(before: object, after: object) -> list[dict[str, object]]:
    """The leaves of two JSON values that differ: ``[{path, before, after}]`` (``before`` or
    ``after`` absent for a key only on one side)."""
    a: dict[str, object] = {}
    b: dict[str, object] = {}
    _flat(before, "", a)
    _flat(after, "", b)
    found = []
    for path in sorted(a.keys() | b.keys()):
        if a.get(path, _MISSING) == b.get(path, _MISSING):
            continue
        entry: dict[str, object] = {"path": path}
        if path in a:
            entry["before"] = a[path]
        if path in b:
            entry["after"] = b[path]
        found.append(entry)
    return found[:MAX_KEYS]


_MISSING = object()


def output_diff(before: object, after: object) -> dict[str, object] | None:
    """How a run's output changed: ``{"kind": "json", "keys": [...]}`` when both are JSON objects
    or arrays, else ``{"kind": "text", "words": [...]}``; None when they are equal."""
    if before == after:
        return None
    a, b = parse_json(before), parse_json(after)
    if isinstance(a, (dict, list)) and isinstance(b, (dict, list)):
        keys = key_diff(a, b)
        return {"kind": "json", "keys": keys} if keys else None
    return {"kind": "text", "words": word_diff(_text(before), _text(after))}


def _text(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def call_text(call: dict[str, object]) -> str:
    """``name(args) → result`` (or ``→ error: ...``), with its approval and abort marks."""
    text = f"{call.get('name')}({call.get('args') or ''})"
    if call.get("error"):
        text += f" → error: {call['error']}"
    elif call.get("result") is not None:
        text += f" → {call['result']}"
    marks = [f"approval: {call['approval']}"] if call.get("approval") else []
    if call.get("aborted"):
        marks.append("aborted")
    return text + (f" [{', '.join(marks)}]" if marks else "")


def tool_diff(before: Sequence[dict[str, object]], after: Sequence[dict[str, object]]) -> list[Op]:
    """The tool-call sequences' diff, call by call (``=`` for an unchanged call); [] when equal."""
    a, b = [call_text(c) for c in before], [call_text(c) for c in after]
    if a == b:
        return []
    ops: list[Op] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            ops += [["=", t] for t in a[i1:i2]]
            continue
        ops += [["-", t] for t in a[i1:i2]]
        ops += [["+", t] for t in b[j1:j2]]
    return ops
