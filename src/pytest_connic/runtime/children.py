"""Child agents started with ``trigger_agent`` / ``trigger_agent_at`` (https://connic.co/docs/v1/build/tools/orchestration).

A child runs in-process as an invocation of the same run scope: the case's mocks,
approval decisions, builder context and models apply to it, and its trace (tool
calls, model turns, its own children) hangs off the parent's ``TriggerRecord``.

* ``trigger_agent(wait_for_response=True)`` runs the child and returns
  ``{run_id, status, response, error?}``; ``timeout_seconds`` bounds the child
  (status ``timeout``, the child run ``failed``).
* ``trigger_agent(wait_for_response=False)`` starts the child in the background and
  returns ``{run_id}``; the parent's run waits for it before it ends, so its trace is
  complete. Run-level assertions still need a waited trigger (the SDK's connic/test_schema.py, ChildAgentExpectation).
* ``trigger_agent_at`` is recorded with its ``scheduled_at`` and never run: the
  scheduled moment lies after the test.

A child's own check failures (a strict flag, a cassette problem) and infrastructure
errors are the case's: they are copied into the parent's record.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import time
from typing import Literal, TypedDict

from pytest_connic.jsonsafe import json_text, parse_json
from pytest_connic.project.sdk import AgentType
from pytest_connic.records.events import TriggerEvent
from pytest_connic.records.run import RunRecord, TriggerRecord
from pytest_connic.runtime.state import InvocationState

MAX_DEPTH = 16
MAX_SCHEDULE = dt.timedelta(days=30)
_DELAY_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


class Started(TypedDict):
    """What a fire-and-forget ``trigger_agent`` returns."""

    run_id: str


class _Outcome(TypedDict):
    run_id: str
    status: str
    response: str | None


class Outcome(_Outcome, total=False):
    """What a waited ``trigger_agent`` returns: the child's status and response (``error`` when
    it has one)."""

    error: str


class Scheduled(TypedDict):
    """What ``trigger_agent_at`` returns."""

    run_id: str
    scheduled_at: str
    status: Literal["scheduled"]


def _payload_forms(payload: object) -> tuple[object, str]:
    """``payload`` (JSON-parsed when the parent passed a JSON string) and ``payload_raw``."""
    if isinstance(payload, str):
        return parse_json(payload), payload
    return copy.deepcopy(payload), ""


def _check(inv: InvocationState, agent_name: object, payload: object) -> str:
    """``agent_name``, checked with the payload and the depth of the trigger chain."""
    agents = inv.services.project.agents
    if not isinstance(agent_name, str) or agent_name not in agents:
        known = ", ".join(sorted(agents))
        raise ValueError(f"unknown agent {agent_name!r}; agents in this project: {known}")
    if not isinstance(payload, (dict, list, str)):
        raise TypeError(f"payload must be a dict, a list or a string, got {type(payload).__name__}")
    if inv.depth + 1 > MAX_DEPTH:
        raise ValueError(f"trigger chain deeper than {MAX_DEPTH} levels (agents triggering each other "
                         "in a loop?)")
    return agent_name


def _child(inv: InvocationState, agent_name: str, payload: object, timeout: float | None) -> InvocationState:
    """The child invocation; an LLM child takes its model now, so that cassette entries
    ``children.<agent>[i]`` follow the order of the triggers even when children overlap."""
    value = parse_json(payload) if isinstance(payload, str) else copy.deepcopy(payload)
    files = value.pop("files", None) if isinstance(value, dict) else None
    child = InvocationState.create(
        inv.scope, agent_name, value, files if isinstance(files, list) else None,
        root=False, depth=inv.depth + 1, timeout_s=timeout,
        timeout_label="timeout_seconds of trigger_agent" if timeout is not None else None,
        session_id=inv.session_id,
    )
    child.triggered = True  # a run of its own (a pipeline stage is not)
    if child.config.type == AgentType.LLM:
        child.reserved_model = inv.scope.models.model_for(agent_name, root=False)
    return child


def _adopt(inv: InvocationState, trigger: TriggerRecord, child: InvocationState) -> None:
    """Hang the child's run under its trigger; its failures become the parent's. A child
    that ended early for its own reason leaves its unused cassette turns unchecked."""
    record = trigger.child_run = child.record
    ended_early = getattr(child.reserved_model, "ended_early", None)
    if (record.status != "completed" or record.stopped) and ended_early is not None:
        ended_early()
    where = f"in child agent '{record.agent_name}' (run {record.run_id})"
    inv.record.failures.extend(f"{where}: {failure}" for failure in record.failures)
    if record.infrastructure_error and not inv.record.infrastructure_error:
        inv.record.infrastructure_error = record.infrastructure_error


async def trigger_agent(
    inv: InvocationState,
    agent_name: object,
    payload: object,
    wait_for_response: object = True,
    timeout_seconds: object = 60,
) -> Outcome | Started:
    """Run the child in-process. Waited: its outcome; fire-and-forget: only its run id.
    The arguments are the caller's (a model's, user code's), checked here."""
    agent_name = _check(inv, agent_name, payload)
    timeout: float | None = None
    if wait_for_response:
        if not isinstance(timeout_seconds, (int, float)) or timeout_seconds <= 0:
            raise ValueError(f"timeout_seconds must be a positive number, got {timeout_seconds!r}")
        timeout = float(timeout_seconds)
    parsed, raw = _payload_forms(payload)
    trigger = TriggerRecord(agent_name, "trigger_agent", bool(wait_for_response), parsed, raw)
    inv.record.triggers.append(trigger)
    child = _child(inv, agent_name, payload, timeout)
    if not wait_for_response:
        inv.background.append(asyncio.ensure_future(_in_background(inv, trigger, child)))
        return {"run_id": child.record.run_id}
    started = time.perf_counter()
    try:
        record = await inv.scope.run_invocation(child)
    finally:  # also when the parent's run is cancelled meanwhile
        _adopt(inv, trigger, child)
    inv.record.events.append(TriggerEvent(agent=agent_name, duration_ms=(time.perf_counter() - started) * 1000))
    return _outcome(child, record)


async def _in_background(inv: InvocationState, trigger: TriggerRecord, child: InvocationState) -> None:
    try:
        await inv.scope.run_invocation(child)
    finally:  # also when the parent gives up waiting and cancels it
        _adopt(inv, trigger, child)


def _outcome(child: InvocationState, record: RunRecord) -> Outcome:
    """What a waited ``trigger_agent`` returns to its caller."""
    timed_out = (record.status == "failed" and (record.error or "").startswith("run timed out")
                 and (child.timeout_label or "").startswith("timeout_seconds"))
    output = record.output_raw
    result: Outcome = {
        "run_id": record.run_id,
        "status": "timeout" if timed_out else record.status,
        "response": output if isinstance(output, str) or output is None else json_text(output, ensure_ascii=True),
    }
    if record.error:
        result["error"] = record.error
    return result


def _scheduled_for(delay: object, unix_timestamp: object, now: dt.datetime) -> dt.datetime:
    if (delay is None) == (unix_timestamp is None):
        raise ValueError("trigger_agent_at needs exactly one of delay or unix_timestamp")
    if delay is not None:
        if not isinstance(delay, dict) or not delay or set(delay) - set(_DELAY_SECONDS):
            raise ValueError(f"delay must be a dict with at least one of the keys d, h, m, s; got {delay!r}")
        numbers = [v for v in delay.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(numbers) != len(delay) or any(v < 0 for v in numbers):
            raise ValueError(f"delay values must be non-negative numbers; got {delay!r}")
        seconds = sum(float(value) * _DELAY_SECONDS[key] for key, value in delay.items())
        if seconds <= 0:
            raise ValueError("delay must be positive")
        when = now + dt.timedelta(seconds=seconds)
    else:
        if not isinstance(unix_timestamp, (int, float)) or isinstance(unix_timestamp, bool):
            raise ValueError(f"unix_timestamp must be a number, got {unix_timestamp!r}")
        when = dt.datetime.fromtimestamp(float(unix_timestamp), dt.timezone.utc)
        if when <= now:
            raise ValueError(f"unix_timestamp {unix_timestamp} is not in the future")
    if when - now > MAX_SCHEDULE:
        raise ValueError("trigger_agent_at can schedule at most 30 days ahead")
    return when


async def trigger_agent_at(
    inv: InvocationState,
    agent_name: object,
    payload: object,
    delay: object = None,
    unix_timestamp: object = None,
) -> Scheduled:
    """Schedule a child: recorded (fire-and-forget in tests, https://connic.co/docs/v1/build/tools/orchestration), never
    run. The arguments are the caller's, checked here (``delay``: ``{d, h, m, s}`` numbers)."""
    agent_name = _check(inv, agent_name, payload)
    when = _scheduled_for(delay, unix_timestamp, inv.scope.wall_now())
    scheduled_at = when.isoformat(timespec="seconds").replace("+00:00", "Z")
    parsed, raw = _payload_forms(payload)
    inv.record.triggers.append(
        TriggerRecord(agent_name, "trigger_agent_at", False, parsed, raw, scheduled_at=scheduled_at)
    )
    return {"run_id": inv.scope.new_id(), "scheduled_at": scheduled_at, "status": "scheduled"}
