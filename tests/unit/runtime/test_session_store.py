"""runtime/sessions.py: key resolution, the store's ttl on the session clock, xdist groups."""

from __future__ import annotations

import types
from typing import Any

import pytest

from pytest_connic.runtime.clock import RunClock
from pytest_connic.runtime.sessions import SessionStore, resolve_key, runs_in_order, xdist_group
from pytest_connic.runtime.signals import RunFailed


def config(session: Any, **fields: Any) -> Any:
    return types.SimpleNamespace(name="chat", source_path="agents/chat.yaml", session=session, **fields)


def keyed(key: str | None) -> Any:
    return types.SimpleNamespace(key=key, ttl=None, history=True, browser=True)


def test_keys_resolve_against_the_context_or_the_delivered_payload() -> None:
    assert resolve_key(config(keyed("context.chat.id")), {"chat": {"id": 7}}, {}) == "7"
    assert resolve_key(config(keyed("input.user")), {}, {"user": "ann"}) == "ann"
    assert resolve_key(config(keyed("input.users.1")), {}, {"users": ["a", "b"]}) == "b"
    assert resolve_key(config(keyed(None)), {}, {}) is None  # session: true
    assert resolve_key(config(keyed("context.n")), {"n": 0}, {}) == "0"  # 0 is a value


@pytest.mark.parametrize("context", [{}, {"chat_id": None}, {"chat_id": ""}, {"chat_id": []}, {"chat_id": {}}])
def test_a_key_resolving_to_nothing_or_empty_fails_the_run(context: dict[str, Any]) -> None:
    with pytest.raises(RunFailed, match="session key 'context.chat_id' of agent 'chat' resolved to"):
        resolve_key(config(keyed("context.chat_id")), context, {})


def test_a_session_older_than_its_ttl_is_replaced() -> None:
    store = SessionStore()
    first, expired = store.enter("chat", "ann", 60, now=0.0)
    assert expired is None
    store.remember(first, [{"role": "user", "content": "hi"}], now=10.0)
    again, expired = store.enter("chat", "ann", 60, now=69.0)
    assert again is first and expired is None and again.history
    later, expired = store.enter("chat", "ann", 60, now=130.0)
    assert expired is first and later is not first and later.history == [] and later.id != first.id
    forever, _ = store.enter("chat", "bob", None, now=0.0)
    assert store.enter("chat", "bob", None, now=1e9)[0] is forever


def test_the_session_clock_counts_the_delays_runs_skipped() -> None:
    store = SessionStore()
    clock = RunClock()
    clock.skipped_s = 120.0
    before = store.now(RunClock())
    store.fold(clock)
    assert store.now(RunClock()) - before >= 120.0


def test_sequential_agents_take_the_group_of_their_first_stage_with_a_session() -> None:
    def agent(name: str, session: Any = None, stages: list[str] | None = None) -> Any:
        return types.SimpleNamespace(config=types.SimpleNamespace(name=name, session=session, agents=stages or []))

    agents = {"chat": agent("chat", keyed(None)), "pipe": agent("pipe", stages=["plain", "chat"]),
              "plain": agent("plain"), "loop": agent("loop", stages=["loop"])}
    assert xdist_group(agents, "chat") == "connic-session-chat"
    assert xdist_group(agents, "pipe") == "connic-session-chat"
    assert xdist_group(agents, "plain") is None and not runs_in_order(agents, "plain")
    assert xdist_group(agents, "loop") is None  # a cycle does not recurse forever
    assert runs_in_order(agents, "pipe")
