"""Connic's run concurrency for the runs of a case: ``max_concurrent_runs`` (a cap on the agent's
simultaneous runs) and ``concurrency {key, on_conflict}`` (per-key serialisation on top).

``max_concurrent_runs`` is read as the SDK's ``AgentConfig`` gives it, so an agent that sets nothing
has Connic's default of 1 ("default 1; minimum 1", connic-skill ``agent-yaml.md``): its runs are
serialised. ``case_concurrency`` is how many runs of a case execute at once: the smaller of that
cap and ``--connic-concurrency`` (1 for an agent with a session). Within it, a run *arrives*
(``RunGate.arrive``, synchronous, in index order when the key comes from the case's payload) and
then ``wait`` says whether it may run or why it was cancelled (``drop``, or a waiting run replaced
under ``coalesce``).
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_connic.jsonsafe import MISSING, at_path
from pytest_connic.runtime.sessions import runs_in_order

if TYPE_CHECKING:
    from pytest_connic.project.sdk import Agent

__all__ = ["RunGate", "Ticket", "case_concurrency", "gate_for", "key_value", "run_cap"]

#: Connic's ``max_concurrent_runs`` when an agent sets nothing (the SDK's ``AgentConfig`` default)
DEFAULT_MAX_RUNS = 1


def run_cap(config: object) -> int:
    """The agent's ``max_concurrent_runs``: what the project sets (the agent file or a
    ``_defaults.yaml``), else Connic's default of 1; at least 1."""
    value = getattr(config, "max_concurrent_runs", None)
    return max(1, int(value)) if isinstance(value, int) and not isinstance(value, bool) else DEFAULT_MAX_RUNS


def case_concurrency(agents: Mapping[str, Agent], agent_name: str, concurrency: int) -> int:
    """How many runs of a case of ``agent_name`` execute at once (each run whole: builder, agent,
    cleanup): the agent's ``max_concurrent_runs`` capped by ``concurrency``
    (``--connic-concurrency``); 1 when its runs share a session, in order."""
    agent = agents.get(agent_name)
    if agent is None:
        return max(1, concurrency)
    if runs_in_order(agents, agent_name):
        return 1
    return max(1, min(concurrency, run_cap(agent.config)))


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
    released: bool = False


@dataclass
class _KeyState:
    active: Ticket | None = None
    waiting: deque[Ticket] = field(default_factory=deque)


class RunGate:
    """The per-key gate of one agent's runs within one event loop (one case: see docs/running.md)."""

    def __init__(self, agent: str, key_path: str, on_conflict: str) -> None:
        self.agent = agent
        self.key_path = key_path
        self.on_conflict = on_conflict
        self._keys: dict[str, _KeyState] = {}

    def arrive(self, index: int, payload: object) -> Ticket:
        """Register run ``index`` with its trigger payload (no await: arrivals keep their order)."""
        key = key_value(payload, self.key_path)
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
        """None once the run may start (it holds its key), else the reason it is cancelled. The
        caller always calls ``release`` afterwards."""
        return await asyncio.shield(ticket.admitted) if not ticket.admitted.done() else ticket.admitted.result()

    def release(self, ticket: Ticket) -> None:
        """The run ended (or was cancelled while it waited): its key passes on."""
        if ticket.released:
            return
        ticket.released = True
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
    """The per-key gate of an agent whose config sets ``concurrency`` (None: no key rule).
    ``concurrency`` is not applied to a sequential agent, as on Connic; ``max_concurrent_runs`` is
    applied by ``case_concurrency``."""
    concurrency = getattr(config, "concurrency", None)
    kind = str(getattr(getattr(config, "type", None), "value", getattr(config, "type", "")) or "")
    if concurrency is None or kind == "sequential":
        return None
    return RunGate(agent, str(concurrency.key), str(getattr(concurrency, "on_conflict", "queue")))
