"""The divergence note of a replayed request: what differs, and the matching rule that would
ignore it.

A cassette keeps only digests of the recorded request, never its text, so the note cannot quote
what was recorded. It names the part that differs (the message, its index and role) and reads
the text sent now: a value that changes from run to run (a UUID, an ISO timestamp) is named, and
the note shows a ready-to-paste ``match:`` entry whose regular expression covers that kind of
value; otherwise the entry that would leave the message's content out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pytest_connic.models.base import ModelRequest
from pytest_connic.models.digest import first_difference, message_digest
from pytest_connic.models.matching import MatchRule, normalise

#: values that change from run to run: (what they are, their regular expression, a placeholder)
VOLATILE = (
    ("a UUID", r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "<uuid>"),
    ("an ISO timestamp",
     r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?", "<timestamp>"),
    ("an ISO date", r"\d{4}-\d{2}-\d{2}", "<date>"),
)
_SHOWN = 60


def explain(recorded: Mapping[str, object], request: ModelRequest, rules: Sequence[MatchRule] = ()) -> str | None:
    """Where ``request`` (normalised by ``rules``) departs from the ``recorded`` fingerprint, with
    the rule that would ignore it; None when it matches."""
    normal = normalise(request, rules)
    difference = first_difference(recorded, normal)
    if difference is None:
        return None
    index = _first_differing_message(recorded, normal)
    if index is None:
        return difference
    return difference + _hint(index, request, normal)


def _first_differing_message(recorded: Mapping[str, object], request: ModelRequest) -> int | None:
    digests = recorded.get("messages")
    if not isinstance(digests, list) or recorded.get("system") not in (None, _system(request)):
        return None
    for index, (old, new) in enumerate(zip(digests, request.messages)):
        if old != message_digest(new):
            return index
    return None


def _system(request: ModelRequest) -> str:
    from pytest_connic.models.digest import SHORT, sha256

    return sha256(request.system_prompt)[:SHORT]


def _hint(index: int, raw: ModelRequest, normal: ModelRequest) -> str:
    message, changed = raw.messages[index], normal.messages[index] != raw.messages[index]
    text = _text_of(message)
    content = message.get("content")
    if message.get("role") == "tool" and isinstance(content, str) and content.startswith("Error: "):
        # the tool (or its hook, or its mock) raised now: the cause to fix, never a part to ignore
        first = content.splitlines()[0][len("Error: "):]
        return (f": the call of {message.get('name') or 'a tool'} now ends in an error the model reads "
                f"({_quote(first)}); the case's trace shows where it was raised (--connic-json, or the case's report under -W error)")
    for what, pattern, placeholder in VOLATILE:
        found = re.search(pattern, text)
        if found is None or (changed and placeholder in _text_of(normal.messages[index])):
            continue
        rule = "{replace: '" + pattern.replace("'", "''") + f"', with: '{placeholder}'}}"
        return (f": its text holds {what} ({_quote(found.group())}), which changes from run to run; "
                f"to leave it out of the comparison, add `match: [{rule}]` to the cassette (or the line "
                f"`{rule}` to the ini connic_match_rules), then refresh the digests with "
                "--connic-record-mode=digests (docs/models.md, \"Matching rules\")")
    if changed:
        return ("; the match rules changed this message before it was compared: digests recorded before "
                "a rule was added do not know it, refresh them with --connic-record-mode=digests")
    where = f"messages[{index}].content"
    return (f": to leave its content out of the comparison, add `match: [{{ignore: '{where}'}}]` to the "
            "cassette (docs/models.md, \"Matching rules\")")


def _text_of(value: object) -> str:
    """Every string of a message, joined (content, content parts, tool-call arguments)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return "\n".join(_text_of(v) for k, v in value.items() if k != "tool_call_id")
    if isinstance(value, list):
        return "\n".join(_text_of(v) for v in value)
    return ""


def _quote(value: str) -> str:
    return repr(value if len(value) <= _SHOWN else value[: _SHOWN - 3] + "...")
