"""What a recorded turn keeps of the request that produced it: digests, and enough text to say
what changed.

A turn's ``request`` section (docs/models.md, "Replay you can trust")::

    request:
      model: openai/gpt-4o-mini
      digest: 3f1c...              # sha256 over the normalised request
      system: 9a0b1c2d3e4f         # short digests of its parts
      messages: [5e6f..., ...]
      tools: {add: 0c1d..., ...}
      schema: 77aa12bc90de         # the output schema's, when the agent has one
      volatile: [uuid, hex, time]  # the kinds of volatile value replaced before the digests
      text:                        # what the request said, normalised, masked and cut at 2,000
        system: You are ...        #   characters: its system prompt (an invocation's first turn)
        messages:                  #   and the messages it added since the turn before
          - {at: 2, role: tool, name: lookup_order, content: '{"order_id": "A-1002", ...}'}
      echoed: {<uuid-1>: 0f3b...}  # values of the request the answer repeats (a replay puts the
                                   # value that took their place now)

A section with ``volatile`` is normalised by ``models/volatile.py`` (the kinds listed) after the
matching rules; a section without it (recorded by an older version, or written by hand) is
compared as it was recorded: rules only, and no ``text`` to quote.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pytest_connic.models.base import CassetteError, ModelRequest, ModelResponse
from pytest_connic.models.digest import (
    SHORT,
    canonical_message,
    request_digest,
    request_fingerprint,
    sha256,
)
from pytest_connic.models.matching import MatchRule, MatchRuleError, normalise
from pytest_connic.models.volatile import KINDS, Found, Volatile, substitute

#: the longest text a section keeps of one part (its first characters)
TEXT_LIMIT = 2000
#: the most messages one section keeps the text of (the last ones it added)
TEXT_MESSAGES = 20
REQUEST_KEYS = ("model", "digest", "system", "messages", "tools", "schema", "volatile", "text", "echoed")
#: message keys the volatile values are never looked for in (providers invent them)
_ID_KEYS = frozenset({"tool_call_id", "id"})


@dataclass
class Normalised:
    """A request as its digests see it, and the volatile values replaced in it."""

    request: ModelRequest
    found: Found | None


def normalised(request: ModelRequest, rules: Sequence[MatchRule], kinds: Sequence[str] | None,
               start: dt.datetime, mask: Callable[[object], object] | None = None) -> Normalised:
    """``request`` with its secrets masked (``mask``, the session's masker: a cassette's replayed
    answers hold ``***`` where the recording's held a secret), the matching ``rules`` applied, then
    the volatile values of ``kinds`` replaced relative to the run's ``start``. ``kinds`` None: a
    section of an older version, compared as it was recorded (no masking, no volatile values). A
    rule that cannot be applied (it ran past its time) is the case's ``CassetteError``, naming it."""
    if kinds is not None and mask is not None:
        request = dataclasses.replace(request, system_prompt=str(mask(request.system_prompt)),
                                      messages=[dict(m) for m in mask(request.messages)])  # type: ignore[attr-defined]
    try:
        request = normalise(request, rules)
    except MatchRuleError as exc:
        raise CassetteError(str(exc)) from None
    if not kinds:
        return Normalised(request, None)
    volatile = Volatile(kinds, start)
    system = volatile.text(request.system_prompt)
    messages = [_message(volatile, m) for m in request.messages]
    return Normalised(dataclasses.replace(request, system_prompt=system, messages=messages), volatile.found)


def _message(volatile: Volatile, message: Mapping[str, object]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in message.items():
        if key in _ID_KEYS:
            out[key] = value
        elif key == "tool_calls" and isinstance(value, list):
            out[key] = [{k: v if k in _ID_KEYS else volatile.data(v) for k, v in c.items()}
                        if isinstance(c, Mapping) else volatile.data(c) for c in value]
        else:
            out[key] = volatile.data(value)
    return out


def full_digest(request: ModelRequest, *, versioned: bool) -> str:
    """The whole request's digest: a versioned section's covers the output schema too."""
    if not versioned:
        return request_digest(request)
    return sha256([request_digest(request), request.output_schema])


def section(normal: Normalised, kinds: Sequence[str], *, since: int, system: bool,
            response: ModelResponse | None = None) -> dict[str, object]:
    """The ``request`` section of a turn recorded now: ``since`` is how many of the request's
    messages the invocation's turn before already sent, ``system`` whether to keep the system
    prompt's text (an invocation's first turn)."""
    request = normal.request
    out = request_fingerprint(request)
    out["digest"] = full_digest(request, versioned=True)
    if request.output_schema is not None:
        out["schema"] = sha256(request.output_schema)[:SHORT]
    out["volatile"] = list(kinds)
    text: dict[str, object] = {}
    if system and request.system_prompt:
        text["system"] = cut(request.system_prompt)
    added = [{"at": at, **message_text(m)} for at, m in enumerate(request.messages)
             if at >= since and m.get("role") != "assistant"]
    if added:
        text["messages"] = added[-TEXT_MESSAGES:]
    if text:
        out["text"] = text
    echoed = _echoed(normal.found, response)
    if echoed:
        out["echoed"] = echoed
    return out


def message_text(message: Mapping[str, object]) -> dict[str, object]:
    """One message as a section keeps it: its role, the tool's name, its content as text (cut)."""
    out: dict[str, object] = {"role": str(message.get("role", "?"))}
    if message.get("name"):
        out["name"] = str(message["name"])
    out["content"] = cut(content_text(canonical_message(message)))
    return out


def content_text(message: Mapping[str, object]) -> str:
    """What a message says, as one text: its content (the text of its parts, a file by name), then
    the tools it calls."""
    content = message.get("content")
    parts: list[str] = []
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(str(part["text"]))
            elif isinstance(part, Mapping):
                parts.append(f"[{part.get('type', 'part')} {part.get('name') or part.get('mime_type') or ''}]".strip())
    elif content is not None:
        parts.append(str(content))
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        from pytest_connic.models.digest import canonical_json

        for call in calls:
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping):
                parts.append(f"calls {function.get('name')}({canonical_json(function.get('arguments'))})")
    return "\n".join(parts)


def cut(text: str) -> str:
    """``text`` cut at ``TEXT_LIMIT`` characters (marked with an ellipsis)."""
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 1] + "…"


def _echoed(found: Found | None, response: ModelResponse | None) -> dict[str, str]:
    """The placeholders whose values the answer repeats (in its text or its tool calls)."""
    if found is None or response is None or not found.values:
        return {}
    said = [response.content or ""] + [_flat(c.arguments) for c in response.tool_calls]
    return {p: v for p, v in found.values.items() if any(v in s for s in said)}


def _flat(value: object) -> str:
    texts: list[str] = []
    substitute(value, lambda s: texts.append(s) or s)  # type: ignore[func-returns-value]
    return "\n".join(texts)


def echo_now(recorded: Mapping[str, object] | None, found: Found | None) -> dict[str, str]:
    """The values a replayed answer repeats, each mapped to the value that takes its place now
    (the same placeholder in this replay's request); nothing that did not change."""
    echoed = recorded.get("echoed") if recorded is not None else None
    if not isinstance(echoed, Mapping) or found is None:
        return {}
    out = {}
    for placeholder, old in echoed.items():
        new = found.values.get(str(placeholder))
        if isinstance(old, str) and new is not None and new != old:
            out[old] = new
    return out


def kinds_of(recorded: Mapping[str, object]) -> tuple[str, ...] | None:
    """The volatile kinds a recorded section was normalised with (None: an older section)."""
    kinds = recorded.get("volatile")
    if kinds is None:
        return None
    return tuple(str(k) for k in kinds) if isinstance(kinds, list) else ()


def check_section(raw: Mapping[str, object], fail: object) -> None:
    """The values of a ``request`` section a replay reads beyond its digests: ``volatile`` (known
    kinds), ``text`` and ``echoed`` (strings); ``fail(key, message)`` raises the cassette's located
    error."""
    assert callable(fail)
    kinds = raw.get("volatile")
    if kinds is not None and (not isinstance(kinds, list) or any(k not in KINDS for k in kinds)):
        raise fail("volatile", f"expected a list of the kinds {', '.join(KINDS)}, found {kinds!r}")
    text = raw.get("text")
    if text is not None:
        if not isinstance(text, Mapping) or set(text) - {"system", "messages"}:
            raise fail("text", "expected a mapping with 'system' (a string) and 'messages' (a list)")
        if "system" in text and not isinstance(text["system"], str):
            raise fail("text", "'system' must be a string")
        messages = text.get("messages", [])
        if not isinstance(messages, list) or not all(_text_entry(m) for m in messages):
            raise fail("text", "'messages' must be a list of {at: <index>, role, name (optional), content}")
    echoed = raw.get("echoed")
    if echoed is not None and (not isinstance(echoed, Mapping)
                               or not all(isinstance(k, str) and isinstance(v, str) for k, v in echoed.items())):
        raise fail("echoed", "expected a mapping of placeholders (<uuid-1>) to the values the answer repeats")


def _text_entry(entry: object) -> bool:
    return (isinstance(entry, Mapping) and isinstance(entry.get("at"), int) and not isinstance(entry.get("at"), bool)
            and isinstance(entry.get("role"), str) and isinstance(entry.get("content"), str)
            and isinstance(entry.get("name", ""), str))
