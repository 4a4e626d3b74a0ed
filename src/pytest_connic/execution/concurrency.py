"""Connic's run concurrency for the runs of a case: ``max_concurrent_runs`` (a cap on the agent's
simultaneous runs) and ``concurrency {key, on_conflict}`` (per-key serialisation on top).

Only what the project sets is applied (``model_fields_set`` of the agent's config, which counts a
value from a ``_defaults.yaml`` as set): an agent that sets nothing keeps its runs concurrent up to
``--connic-concurrency`` (docs/fidelity.md). A run *arrives* (``RunGate.arrive``, synchronous, in
index order when the key comes from the case's payload) and then ``wait`` says whether it may run
or why it was cancelled (``drop``, or a waiting run replaced under ``coalesce``).
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass, field

from pytest_connic.jsonsafe import MISSING, at_path

__all__ = ["RunGate", "Ticket", "gate_for", "key_value"]

def key_value(payload: object, path: str) -> str | None:
    """The value at dot path ``path`` of the raw trigger payload (a JSON string is parsed), as a
    stable text; None when the path does not exist (per-key enforcement is skipped)."""
    if isinstance(payload, (str, bytes)):
        try:
            payload = json.loads(payload)
        except ValueError:
            return None
    value = at_path(payload, path)
    if value is MISSING:
        return None
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


@dataclass(eq=False)
class Ticket:
    """One run's place at the gate."""

    index: int
    key: str | None
    admitted: asyncio.Future[str | None]  #: None: it may run; else why it is cancelled
    holds_key: bool = False
    holds_slot: bool = False
    released: bool = False


@dataclass
class _KeyState:
    active: Ticket | None = None
    waiting: deque[Ticket] = field(default_factory=deque)


class RunGate:
    """The gate of one agent's runs within one event loop (one case: see docs/running.md)."""

    def __init__(self, agent: str, max_runs: int | None, key_path: str | None, on_conflict: str) -> None:
        self.agent = agent
        self.max_runs = max_runs
        self.key_path = key_path
        self.on_conflict = on_conflict
        self._slots = asyncio.Semaphore(max_runs) if max_runs is not None else None
        self._keys: dict[str, _KeyState] = {}

    def arrive(self, index: int, payload: object) -> Ticket:
        """Register run ``index`` with its trigger payload (no await: arrivals keep their order)."""
        key = key_value(payload, self.key_path) if self.key_path else None
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        ticket = Ticket(index, key, future)
        if key is None:
            future.set_result(None)
            return ticket
        state = self._keys.setdefault(key, _KeyState())
        if state.active is None:
            state.active, ticket.holds_key = ticket, True
            future.set_result(None)
        elif self.on_conflict == "drop":
            future.set_result(
                f"concurrency: run dropped (on_conflict: drop): run #{state.active.index} of agent "
                f"'{self.agent}' with the same key ({self.key_path} = {key}) was still running")
        else:
            if self.on_conflict == "coalesce" and state.waiting:
                replaced = state.waiting.popleft()
                replaced.admitted.set_result(
                    f"concurrency: run coalesced (on_conflict: coalesce): replaced by the newer run #{index} "
                    f"of agent '{self.agent}' with the same key ({self.key_path} = {key}) while it waited")
            state.waiting.append(ticket)
        return ticket

    async def wait(self, ticket: Ticket) -> str | None:
        """None once the run may start (its key and a ``max_concurrent_runs`` slot are held), else
        the reason it is cancelled. The caller always calls ``release`` afterwards."""
        reason = await asyncio.shield(ticket.admitted) if not ticket.admitted.done() else ticket.admitted.result()
        if reason is not None:
            return reason
        if self._slots is not None:
            await self._slots.acquire()
            ticket.holds_slot = True
        return None

    def release(self, ticket: Ticket) -> None:
        """The run ended (or was cancelled while it waited): its slot and key pass on."""
        if ticket.released:
            return
        ticket.released = True
        if ticket.holds_slot and self._slots is not None:
            self._slots.release()
        if ticket.key is None:
            return
        state = self._keys[ticket.key]
        if ticket in state.waiting:
            state.waiting.remove(ticket)
        if not ticket.holds_key:
            return
        state.active = None
        while state.waiting:
            nxt = state.waiting.popleft()
            if nxt.admitted.done():
                continue
            state.active, nxt.holds_key = nxt, True
            nxt.admitted.set_result(None)
            return
        del self._keys[ticket.key]


def gate_for(agent: str, config: object) -> RunGate | None:
    """The gate of an agent whose config sets ``max_concurrent_runs`` or ``concurrency`` (None:
    nothing set, the runs stay as concurrent as ``--connic-concurrency`` allows). ``concurrency`` is
    not applied to a sequential agent, as on Connic."""
    fields_set: set[str] = getattr(config, "model_fields_set", set())
    max_runs = getattr(config, "max_concurrent_runs", None) if "max_concurrent_runs" in fields_set else None
    concurrency = getattr(config, "concurrency", None)
    kind = str(getattr(getattr(config, "type", None), "value", getattr(config, "type", "")) or "")
    if concurrency is not None and kind == "sequential":
        concurrency = None
    if max_runs is None and concurrency is None:
        return None
    key = getattr(concurrency, "key", None) if concurrency is not None else None
    on_conflict = str(getattr(concurrency, "on_conflict", "queue")) if concurrency is not None else "queue"
    return RunGate(agent, int(max_runs) if max_runs is not None else None, key, on_conflict)
