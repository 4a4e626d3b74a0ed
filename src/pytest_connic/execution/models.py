"""Which models a case's runs talk to: the user's hook, cassettes, or live providers."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_connic.checks.compiled import ResolvedCase
from pytest_connic.models.base import Model
from pytest_connic.models.cassette import DEFAULT_SIZE_LIMIT, SessionStart
from pytest_connic.models.cassette_paths import cassette_path
from pytest_connic.models.matching import MatchRule
from pytest_connic.models.pricing import Prices
from pytest_connic.models.replay import CaseModels, UnrecordedNotes
from pytest_connic.models.runs import REPLAY_ONLY, RunModelsImpl
from pytest_connic.models.volatile import KINDS
from pytest_connic.models.world import RunWorld
from pytest_connic.records.events import DivergenceNoteEvent

if TYPE_CHECKING:
    from pytest_connic.records.outcome import CaseOutcome
    from pytest_connic.runtime.services import RuntimeServices
    from pytest_connic.secrets import Masker
    from pytest_connic.suite.loader import Suite


@dataclass(frozen=True)
class ModelSource:
    """What the session's settings say about models: where cassettes live and how they are used."""

    cassette_dir: str  #: relative to the project root
    mode: str  #: a record mode (``none``, ``once``, ``new_runs``, ``all``) or ``live``
    masker: Masker
    #: ``--connic-model-alias`` as a mapping; validated when the first live model is built
    aliases: Callable[[], dict[str, str]]
    #: the largest cassette read, in bytes (``connic_cassette_size_limit``)
    cassette_size_limit: int = DEFAULT_SIZE_LIMIT
    #: the matching rules of ini ``connic_match_rules`` (docs/models.md, "Matching rules")
    match_rules: tuple[MatchRule, ...] = ()
    #: why earlier recording sessions wrote no cassette (pytest's cache; None without one)
    unrecorded: UnrecordedNotes | None = None
    #: what model turns cost (``connic_model_prices`` over LiteLLM's map)
    prices: Prices = field(default_factory=Prices)
    #: ``connic_replay``: a request that differs from its recording fails its run (``strict``) or is
    #: a ``CassetteDivergenceWarning`` (``lenient``)
    replay: str = "strict"
    #: ``connic_volatile``: the kinds of volatile value a recording leaves out of its digests
    volatile: tuple[str, ...] = KINDS
    #: the model recordings and live runs call, by agent name (None: LiteLLM, the ``[live]`` extra);
    #: for library use and tests, any object with ``async complete(request)``
    live: Callable[[str], Model] | None = None

    def replaying(self) -> ModelSource:
        """The same source, replaying only (never recording, never live)."""
        return dataclasses.replace(self, mode="none")


class HookedRunModels:
    """One run's models: ``pytest_connic_make_model`` first, then the case's cassette/live source."""

    def __init__(self, base: RunModelsImpl, services: RuntimeServices, case: ResolvedCase | None, index: int) -> None:
        self.base = base
        self.services = services
        self.case = case
        self.index = index
        #: the agents whose model is the cassette's (or live), not the user's hook's
        self._based: set[str] = set()

    @property
    def notes(self) -> list[str]:
        return list(getattr(self.base, "notes", []))

    def model_for(self, agent_name: str, *, root: bool) -> Model:
        supplied = self.services.user_model(self.services.agent(agent_name), self.case, self.index)
        if supplied is not None:
            return supplied
        self._based.add(agent_name)
        return self.base.model_for(agent_name, root=root)

    def session_begins(self, agent: str, key: str | None, history: list[dict[str, object]], cases: list[str],
                       *, fresh: bool) -> SessionStart | None:
        """The cassette's session start (runtime/sessions.py ``begin_session``); None for an agent
        whose model the user's hook supplies (its cassette is never read)."""
        if agent not in self._based:
            return None
        return self.base.session_begins(agent, key, history, cases, fresh=fresh)

    async def external(self, kind: str, name: str, arguments: object,
                       call: Callable[[], Awaitable[object]]) -> object:
        return await self.base.external(kind, name, arguments, call)

    def calls_live(self) -> bool:
        return bool(self.base.calls_live())

    def world(self, now: float) -> RunWorld | None:
        """The run's recorded world (models/world.py), None without one."""
        return self.base.world(now)

    def finish(self, *, completed: bool) -> list[str]:
        return self.base.finish(completed=completed)


class HookedCaseModels:
    """The model source of one case."""

    def __init__(self, base: CaseModels, services: RuntimeServices, case: ResolvedCase | None,
                 prices: Prices | None = None) -> None:
        self.base = base
        self.services = services
        self.case = case
        #: what the runs' model turns cost (priced when a run ends)
        self.prices = prices or Prices()

    @property
    def live(self) -> bool:
        """Live mode: runs call providers and really wait (runtime/clock.py)."""
        return self.base.mode == "live"

    def for_run(self, index: int) -> HookedRunModels:
        return HookedRunModels(self.base.for_run(index), self.services, self.case, index)

    def save(self, *, interrupted: str | None = None) -> Path | None:
        return self.base.save(interrupted=interrupted)

    @property
    def unrecorded(self) -> str | None:
        """Why this session's recording wrote no cassette (an error of the case)."""
        return self.base.unrecorded

    @property
    def replayed(self) -> tuple[int, int] | None:
        """``(runs replayed, runs the cassette holds)``; None when no run replayed one."""
        return self.base.replayed


def divergence_notes(outcome: CaseOutcome) -> list[str]:
    """The divergence notes of a case's runs (the runner keeps them as ``note`` events), in run
    order, without duplicates."""
    notes = (e.text for r in outcome.records for e in r.events
             if isinstance(e, DivergenceNoteEvent))  # not the other notes of a trace
    return list(dict.fromkeys(notes))


def divergence_message(outcome: CaseOutcome) -> str | None:
    """The text of the case's one ``CassetteDivergenceWarning`` (None when no run diverged): the
    first request that differs from its recording, and how many more do (however many runs
    diverged). The plugin emits it at the case's suite file and line (``Host.warn_once``)."""
    notes = divergence_notes(outcome)
    if not notes:
        return None
    more = f" (and {len(notes) - 1} more difference(s))" if len(notes) > 1 else ""
    return (f"{notes[0]}{more}; the replayed answers were recorded for another request: "
            "re-record the cassette with --connic-record-mode=all")


def case_models(source: ModelSource, services: RuntimeServices, suite: Suite, case: ResolvedCase) -> HookedCaseModels:
    """The model source of a suite case: its cassette under ``source.cassette_dir``."""
    siblings = [c.name for c in suite.cases]
    path = case_cassette(source, services, suite.relpath, case["name"], siblings)

    def taken() -> frozenset[str]:  # only asked when an old file name exists: O(n^2) per case
        return frozenset(case_cassette(source, services, suite.relpath, n, siblings).name
                         for n in siblings if n != case["name"])

    return models_at(source, services, path, case, taken=taken)


def case_cassette(
    source: ModelSource, services: RuntimeServices, folder: str, name: str, siblings: list[str] | None = None
) -> Path:
    """The cassette of the case ``name`` in ``folder`` (a suite's path, or the fixture's folder);
    ``siblings``: the names of the suite's cases (names differing only in case get distinct files)."""
    return cassette_path(services.root / source.cassette_dir, folder, name, siblings=siblings or (),
                         suites_root=services.root)


def models_at(
    source: ModelSource, services: RuntimeServices, path: Path, case: ResolvedCase | None,
    *, taken: Callable[[], frozenset[str]] = frozenset,
) -> HookedCaseModels:
    """The model source replaying (or recording) the cassette at ``path``; ``case`` is what
    ``pytest_connic_make_model`` receives (None for the ``connic`` fixture); ``taken()``: the file
    names of the other cases' cassettes in that folder."""
    mode = source.mode
    live = source.live
    if mode not in REPLAY_ONLY and live is None:  # replay only: the live backend is never imported
        from pytest_connic.models.live import LiteLLMModel

        shared = LiteLLMModel(aliases=source.aliases(), masker=source.masker)

        def live(_agent_name: str) -> Model:
            return shared

    def notice(message: str, cassette: Path) -> None:  # at the cassette, not pytest-connic's source
        services.host.warn_once(None, message, location=(cassette, 1))

    base = CaseModels(path, mode=mode, live=live, masker=source.masker, root=services.root,
                      size_limit=source.cassette_size_limit, taken=taken,
                      warn=notice, rules=source.match_rules, unrecorded=source.unrecorded,
                      strict=source.replay == "strict", volatile=source.volatile)
    return HookedCaseModels(base, services, case, source.prices)
