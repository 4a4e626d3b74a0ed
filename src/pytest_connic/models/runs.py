"""The models of one run of a case (``RunModelsImpl``) and of one agent invocation in it
(``InvocationModel``): replay the run's recorded turns, compare each request with the one the
turn was recorded for (strict replay, docs/models.md "Replay you can trust"), or record.

``models/replay.py`` holds the case's side (``CaseModels``: which cassette, which run replays
which, saving); a run reaches it through :class:`CaseSide`.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pytest_connic.models.base import (
    CallFailed,
    CassetteError,
    Model,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
)
from pytest_connic.models.cassette import (
    Cassette,
    CassetteRun,
    RecordedCall,
    RecordedToolCall,
    SessionStart,
    Tape,
    Turn,
)
from pytest_connic.models.divergence import Divergence, ReplayDiverged, find, texts_by_index
from pytest_connic.models.fingerprint import echo_now, kinds_of, normalised, section
from pytest_connic.models.matching import MatchRule
from pytest_connic.models.sessions import replayed_start, session_difference, started_with, stored_start
from pytest_connic.models.volatile import substitute
from pytest_connic.models.world import RunWorld, World
from pytest_connic.secrets import Masker

#: the modes that only replay (``digests`` writes digests into turns, never calls a provider)
REPLAY_ONLY = ("none", "digests")
#: the key of one invocation's turns in a cassette run: ("turns",) or ("children", agent, k)
TapeKey = tuple[str] | tuple[str, str, int]


@dataclass
class Plan:
    """Whether run ``i`` of a case replays a cassette run (which, and how many times over) or records."""

    kind: str  #: replay | record
    run: CassetteRun | None = None
    position: int = 0  #: which cassette run is replayed (``runs[position]``)
    #: how many times over the cassette's runs this run is (0: the first pass; n: the n-th copy)
    copy: int = 0


class CaseSide(Protocol):
    """What a run asks of its case's models (``models/replay.CaseModels``)."""

    path: Path
    mode: str
    masker: Masker
    strict: bool
    volatile: tuple[str, ...]
    _lock: threading.RLock

    @property
    def shown_path(self) -> str: ...

    def rules(self) -> tuple[MatchRule, ...]: ...

    def plan(self, run_index: int) -> Plan: ...

    def live_model(self, agent_name: str) -> Model: ...

    def refresh(self, turn: Turn, fingerprint: dict[str, object]) -> None: ...

    def _load(self) -> Cassette | None: ...


class RunModelsImpl:
    """The models of one run (implements ``base.RunModels``)."""

    def __init__(self, case: CaseSide, index: int) -> None:
        self.case = case
        self.index = index
        #: divergence notes (a request that differs from the recorded one), for traces and warnings
        self.notes: list[str] = []
        self.broken = False
        #: why this run's recording is incomplete (the first cause)
        self.why_broken: str | None = None
        self._plan: Plan | None = None
        self._counts: dict[str, int] = {}
        self._cursors: dict[TapeKey, int] = {}
        self._recorded: dict[TapeKey, list[Turn]] = {}
        self._noted: set[TapeKey] = set()
        #: invocations that ended early for their own reason (their unused turns are no divergence)
        self._ended: set[TapeKey] = set()
        #: recorded ``calls`` entries this run replayed (their indices) / recorded
        self._calls_used: set[int] = set()
        self._calls: list[RecordedCall] = []
        #: the session history this run started with (models/sessions.py), and whether the
        #: cassette gave it
        self._session: SessionStart | None = None
        self._session_replayed = False
        self._world: RunWorld | None = None
        #: the run's start on the real wall clock: volatile times are "now" relative to it
        self._start: dt.datetime | None = None

    @property
    def start(self) -> dt.datetime:
        """When the run started (the real wall clock, taken when first asked)."""
        if self._start is None:
            self._start = dt.datetime.now(dt.timezone.utc)
        return self._start

    def world(self, now: float) -> RunWorld | None:
        """The run's world (models/world.py), asked once as the run starts (``now``: its clock):
        recorded by a recording, the cassette run's ``world:`` in a replay; None in live mode and
        when the replayed run has none (or the cassette is missing or invalid: the first model call
        says so, as before)."""
        self._start = dt.datetime.now(dt.timezone.utc)
        if self.case.mode == "live":
            return None
        if self.case.mode != "all" and not os.path.lexists(self.case.path):
            return None if self.case.mode in REPLAY_ONLY else self._new_world(None, now, recording=True)
        try:  # not kept as the run's plan: a run whose model never asks (a hook's model, a
            # tool agent) reads no cassette and leaves no turn unused
            plan = self._plan or self.case.plan(self.index)
        except CassetteError:
            return None
        world = plan.run.world if plan.run is not None else None
        if plan.kind == "replay" and world is None:
            return None
        return self._new_world(copy.deepcopy(world), now, recording=plan.kind == "record", copy=plan.copy)

    def _new_world(self, world: World | None, now: float, *, recording: bool, copy: int = 0) -> RunWorld:
        self._world = RunWorld(world, recording=recording, now=now, copy=copy)
        return self._world

    @property
    def recording(self) -> bool:
        return self._plan is not None and self._plan.kind == "record"

    def model_for(self, agent_name: str, *, root: bool) -> Model:
        """The model for the next invocation of ``agent_name`` (call it in start order)."""
        if self.case.mode == "live":
            return self.case.live_model(agent_name)
        if root:
            key: TapeKey = ("turns",)
        else:
            k = self._counts.get(agent_name, 0)
            self._counts[agent_name] = k + 1
            key = ("children", agent_name, k)
        return InvocationModel(self, agent_name, key)

    async def external(self, kind: str, name: str, arguments: object,
                       call: Callable[[], Awaitable[object]]) -> object:
        """See ``base.RunModels.external``."""
        if self.case.mode == "live":
            return await call()
        plan = self.plan()
        if plan.kind == "record":
            return await self._record_call(kind, name, arguments, call)
        assert plan.run is not None
        wanted = _canonical(arguments)
        with self.case._lock:
            for n, entry in enumerate(plan.run.calls):
                if n in self._calls_used or entry.kind != kind or entry.name != name:
                    continue
                if entry.arguments is not None and _canonical(entry.arguments) != wanted:
                    continue
                self._calls_used.add(n)
                break
            else:
                raise CassetteError(self._unrecorded(kind, name, arguments, plan))
        if entry.error is not None:
            raise CallFailed(entry.error)
        return copy.deepcopy(entry.result)

    def calls_live(self) -> bool:
        """See ``base.RunModels.calls_live``."""
        return self.case.mode == "live" or self.plan().kind == "record"

    async def _record_call(self, kind: str, name: str, arguments: object,
                           call: Callable[[], Awaitable[object]]) -> object:
        try:
            result = await call()
        except CallFailed as exc:
            with self.case._lock:
                self._calls.append(RecordedCall(kind, name, copy.deepcopy(arguments), error=str(exc)))
            raise
        except BaseException as exc:
            self.mark_broken(f"its {kind} call {name!r} failed while recording", exc)
            raise
        with self.case._lock:
            self._calls.append(RecordedCall(kind, name, copy.deepcopy(arguments), copy.deepcopy(result)))
        return result

    def mark_broken(self, what: str, exc: BaseException) -> None:
        """This run's recording cannot be written: remember the first cause, in words."""
        self.broken = True
        if self.why_broken is not None:
            return
        if isinstance(exc, asyncio.CancelledError):
            self.why_broken = f"{what}: it was cut short (the run timed out or the session was stopped)"
        else:
            self.why_broken = f"{what}: {type(exc).__name__}: {self.case.masker.text(str(exc))}"

    def _unrecorded(self, kind: str, name: str, arguments: object, plan: Plan) -> str:
        assert plan.run is not None
        same = [c for c in plan.run.calls if c.kind == kind and c.name == name]
        shown = _canonical(arguments)
        if len(shown) > 300:
            shown = shown[:297] + "..."
        if same:
            recorded = f"the cassette records {len(same)} such call(s), none unused with these arguments"
        else:
            recorded = "the cassette records no such call"
        return (
            f"{self.case.shown_path}: runs[{plan.position}].calls: run {self.index + 1} made the {kind} call "
            f"{name!r} with arguments {shown}, but {recorded}; the cassette was recorded without it "
            "(record the case again with --connic-record-mode=all, against the real server, or add the "
            f"answer by hand under runs[{plan.position}].calls, docs/models.md \"Calls\")"
        )

    def session_begins(self, agent: str, key: str | None, history: list[dict[str, object]], cases: list[str],
                       *, fresh: bool) -> SessionStart | None:
        """The run's session starts with ``history`` (made by ``cases``): returns the history to start
        from instead (the cassette's ``session`` section), or None. Only the first session of a run
        is recorded and replayed; ``fresh``: no earlier case used it (runtime/sessions.py)."""
        if self.case.mode == "live" or self._session is not None:
            return None
        plan = self.plan()
        if plan.kind == "record":
            start = stored_start(self.case._load, self.index, agent, key) if fresh else None
            self._session = start or started_with(agent, key, history, cases)
            return start
        start = replayed_start(plan.run, agent, key)
        self._session, self._session_replayed = start or started_with(agent, key, history, cases), bool(start)
        return start

    def plan(self) -> Plan:
        """Resolved on the first model call of the run (this is when the cassette is read)."""
        if self._plan is None:
            self._plan = self.case.plan(self.index)
        return self._plan

    def finish(self, *, completed: bool) -> list[str]:
        """Divergence messages for recorded turns this run left unused (only when it completed)."""
        plan = self._plan
        if not completed or plan is None or plan.kind != "replay" or plan.run is None:
            return []
        messages = []
        run = plan.run
        if run.turns is not None:
            messages += self._unused(("turns",), run.turns, f"the agent completed run {self.index + 1}")
        for agent, tapes in run.children.items():
            for k, tape in enumerate(tapes):
                if k >= self._counts.get(agent, 0):
                    if not tape.turns:
                        continue
                    messages.append(
                        f"{self._where(tape)}: agent {agent!r} was recorded with {len(tape.turns)} turn(s) "
                        f"but run {self.index + 1} never invoked it (invocation {k + 1}); the run took "
                        "fewer steps than recorded"
                    )
                elif ("children", agent, k) not in self._ended:
                    messages += self._unused(("children", agent, k), tape, f"agent {agent!r} completed")
        return messages

    def _unused(self, key: TapeKey, tape: Tape, who: str) -> list[str]:
        used = self._cursors.get(key, 0)
        if used >= len(tape.turns):
            return []
        message = (
            f"{self._where(tape)}: {who} after {used} of {len(tape.turns)} recorded model turn(s); "
            "it took fewer steps than recorded"
        )
        return [message]

    def _where(self, tape: Tape) -> str:
        return f"{self.case.shown_path}: {tape.where}"

    # -- used by InvocationModel ---------------------------------------------

    def tape(self, key: TapeKey, agent_name: str) -> Tape:
        """The recorded turns for invocation ``key`` of the replayed run."""
        plan = self.plan()
        assert plan.run is not None
        run, pos = plan.run, plan.position
        if len(key) == 1:
            if run.turns is None:
                raise CassetteError(
                    f"{self.case.shown_path}: runs[{pos}]: the case's agent {agent_name!r} asked for a model "
                    f"in run {self.index + 1} but the cassette run has no 'turns'"
                )
            return run.turns
        _, agent, k = key
        tapes = run.children.get(agent, [])
        if k >= len(tapes):
            raise CassetteError(
                f"{self.case.shown_path}: runs[{pos}]: no entry children.{agent}[{k}]: agent {agent!r} asked "
                f"for a model in its invocation {k + 1} of run {self.index + 1}, but the cassette "
                f"records {len(tapes)} invocation(s) of it{self._stage_hint(run, agent)}"
            )
        return tapes[k]

    def _stage_hint(self, run: CassetteRun, agent: str) -> str:
        """Top-level ``turns`` the case's agent never asked for, while another agent finds none: the
        turns of a sequential pipeline's stage written where the pipeline's own would go."""
        if run.turns is None or not run.turns.turns or self._cursors.get(("turns",), 0) or run.children.get(agent):
            return ""
        return (f"; the run's top-level `turns:` ({len(run.turns.turns)}) belong to the case's own agent, which "
                "never asked for a model (a sequential pipeline has none: each stage replays its own "
                f"turns): write them under the stage, `- children: {{{agent}: [{{turns: [...]}}]}}` in "
                "place of `- turns: [...]` (docs/models.md, \"Cassettes\")")

    def next_turn(self, key: TapeKey, tape: Tape, agent_name: str) -> tuple[int, Turn]:
        """Advance the cursor of ``key``; raises when the tape is used up."""
        used = self._cursors.get(key, 0)
        if used >= len(tape.turns):
            who = "the agent" if key == ("turns",) else f"agent {agent_name!r}"
            raise CassetteError(
                f"{self._where(tape)}: {who} asked for model turn {used + 1} of run {self.index + 1} "
                f"but the cassette has {len(tape.turns)}; the agent took more steps than recorded"
            )
        self._cursors[key] = used + 1
        return used, tape.turns[used]

    def check(self, key: TapeKey, tape: Tape, index: int, request: ModelRequest) -> dict[str, str]:
        """Compare ``request`` with the one turn ``index`` of ``tape`` was recorded for: a
        difference fails the run in strict replay (``ReplayDiverged``) and is a note (once per
        invocation) otherwise. Returns the recorded values the turn's answer repeats, mapped to
        those that take their place now (``fingerprint.echo_now``)."""
        turn = tape.turns[index]
        if turn.request is None:
            return {}
        normal = normalised(request, self.case.rules(), kinds_of(turn.request), self.start, self.case.masker.data)
        sections = [t.request for t in tape.turns[: index + 1]]
        divergence = find(turn.request, normal, request, texts_by_index(sections))
        if divergence is None:
            return echo_now(turn.request, normal.found)
        in_history = (session_difference(turn.request, normal.request, self._session, self._session_replayed)
                      if self._session is not None else None)
        if in_history:
            divergence = Divergence(in_history, "session", legacy=divergence.legacy)
        elif divergence.rule is None and self._rules_changed(divergence, request, normal.request, turn.request):
            divergence.rule = ("the matching rules changed this message before it was compared: digests "
                               "recorded before a rule was added do not know it; refresh them with "
                               "--connic-record-mode=digests (docs/models.md, \"Matching rules\")")
        where = f"{self.case.shown_path}: {turn.where}"
        message = (f"{where}: the request of {request.agent_name!r} in run {self.index + 1} differs from the "
                   f"recorded one: {divergence.text()}{_hint(divergence)}")
        if self.case.strict:
            raise ReplayDiverged(message, divergence, where)
        if key not in self._noted:
            self._noted.add(key)
            self.notes.append(message)
        return echo_now(turn.request, normal.found)

    def _rules_changed(self, divergence: Divergence, request: ModelRequest, normal: ModelRequest,
                       recorded: Mapping[str, object]) -> bool:
        """Whether the matching rules changed the message that differs (a rule added after the
        digests were recorded)."""
        at = divergence.index
        if at is None or not self.case.rules():
            return False
        plain = normalised(request, (), kinds_of(recorded), self.start, self.case.masker.data).request.messages
        return at < len(plain) and plain[at] != normal.messages[at]

    def add_recorded(self, key: TapeKey, turn: Turn) -> None:
        with self.case._lock:
            self._recorded.setdefault(key, []).append(turn)

    def to_cassette_run(self) -> CassetteRun:
        """The turns this run recorded, as a cassette run."""
        run = CassetteRun()
        root = self._recorded.get(("turns",))
        if root:
            run.turns = Tape(list(root))
        for agent, count in self._counts.items():
            tapes = [Tape(list(self._recorded.get(("children", agent, k), []))) for k in range(count)]
            while tapes and not tapes[-1].turns:
                tapes.pop()
            if tapes:
                run.children[agent] = tapes
        run.calls = list(self._calls)
        if self._world is not None and self._world.recording:
            run.world = self._world.world
        run.session = self._session
        return run


class InvocationModel:
    """The model of one agent invocation within a run (replays or records)."""

    def __init__(self, run: RunModelsImpl, agent_name: str, key: TapeKey) -> None:
        self.run = run
        self.agent_name = agent_name
        self.key = key
        self._live: Model | None = None
        #: how many messages of the invocation's requests its earlier turns already sent
        self._sent = 0

    def ended_early(self) -> None:
        """This invocation ended for its own reason (blocked, awaiting approval, failed):
        its unused recorded turns are not a divergence."""
        self.run._ended.add(self.key)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer from the cassette, or from the provider while recording."""
        plan = self.run.plan()
        if plan.kind == "record":
            return await self._record(request)
        tape = self.run.tape(self.key, self.agent_name)
        index, turn = self.run.next_turn(self.key, tape, self.agent_name)
        echoes = self.run.check(self.key, tape, index, request) if self.run.case.mode != "digests" else {}
        _check_tools(turn, request, self.run.case.shown_path)
        response = response_from_turn(turn, index, request, echoes)
        if self.run.case.mode == "digests":  # this replay's requests become the recorded ones
            self.run.case.refresh(turn, self._section(request, response))
        self._sent = len(request.messages)
        return response

    async def _record(self, request: ModelRequest) -> ModelResponse:
        try:
            if self._live is None:
                self._live = self.run.case.live_model(self.agent_name)
            response = await self._live.complete(request)
        except BaseException as exc:
            self.run.mark_broken(f"the model call of agent {self.agent_name!r} failed", exc)
            raise
        recorded = turn_from_response(response, request)
        recorded.request = self._section(request, response)
        self.run.add_recorded(self.key, recorded)
        self._sent = len(request.messages)
        return response

    def _section(self, request: ModelRequest, response: ModelResponse) -> dict[str, object]:
        """The ``request`` section a turn recorded now keeps (models/fingerprint.py)."""
        case = self.run.case
        normal = normalised(request, case.rules(), case.volatile, self.run.start, case.masker.data)
        return section(normal, case.volatile, since=self._sent, system=self._sent == 0, response=response)


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _check_tools(turn: Turn, request: ModelRequest, path: str) -> None:
    offered = [t.name for t in request.tools]
    for n, call in enumerate(turn.tool_calls):
        if call.name not in offered:
            available = ", ".join(offered) if offered else "no tools"
            raise CassetteError(
                f"{path}: {turn.where}.tool_calls[{n}]: the cassette calls tool {call.name!r}, "
                f"but the request of {request.agent_name!r} offers: {available}"
            )


def response_from_turn(turn: Turn, index: int, request: ModelRequest,
                       echoes: Mapping[str, str] | None = None) -> ModelResponse:
    """The response a recorded turn replays (ids are deterministic when not recorded); ``echoes``:
    recorded values of the request the answer repeats, replaced by the values that took their
    place in this replay (a tool's new ``uuid4()``, passed on by the model)."""

    def now(value: object) -> object:
        if not echoes:
            return copy.deepcopy(value)
        return substitute(value, lambda text: _echo(text, echoes))

    calls = [
        ToolCallRequest(call.id or f"call_{index + 1}_{n + 1}", call.name, now(call.arguments))  # type: ignore[arg-type]
        for n, call in enumerate(turn.tool_calls)
    ]
    content = now(turn.content)
    return ModelResponse(
        content=content if isinstance(content, str) else None,
        tool_calls=calls,
        input_tokens=turn.input_tokens or 0,
        output_tokens=turn.output_tokens or 0,
        cost=turn.cost or 0.0,
        model=turn.model or request.model,
    )


def _echo(text: str, echoes: Mapping[str, str]) -> str:
    for old, new in echoes.items():
        text = text.replace(old, new)
    return text


def turn_from_response(response: ModelResponse, request: ModelRequest) -> Turn:
    """What a live response records (provider tool-call ids are left out: replay makes its own);
    the caller sets its ``request`` section (``fingerprint.section``)."""
    content = response.content
    if content is None and not response.tool_calls:
        content = ""  # an empty final answer; a turn needs content or tool calls
    return Turn(
        content=content,
        tool_calls=[RecordedToolCall(c.name, copy.deepcopy(c.arguments)) for c in response.tool_calls],
        input_tokens=response.input_tokens,
        output_tokens=response.output_tokens,
        cost=response.cost or None,
        model=response.model if response.model and response.model != request.model else None,
    )


def _hint(divergence: Divergence) -> str:
    """What the note adds to the difference: a matching rule for a volatile value, or that an
    older recording keeps digests only."""
    if divergence.rule:
        return f"; {divergence.rule}"
    if divergence.legacy and divergence.part in ("message", "added", "system"):
        return ("; the recording keeps digests only (an older version made it): re-record the case to "
                "see what changed and to let UUIDs, hex ids and times vary (docs/models.md, \"Replay you "
                "can trust\")")
    return ""
