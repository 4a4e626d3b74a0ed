"""A cassette's ``session`` section (docs/models.md, "Sessions"): the session history a run of a
case whose agent keeps a session started with. Replay starts the run's session from it, so the
case does not depend on the cases before it; recording writes it; a divergence inside it says
"session history differs" and names the cases whose runs made it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping

from pytest_connic.models.base import CassetteError, ModelRequest
from pytest_connic.models.cassette import Cassette, CassetteRun, SessionStart
from pytest_connic.models.digest import message_digest


def matches(start: SessionStart | None, agent: str, key: str | None) -> bool:
    """Whether a recorded section is the one of ``agent``'s session ``key``."""
    return start is not None and start.agent in (None, agent) and start.key == key


def replayed_start(run: CassetteRun | None, agent: str, key: str | None) -> SessionStart | None:
    """The section of a replayed cassette run for this session (None: the store's history)."""
    start = run.session if run is not None else None
    return start if start is not None and matches(start, agent, key) else None


def stored_start(load: Callable[[], Cassette | None], index: int, agent: str, key: str | None) -> SessionStart | None:
    """While re-recording a case alone: the section its cassette on disk holds for run ``index``
    (``load()`` reads it; None when there is none or it cannot be read)."""
    try:
        cassette = load()
    except CassetteError:
        return None
    if cassette is None or index >= len(cassette.runs):
        return None
    return replayed_start(cassette.runs[index], agent, key)


def started_with(agent: str, key: str | None, history: list[dict[str, object]], cases: list[str]) -> SessionStart:
    """The history a run started with, as the section to write (a copy: the store moves on)."""
    return SessionStart(agent, key, copy.deepcopy(history), list(cases))


def session_difference(recorded: Mapping[str, object], request: ModelRequest, start: SessionStart,
                       from_cassette: bool) -> str | None:
    """"session history differs ..." when ``request`` departs from the ``recorded`` fingerprint in
    the session history the run started with (None: the difference is elsewhere). The run's own
    messages are the last ones of both; what comes before them is the history."""
    digests = recorded.get("messages")
    if not isinstance(digests, list) or start.agent != request.agent_name:
        return None
    held = len(start.history)
    own = len(request.messages) - held
    before = len(digests) - own
    if before == held and digests[:before] == [message_digest(m) for m in request.messages[:held]]:
        return None
    source = ("the runs of case " + ", ".join(repr(c) for c in start.cases) if start.cases
              else "no earlier case (a new session)")
    text = (f"session history differs: this run started with {held} message(s) of history from {source}, "
            f"its recording with {max(before, 0)}")
    if not from_cassette:
        text += ("; the cassette run has no `session:` section, so the history came from the cases run "
                 "before it: re-record the case (--connic-record-mode=all) to make it self-contained "
                 "(docs/models.md, \"Sessions\")")
    return text
