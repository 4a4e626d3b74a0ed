"""Where a replayed request departs from its recording, and what to show of it.

``find`` compares a request (normalised as its recording was: the matching rules, then the
volatile values of ``models/volatile.py``) with the recorded ``request`` section and returns a
:class:`Divergence`: the part that differs (the model, the system prompt, a message, the tools,
the output schema), the message's role and tool, and, where the recording kept the text, a short
diff of what was recorded against what is sent now. Placeholders (``<uuid-1>``, ``<time>``) stand
where volatile values were, so a diff never quotes a value that replays identically.

The runtime (``runtime/divergence.py``) turns a divergence into the user's terms (the tool that
now raises, the child that failed, the mock that answers otherwise); this module knows only the
request.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pytest_connic.models.base import CassetteError, ModelRequest
from pytest_connic.models.digest import SHORT, first_difference, message_digest, sha256
from pytest_connic.models.fingerprint import Normalised, content_text, full_digest, kinds_of

#: values that change from run to run and the built-in kinds do not cover (a recording of an older
#: version has none): (what they are, their regular expression, a placeholder)
VOLATILE = (
    ("a UUID", r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "<uuid>"),
    ("an ISO timestamp",
     r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?", "<timestamp>"),
)
_SHOWN = 60
_DIFF_ITEMS = 3
#: the text a recording kept of message ``at`` of this invocation (None: not kept)
TextOf = Callable[[int], str | None]


@dataclass
class Divergence:
    """How a replayed request differs from its recording."""

    summary: str  #: the part that differs, as the digests tell it ("message 2 (tool) differs")
    part: str  #: model | system | message | added | fewer | tools | schema | request
    index: int | None = None  #: the message's index in the request
    role: str | None = None
    name: str | None = None  #: a tool message's tool
    diff: str | None = None  #: recorded against now (None: the recording kept no text of it)
    #: the recording predates the kept text and volatile values (digests only)
    legacy: bool = False
    #: a matching rule that would leave a volatile-looking value out (None: none suggested)
    rule: str | None = None

    def text(self) -> str:
        """The divergence in one phrase: what differs, and how."""
        if self.diff:
            return f"{self.summary}: {self.diff}"
        return self.summary


class ReplayDiverged(CassetteError):
    """A replayed request differs from its recording (after the matching rules): the recorded
    answers no longer apply, so the run fails (``connic_replay = strict``, the default)."""

    def __init__(self, message: str, divergence: Divergence, where: str) -> None:
        super().__init__(message)
        self.divergence = divergence
        #: the turn whose recorded request differs: ``cassettes/x.yaml: runs[0].turns[1]``
        self.where = where


def find(recorded: Mapping[str, object], normal: Normalised, raw: ModelRequest,
         text_of: TextOf = lambda _at: None) -> Divergence | None:
    """The divergence of ``normal`` (the request as its recording was normalised; ``raw`` as sent)
    from the ``recorded`` section; None when it matches. ``text_of(at)``: the text the recording
    kept of message ``at``."""
    request = normal.request
    versioned = kinds_of(recorded) is not None
    if recorded.get("digest") == full_digest(request, versioned=versioned):
        return None
    summary = first_difference(recorded, request)
    generic = summary in (None, "the request differs from the recorded one")
    if generic and "digest" not in recorded:  # a hand-written section: only the parts it has count
        return None
    if summary is None:  # every part matched: only the whole digest tells (an edited cassette)
        summary = "the request differs from the recorded one"
    schema = recorded.get("schema")
    if summary == "the request differs from the recorded one" and versioned:
        now_schema = sha256(request.output_schema)[:SHORT] if request.output_schema is not None else None
        if schema != now_schema:
            return Divergence("the output schema differs", "schema", legacy=not versioned)
    divergence = Divergence(summary, _part(summary), legacy=not versioned)
    if divergence.part == "system":
        system = recorded.get("text")
        old = system.get("system") if isinstance(system, Mapping) else None
        divergence.diff = _diff(old, request.system_prompt) if isinstance(old, str) else None
        return divergence
    index = _message_index(recorded, request, divergence.part)
    if index is None:
        return divergence
    message = request.messages[index]
    divergence.index, divergence.role = index, str(message.get("role", "?"))
    divergence.name = str(message["name"]) if message.get("name") else None
    old = text_of(index)
    now = content_text(message)
    if old is not None and divergence.part == "message":
        divergence.diff = _diff(old, now)
    elif divergence.part == "added":
        divergence.diff = f"now {_quote(now)}" if now else None
    divergence.rule = _rule(old, now)
    return divergence


def _part(summary: str) -> str:
    for prefix, part in (("model", "model"), ("system", "system"), ("tools", "tools")):
        if summary.startswith(prefix):
            return part
    if summary.startswith("message") and summary.endswith("differs"):
        return "message"
    if " is new" in summary:
        return "added"
    if "fewer than recorded" in summary:
        return "fewer"
    return "request"


def _message_index(recorded: Mapping[str, object], request: ModelRequest, part: str) -> int | None:
    digests = recorded.get("messages")
    if not isinstance(digests, list):
        return None
    if part == "added":
        return len(digests) if len(digests) < len(request.messages) else None
    if part != "message":
        return None
    for index, (old, new) in enumerate(zip(digests, request.messages)):
        if old != message_digest(new):
            return index
    return None


# -- what differs, shown short ---------------------------------------------------


def _diff(old: str | None, new: str) -> str | None:
    """A short diff of two texts: changed keys of JSON data, else the changed words."""
    if old is None:
        return None
    if old == new:  # the digests differ beyond what the recording kept (it cuts long texts)
        return "the first 2,000 characters are the same as recorded; the difference is after them"
    data = _json_diff(old, new)
    if data is not None:
        return data
    return _word_diff(old, new)


def _json_diff(old: str, new: str) -> str | None:
    try:
        before, after = json.loads(old), json.loads(new)
    except (ValueError, RecursionError):
        return None
    if not isinstance(before, (dict, list)) or not isinstance(after, (dict, list)):
        return None
    flat_before, flat_after = _flatten(before), _flatten(after)
    changes = []
    for path in dict.fromkeys([*flat_before, *flat_after]):
        if path not in flat_after:
            changes.append(f"{path} removed (was {_value(flat_before[path])})")
        elif path not in flat_before:
            changes.append(f"{path} added ({_value(flat_after[path])})")
        elif flat_before[path] != flat_after[path]:
            changes.append(f"{path} {_value(flat_before[path])} → {_value(flat_after[path])}")
    if not changes:
        return None
    more = f" and {len(changes) - _DIFF_ITEMS} more change(s)" if len(changes) > _DIFF_ITEMS else ""
    return "; ".join(changes[:_DIFF_ITEMS]) + more


def _flatten(value: object, path: str = "", depth: int = 0) -> dict[str, object]:
    if depth > 20 or not isinstance(value, (dict, list)) or not value:
        return {path or "(the value)": value}
    items = value.items() if isinstance(value, dict) else enumerate(value)
    out: dict[str, object] = {}
    for key, item in items:
        sub = f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))
        out.update(_flatten(item, sub, depth + 1))
    return out


def _value(value: object) -> str:
    return _cut(json.dumps(value, ensure_ascii=False, default=str))


_TOKEN = re.compile(r"\s+|[^\s]+")


def _word_diff(old: str, new: str) -> str:
    before, after = _TOKEN.findall(old), _TOKEN.findall(new)
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    spans = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        was, now = "".join(before[i1:i2]).strip(), "".join(after[j1:j2]).strip()
        context = "".join(before[max(0, i1 - 6):i1]).lstrip()
        shown = f"[-{_cut(was)}-]" if was else ""
        shown += f"{{+{_cut(now)}+}}" if now else ""
        spans.append(f"…{_cut(context, 30)}{shown}" if context else shown)
        if len(spans) == _DIFF_ITEMS:
            break
    return "recorded → now: " + " … ".join(spans) if spans else "only its whitespace differs"


def _cut(text: str, limit: int = _SHOWN) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _quote(value: str) -> str:
    return repr(_cut(value))


def _rule(old: str | None, now: str) -> str | None:
    """A matching rule for a volatile-looking value the built-in kinds left in the text (``now``,
    normalised: a time far from the run, a kind left out by ``connic_volatile``): only for a value
    the recording did not have. None for a digest-only recording (nothing tells what changed)."""
    if old is None:
        return None
    for what, pattern, placeholder in VOLATILE:
        changed = [m.group() for m in re.finditer(pattern, now) if m.group() not in old]
        if not changed:
            continue
        rule = "{replace: '" + pattern.replace("'", "''") + f"', with: '{placeholder}'}}"
        return (f"its text holds {what} ({_quote(changed[0])}) that the recording did not have; if it changes "
                f"from run to run, add `match: [{rule}]` to the cassette (or the line `{rule}` to the ini "
                "connic_match_rules) and refresh the digests with --connic-record-mode=digests "
                "(docs/models.md, \"Matching rules\")")
    return None


def texts_by_index(sections: Sequence[Mapping[str, object] | None]) -> TextOf:
    """``text_of`` over the recorded sections of an invocation's turns up to the one replayed."""
    kept: dict[int, str] = {}
    for recorded in sections:
        text = recorded.get("text") if recorded is not None else None
        messages = text.get("messages") if isinstance(text, Mapping) else None
        for entry in messages if isinstance(messages, list) else []:
            if isinstance(entry, Mapping) and isinstance(entry.get("at"), int) and isinstance(entry.get("content"), str):
                kept[int(entry["at"])] = str(entry["content"])
    return kept.get
