"""A replay that diverged, in the user's terms: what changed (the tool that now raises, the child
that failed, the mock that answers otherwise, the prompt or tools), then the fix.

``models/divergence.py`` knows which part of the request differs; this module knows the run that
produced it (its tool calls, triggers and their tracebacks), so the first line of a failing case
names the code that caused the change, with its file and line.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from pytest_connic.models.divergence import Divergence, ReplayDiverged
from pytest_connic.records.events import MiddlewareEvent
from pytest_connic.records.run import RunRecord, ToolCallRecord, TriggerRecord
from pytest_connic.runtime.state import InvocationState

#: the longest error quoted from a tool or a child
_ERROR = 200
#: causes that already say what the request now holds (an error): no diff follows them
_SAID_WHOLE = ("the child agent",)


def in_user_terms(inv: InvocationState, exc: ReplayDiverged, messages: Sequence[dict[str, object]],
                  history: int) -> str:
    """The run's failure for ``exc``: what changed, where the recorded answers were, the fix."""
    divergence = exc.divergence
    cause = _cause(inv, divergence, messages, history)
    if cause is None:
        return (f"replay diverged: the request of agent '{inv.config.name}' differs from its recording "
                f"({exc.where}): {divergence.text()}. {_fix(inv, divergence, cause)}")
    if divergence.diff and not cause.startswith(_SAID_WHOLE) and " now raises " not in cause:
        cause = f"{cause}: {divergence.diff}"
    return (f"replay diverged: {cause}; the model's recorded answers were made for the request before "
            f"that change ({exc.where}, {divergence.summary}). {_fix(inv, divergence, cause)}")


def _cause(inv: InvocationState, divergence: Divergence, messages: Sequence[dict[str, object]],
           history: int) -> str | None:
    agent = inv.config.name
    if divergence.part == "system":
        return f"the system prompt of agent '{agent}' changed" + _prompt_source(inv)
    if divergence.part == "tools":
        return f"the tools offered to agent '{agent}' changed"
    if divergence.part == "schema":
        return f"the output schema of agent '{agent}' changed"
    if divergence.part == "model":
        return f"the model of agent '{agent}' changed"
    if divergence.part == "session":
        return None
    index = divergence.index
    if index is None or index >= len(messages):
        return None
    if index < history:
        return "the session history the run started with changed"
    role = messages[index].get("role")
    if role == "user":
        return f"the payload agent '{agent}' receives changed" + _before_middleware(inv)
    if role != "tool":
        return None
    call = _call_of(inv.record, messages, history, index)
    if call is None:
        return None
    mocks = inv.scope.case.get("mocks")
    return _tool_cause(inv.record, call, f"tests/mocks/{mocks}.py" if isinstance(mocks, str) and mocks else None)


def _call_of(record: RunRecord, messages: Sequence[dict[str, object]], history: int, index: int) -> ToolCallRecord | None:
    """The tool call whose result is message ``index``: the invocation's tool messages and its
    tool calls are in the same order (each call is recorded as it starts, in the model's order)."""
    calls = list(record.tool_calls)
    at = 0
    for position in range(history, index + 1):
        message = messages[position]
        if message.get("role") != "tool":
            continue
        while at < len(calls) and calls[at].name != message.get("name"):
            at += 1
        if at >= len(calls):
            return None
        if position == index:
            return calls[at]
        at += 1
    return None


def _tool_cause(record: RunRecord, call: ToolCallRecord, mocks_module: str | None) -> str:
    if call.name == "trigger_agent":
        trigger = _trigger_of(record, call)
        child = trigger.child_run if trigger is not None else None
        if child is not None and child.status != "completed":
            return _child_cause(child)
    where = f" at {call.traceback['where']}" if call.traceback and call.traceback.get("where") else ""
    who = call.name
    if call.mocked and call.mock_function:
        module = mocks_module
        who = f"the mock {call.mock_function}{f' ({module})' if module else ''} of tool {call.name}"
    if call.error is not None:
        return f"{who} now raises {_short(call.error)}{where}"
    if call.aborted:
        return f"{who} is now aborted by its before hook"
    if call.mocked:
        return f"{who} now answers differently"
    return f"{call.name} now returns something else"


def _trigger_of(record: RunRecord, call: ToolCallRecord) -> TriggerRecord | None:
    """The ``trigger_agent`` record of ``call`` (the triggers and their calls are in one order)."""
    calls = [c for c in record.tool_calls if c.name == "trigger_agent"]
    triggers = [t for t in record.triggers if t.tool == "trigger_agent"]
    for candidate, trigger in zip(calls, triggers):
        if candidate is call:
            return trigger
    return None


def _child_cause(child: RunRecord) -> str:
    error = child.error or child.status
    where = _child_where(child)
    return f"the child agent '{child.agent_name}' (trigger_agent) now ends {child.status}: {_short(error)}{where}"


def _child_where(child: RunRecord) -> str:
    if child.error_traceback and child.error_traceback.get("where"):
        return f" at {child.error_traceback['where']}"
    for call in reversed(child.tool_calls):
        if call.traceback and call.traceback.get("where"):
            return f" at {call.traceback['where']}"
    return ""


def _prompt_source(inv: InvocationState) -> str:
    prompt = inv.config.system_prompt or ""
    if "{" in prompt:  # filled from the run's context: middleware may have set a value
        return " (it is filled from the run's context" + (", which middleware sets" if inv.middleware else "") + ")"
    return ""


def _before_middleware(inv: InvocationState) -> str:
    ran = any(isinstance(e, MiddlewareEvent) and e.phase == "before" for e in inv.record.events)
    return f" (after the before middleware of agent '{inv.config.name}')" if ran else ""


def _fix(inv: InvocationState, divergence: Divergence, cause: str | None) -> str:
    command = rerecord_command(inv)
    if divergence.rule:
        return divergence.rule[0].upper() + divergence.rule[1:] + (f"; or re-record this case: {command}" if command else "")
    intended = "If the change is intended, re-record" if cause is not None and " now " in cause else "Re-record"
    if command is None:
        return f"{intended} the case with --connic-record-mode=all"
    return f"{intended} this case: {command}"


def rerecord_command(inv: InvocationState) -> str | None:
    """``pytest '<node id>' --connic-record-mode=all``: the command that records this case alone."""
    nodeid = inv.scope.nodeid
    if not nodeid:
        return None
    return f"pytest {shlex.quote(nodeid)} --connic-record-mode=all"


def _short(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else text
    return first if len(first) <= _ERROR else first[: _ERROR - 1] + "…"
