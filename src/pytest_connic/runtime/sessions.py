"""Connic's sessions (``session:`` in an agent's YAML): runs that share a session key are one
ongoing conversation (agent-yaml "Sessions"; SDK ``SessionConfig``).

* ``session: true`` (or an object without ``key``): one session shared by every run of the agent;
  ``key: context.<path>`` / ``input.<path>``: one session per resolved value. The key is resolved
  after ``before`` middleware ("needs to be populated in middleware"), against the run context or
  the payload as Connic delivers it; a key that resolves to nothing or to an empty value fails the
  run, as on Connic.
* ``history`` (default true): an LLM agent's model sees the conversation of the session's earlier
  runs before the new user turn. What a run adds is its whole conversation (the user turn, the
  model's tool calls, the tool results, the final answer), once its agent loop has given a final
  answer (see docs/lifecycle.md "Sessions").
* ``ttl``: a session not updated for ``ttl`` seconds is expired, and the next run starts a new one
  (a new session id, no history). Time is the *session clock*: real time plus every retry delay a
  replayed run skipped (runtime/clock.py), so a replay expires sessions where a live run would.
* ``files.session_only`` and ``file_list(scope="session")`` key on the session's id.
* ``browser``: the ``web_browser_*`` tools have no local implementation; a located warning when an
  agent with a session uses them (the ``pytest_connic_predefined_tool`` hook supplies them).

The store belongs to one project's runtime (``RuntimeServices.sessions``): one per pytest session
and ``--connic-env``, one per xdist worker.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_connic.jsonsafe import MISSING, at_path, json_text
from pytest_connic.runtime.clock import RunClock
from pytest_connic.runtime.signals import RunFailed

if TYPE_CHECKING:
    from pytest_connic.models.base import RunModels
    from pytest_connic.project.sdk import Agent, AgentConfig, SessionConfig

#: a model message (OpenAI-shaped: ``role``, ``content``, ``tool_calls``, ...)
Message = dict[str, object]

#: the ``pytest.mark.xdist_group`` name of the cases that share an agent's sessions
GROUP_PREFIX = "connic-session-"

def session_config(config: AgentConfig) -> SessionConfig | None:
    """The agent's ``SessionConfig`` (the SDK turns ``true`` into one without a key), or None."""
    session = getattr(config, "session", None)
    if session is None or session is False:
        return None
    return session


def _empty(value: object) -> bool:
    return value is None or (isinstance(value, (str, list, dict)) and len(value) == 0)


def resolve_key(config: AgentConfig, context: Mapping[str, object], delivered: Mapping[str, object]) -> str | None:
    """The session's key value for one run (None: ``session: true``, one session for the agent).

    ``context.<path>`` reads the run context (after ``before`` middleware), ``input.<path>`` the
    payload as Connic delivers it. Raises ``RunFailed`` when the path resolves to nothing or to an
    empty value (``None``, ``""``, ``[]``, ``{}``)."""
    session = session_config(config)
    key = getattr(session, "key", None)
    if not key:
        return None
    prefix, _, rest = key.partition(".")
    value = at_path(context if prefix == "context" else delivered, rest)
    if value is MISSING or _empty(value):
        what = "nothing (the path does not exist)" if value is MISSING else f"an empty value ({json_text(value)})"
        where = ("set it in the agent's before middleware" if prefix == "context"
                 else "send it in the payload")
        raise RunFailed(
            f"session key '{key}' of agent '{config.name}' resolved to {what}: Connic needs it to resolve "
            f"to a non-empty value before the run starts ({where}; {config.source_path})"
        )
    return value if isinstance(value, str) else json_text(value)


@dataclass
class Session:
    """One session of one agent: its id, its conversation, when it was last updated."""

    agent: str
    key: str | None
    id: str = field(default_factory=lambda: f"session-{uuid.uuid4()}")
    #: the model messages of the session's earlier runs, oldest first
    history: list[Message] = field(default_factory=list)
    #: the runs that added their conversation
    runs: int = 0
    #: session-clock time of the last update (``SessionStore.now``)
    updated: float = 0.0
    #: the cases whose runs made ``history``, oldest first (named by a divergence note)
    cases: list[str] = field(default_factory=list)

    def restart(self, history: list[Message], cases: list[str]) -> None:
        """Start from a cassette's history (a replayed case is self-contained, docs/models.md
        "Sessions"), whatever earlier cases left in the store."""
        self.history = copy.deepcopy(history)
        self.cases = list(cases)

    @property
    def label(self) -> str:
        return f"'{self.agent}'" if self.key is None else f"'{self.agent}' key {self.key!r}"


class SessionStore:
    """The sessions of one project's runtime, by (agent, key value)."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str | None], Session] = {}
        #: retry delays skipped by the runs that have finished (runtime/clock.py)
        self.skipped_s = 0.0

    def now(self, clock: RunClock) -> float:
        """The session clock: real time plus every delay skipped so far (finished runs and the
        run of ``clock``)."""
        return clock.now() + self.skipped_s

    def fold(self, clock: RunClock) -> None:
        """A run ended: its skipped delays count for the runs after it."""
        self.skipped_s += clock.skipped_s

    def enter(self, agent: str, key: str | None, ttl: int | None, now: float) -> tuple[Session, Session | None]:
        """The live session of ``(agent, key)`` at ``now``, created when there is none; the second
        value is the session that expired (``ttl``) and was replaced, if any."""
        current = self._sessions.get((agent, key))
        expired = None
        if current is not None and ttl is not None and now - current.updated > ttl:
            expired, current = current, None
        if current is None:
            current = self._sessions[(agent, key)] = Session(agent, key)
        current.updated = now
        return current, expired

    def remember(self, session: Session, messages: list[Message], now: float, case: str | None = None) -> None:
        """Add one run's conversation (of case ``case``) to ``session``."""
        session.history.extend(copy.deepcopy(messages))
        session.runs += 1
        session.updated = now
        if case is not None and case not in session.cases:
            session.cases.append(case)


def begin_session(models: RunModels, session: Session) -> None:
    """Before a run's model sees ``session``'s history: the run's models (models/replay.py) may
    hold the history the run started with when it was recorded (a cassette's ``session``
    section); the session then starts from it. While recording, they take note of the history
    the run starts with (``fresh``: no earlier case of this process used the session, so
    re-recording one case alone may start from its cassette's history)."""
    begins = getattr(models, "session_begins", None)
    if begins is None:
        return
    fresh = session.runs == 0 and not session.history
    start = begins(session.agent, session.key, list(session.history), list(session.cases), fresh=fresh)
    if start is not None:
        session.restart(start.history, start.cases)


def _session_owner(agents: Mapping[str, Agent], name: str, seen: set[str] | None = None) -> str | None:
    """The agent whose sessions the runs of ``name`` use: itself, or the first stage of a
    sequential pipeline (recursively) that has a session."""
    agent = agents.get(name)
    if agent is None:
        return None
    config = agent.config
    if session_config(config) is not None:
        return name
    seen = set() if seen is None else seen
    seen.add(name)
    for stage in getattr(config, "agents", None) or []:
        if stage not in seen:
            owner = _session_owner(agents, stage, seen)
            if owner is not None:
                return owner
    return None


def xdist_group(agents: Mapping[str, Agent], name: str) -> str | None:
    """The ``xdist_group`` of the cases of agent ``name`` (None: its runs use no session), so that
    ``--dist loadgroup`` keeps the cases sharing a session store on one worker."""
    owner = _session_owner(agents, name)
    return None if owner is None else GROUP_PREFIX + owner


def runs_in_order(agents: Mapping[str, Agent], name: str) -> bool:
    """Whether the runs of a case of ``name`` run one after the other (they use a session: run
    ``i + 1`` sees run ``i``'s conversation, and a cassette replays the history it recorded)."""
    return _session_owner(agents, name) is not None


def uses_browser_tools(config: AgentConfig) -> bool:
    refs = [*(getattr(config, "tools", None) or []), *(getattr(config, "discoverable_tools", None) or [])]
    names = [ref if isinstance(ref, str) else next(iter(ref), "") if isinstance(ref, Mapping) else str(ref)
             for ref in refs]
    return any(str(n).startswith("web_browser") for n in names)


def session_warnings(config: AgentConfig) -> list[tuple[str, str]]:
    """``(key, message)`` of the located warnings an agent's session settings need (once each)."""
    session = session_config(config)
    if session is None:
        return []
    out = []
    if getattr(session, "browser", False) and uses_browser_tools(config):
        message = (f"{config.source_path}: session.browser of agent '{config.name}' is not simulated: the "
                   "web_browser_* tools have no local implementation (the pytest_connic_predefined_tool hook "
                   "supplies them), so no cookies or local storage carry from one run of a session to the next")
        out.append((f"session_browser:{config.name}", message))
    compression = getattr(config, "context_compression", None)
    if compression is not None and getattr(compression, "session_history", None) is not None:
        message = (f"{config.source_path}: context_compression.session_history of agent '{config.name}' is not "
                   "simulated: the stored session history is never compacted between runs, so a long session "
                   "gives the model more history here than on Connic")
        out.append((f"session_history_compaction:{config.name}", message))
    return out
