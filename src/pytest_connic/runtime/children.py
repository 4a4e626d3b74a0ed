"""Child agents started with ``trigger_agent`` / ``trigger_agent_at`` (spec §7)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
import uuid
from typing import TYPE_CHECKING, Any

from ..records import TriggerRecord
from .payload import parse_json

if TYPE_CHECKING:
    from .invocation import Invocation

MAX_DEPTH = 16


def _payload_forms(payload: Any) -> tuple[Any, str]:
    if isinstance(payload, str):
        return parse_json(payload), payload
    return payload, ""


def _check_agent(inv: Invocation, agent_name: str) -> None:
    if agent_name not in inv.services.project.agents:
        known = ", ".join(sorted(inv.services.project.agents))
        raise ValueError(f"unknown agent '{agent_name}'; agents in this project: {known}")
    if inv.depth + 1 > MAX_DEPTH:
        raise ValueError(f"trigger chain deeper than {MAX_DEPTH} levels (a loop of agents triggering each other?)")


def _child(inv: Invocation, agent_name: str, payload: Any, timeout: float | None) -> Any:
    from .invocation import Invocation as Child

    value = parse_json(payload) if isinstance(payload, str) else payload
    files = value.pop("files", None) if isinstance(value, dict) else None
    return Child(inv.scope, agent_name, value, files if isinstance(files, list) else None,
                 root=False, depth=inv.depth + 1, timeout_s=timeout)


async def trigger_agent(
    inv: Invocation,
    agent_name: str,
    payload: Any,
    wait_for_response: bool = True,
    timeout_seconds: int = 60,
) -> dict[str, Any]:
    """Run the child in-process. Waited: its outcome; fire-and-forget: only its run id."""
    _check_agent(inv, agent_name)
    parsed, raw = _payload_forms(payload)
    trigger = TriggerRecord(agent_name, "trigger_agent", bool(wait_for_response), parsed, raw)
    inv.record.triggers.append(trigger)
    child = _child(inv, agent_name, payload, float(timeout_seconds) if wait_for_response else None)
    if not wait_for_response:
        task = asyncio.ensure_future(child.run())
        task.add_done_callback(lambda t: _attach(trigger, t))
        inv.background.append(task)
        return {"run_id": child.record.run_id}
    started = time.perf_counter()
    record = await child.run()
    trigger.child_run = record
    timed_out = record.status == "failed" and (record.error or "").startswith("run timed out")
    result: dict[str, Any] = {
        "run_id": record.run_id,
        "status": "timeout" if timed_out else record.status,
        "response": record.output_raw if isinstance(record.output_raw, str) or record.output_raw is None
        else json.dumps(record.output_raw, default=str),
    }
    if record.error:
        result["error"] = record.error
    inv.record.events.append({"type": "trigger", "agent": agent_name, "waited": True,
                              "duration_ms": (time.perf_counter() - started) * 1000})
    return result


def _attach(trigger: TriggerRecord, task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is None:
        trigger.child_run = task.result()


async def trigger_agent_at(
    inv: Invocation,
    agent_name: str,
    payload: Any,
    delay: dict[str, float] | None = None,
    unix_timestamp: float | None = None,
) -> dict[str, Any]:
    """Schedule a child: recorded (fire-and-forget in tests), never run."""
    _check_agent(inv, agent_name)
    if (delay is None) == (unix_timestamp is None):
        raise ValueError("trigger_agent_at needs exactly one of delay or unix_timestamp")
    now = dt.datetime.now(dt.timezone.utc)
    if delay is not None:
        unknown = set(delay) - {"d", "h", "m", "s"}
        if unknown or not delay:
            raise ValueError("delay keys are d, h, m, s")
        seconds = delay.get("d", 0) * 86400 + delay.get("h", 0) * 3600 + delay.get("m", 0) * 60 + delay.get("s", 0)
        if seconds <= 0:
            raise ValueError("delay must be positive")
        when = now + dt.timedelta(seconds=seconds)
    else:
        when = dt.datetime.fromtimestamp(float(unix_timestamp or 0), dt.timezone.utc)
    if when - now > dt.timedelta(days=30):
        raise ValueError("trigger_agent_at can schedule at most 30 days ahead")
    parsed, raw = _payload_forms(payload)
    inv.record.triggers.append(TriggerRecord(agent_name, "trigger_agent_at", False, parsed, raw))
    return {"run_id": str(uuid.uuid4()), "scheduled_at": when.isoformat().replace("+00:00", "Z"), "status": "scheduled"}
