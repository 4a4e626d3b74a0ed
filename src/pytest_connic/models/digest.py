"""Request digests: how replay tells that a prompt changed since recording.

A recorded turn keeps, instead of the request itself, a fingerprint of it::

    request:
      model: openai/gpt-4o-mini
      digest: 3f1c...            # sha256 over model + system prompt + messages + tools
      system: 9a0b1c2d3e4f       # short digest of the system prompt
      messages: [5e6f..., ...]   # one short digest per message
      tools: {add: 0c1d..., ...} # one short digest per tool, by name

Only digests are stored, never text, so no secret (and no user data) can leak
into a cassette through it. Digests are computed on a canonical form: tool-call
ids are left out (providers invent them), and JSON tool arguments are compared
as data, not as text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from pytest_connic.models.base import ModelRequest, ToolSpec

SHORT = 12


def canonical_json(value: object) -> str:
    """Compact, key-sorted JSON; values JSON cannot encode become their ``repr``."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)


def sha256(value: object) -> str:
    """The hex sha256 of ``value``'s canonical JSON."""
    return hashlib.sha256(canonical_json(value).encode("utf-8", "surrogatepass")).hexdigest()


def _canonical_arguments(arguments: object) -> object:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments
    return arguments


def _canonical_tool_call(call: object) -> object:
    if not isinstance(call, Mapping):
        return call
    out = {k: v for k, v in call.items() if k != "id"}
    function = out.get("function")
    if isinstance(function, Mapping):
        out["function"] = {**function, "arguments": _canonical_arguments(function.get("arguments"))}
    if "arguments" in out:
        out["arguments"] = _canonical_arguments(out["arguments"])
    return out


def canonical_message(message: Mapping[str, object]) -> dict[str, object]:
    """``message`` without provider-invented ids, with tool arguments as data."""
    out = {k: v for k, v in message.items() if k != "tool_call_id" and v is not None}
    calls = out.get("tool_calls")
    if isinstance(calls, Sequence) and not isinstance(calls, str):
        out["tool_calls"] = [_canonical_tool_call(c) for c in calls]
    return out


def message_digest(message: Mapping[str, object]) -> str:
    """A short digest of one message."""
    return sha256(canonical_message(message))[:SHORT]


def tool_digest(tool: ToolSpec) -> str:
    """A short digest of one tool spec (name, description, parameters)."""
    return sha256([tool.name, tool.description, tool.parameters])[:SHORT]


def request_digest(request: ModelRequest) -> str:
    """The full digest of a request: model, system prompt, messages and tool specs."""
    return sha256(
        {
            "model": request.model,
            "system": request.system_prompt,
            "messages": [canonical_message(m) for m in request.messages],
            "tools": [[t.name, t.description, t.parameters] for t in request.tools],
        }
    )


def request_fingerprint(request: ModelRequest) -> dict[str, object]:
    """The ``request`` entry a recorded turn carries (digests only)."""
    return {
        "model": request.model,
        "digest": request_digest(request),
        "system": sha256(request.system_prompt)[:SHORT],
        "messages": [message_digest(m) for m in request.messages],
        "tools": {t.name: tool_digest(t) for t in request.tools},
    }


def first_difference(recorded: Mapping[str, object], request: ModelRequest) -> str | None:
    """Where ``request`` first departs from the ``recorded`` fingerprint; None when it matches.

    Checks the model, the system prompt, each message in order, then the tools.
    A fingerprint that lacks a part (hand-written, older) is not compared on it.
    """
    if recorded.get("digest") == request_digest(request):
        return None
    for check in (_model_difference, _system_difference, _messages_difference, _tools_difference):
        found = check(recorded, request)
        if found:
            return found
    return "the request differs from the recorded one"


def _model_difference(recorded: Mapping[str, object], request: ModelRequest) -> str | None:
    model = recorded.get("model")
    if model is not None and model != request.model:
        return f"model differs: recorded {model!r}, now {request.model!r}"
    return None


def _system_difference(recorded: Mapping[str, object], request: ModelRequest) -> str | None:
    system = recorded.get("system")
    if system is not None and system != sha256(request.system_prompt)[:SHORT]:
        return "system prompt differs"
    return None


def _role(message: object) -> str:
    return str(message.get("role", "?")) if isinstance(message, Mapping) else "?"


def _messages_difference(recorded: Mapping[str, object], request: ModelRequest) -> str | None:
    digests = recorded.get("messages")
    if not isinstance(digests, list):
        return None
    messages = request.messages
    for index, (old, new) in enumerate(zip(digests, messages)):
        if old != message_digest(new):
            return f"message {index} ({_role(new)}) differs"
    if len(messages) > len(digests):
        extra = len(messages) - len(digests)
        first = len(digests)
        return f"message {first} ({_role(messages[first])}) is new: {extra} more message(s) than recorded"
    if len(messages) < len(digests):
        return f"{len(digests) - len(messages)} message(s) fewer than recorded, from message {len(messages)}"
    return None


def _tools_difference(recorded: Mapping[str, object], request: ModelRequest) -> str | None:
    tools = recorded.get("tools")
    if not isinstance(tools, Mapping):
        return None
    now = {t.name: tool_digest(t) for t in request.tools}
    parts = []
    added = [name for name in now if name not in tools]
    removed = [str(name) for name in tools if name not in now]
    changed = [name for name in now if name in tools and tools[name] != now[name]]
    if added:
        parts.append("added " + ", ".join(added))
    if removed:
        parts.append("removed " + ", ".join(removed))
    if changed:
        parts.append("changed " + ", ".join(changed))
    if not parts and list(tools) != list(now):
        parts.append("reordered")
    return "tools differ: " + "; ".join(parts) if parts else None
