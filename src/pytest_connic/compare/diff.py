"""The diffs a comparison shows: word-level for text, key-level for JSON, and a tool-call
sequence diff. Each is plain data (lists of operations), rendered by ``render.py`` and ``html.py``."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence

from pytest_connic.jsonsafe import JsonBoundsError, depth_exceeds, load_bounded

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
    stretches are elided (``["…", ""]``). Linear in the words but for the stretch between the
    common start and end, which is matched word by word only while that stays cheap
    (:data:`MAX_PAIRS`), else shown as one change."""
    return _elided([[op, "".join(items)] for op, items in _sequence_ops(words(before), words(after))])


#: the most word pairs (words before × words after, between the common start and end) matched
#: word by word: difflib's matching costs up to their product, and more
MAX_PAIRS = 250_000


def _sequence_ops(a: Sequence[str], b: Sequence[str]) -> list[tuple[str, Sequence[str]]]:
    """``(op, items)`` turning ``a`` into ``b``: the common start and end found in linear time,
    the middle matched by difflib while it has at most ``MAX_PAIRS`` pairs, else one removal and
    one addition."""
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    mid_a, mid_b = a[start:len(a) - end], b[start:len(b) - end]
    ops: list[tuple[str, Sequence[str]]] = [("=", a[:start])] if start else []
    opcodes: Sequence[tuple[str, int, int, int, int]]
    if len(mid_a) * len(mid_b) > MAX_PAIRS:
        opcodes = [("replace", 0, len(mid_a), 0, len(mid_b))]
    else:
        opcodes = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            ops.append(("=", mid_a[i1:i2]))
            continue
        if i2 > i1:
            ops.append(("-", mid_a[i1:i2]))
        if j2 > j1:
            ops.append(("+", mid_b[j1:j2]))
    if end:
        ops.append(("=", a[len(a) - end:]))
    return ops


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
    a, b = _json_of(before), _json_of(after)
    if isinstance(a, (dict, list)) and isinstance(b, (dict, list)):
        keys = key_diff(a, b)
        return {"kind": "json", "keys": keys} if keys else None
    return {"kind": "text", "words": word_diff(_text(before), _text(after))}


def _json_of(value: object) -> object:
    """The JSON value a text output holds (read with a bound on its depth, so a key diff never
    recurses past it), else the output itself."""
    if not isinstance(value, str):
        return value if not depth_exceeds(value, MAX_JSON_DEPTH) else None
    try:
        return load_bounded(value, max_depth=MAX_JSON_DEPTH)
    except JsonBoundsError:
        return value


#: the deepest JSON output compared key by key (deeper ones are compared as text)
MAX_JSON_DEPTH = 100


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
    for op, calls in _sequence_ops(a, b):
        ops += [[op, call] for call in calls]
    return ops
