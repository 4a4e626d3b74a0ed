"""Where a project's runtime is assembled: the one place that turns settings into a
``ProjectRuntime`` and runs a suite's case on it.

The pytest session (``plugin/session.py``), the ``connic`` fixture and A/B (through the session),
the benchmarks and the tests all build runtimes here, so running one case needs no pytest session:
``assemble(root, RunSettings(isolation="none"))`` and ``run_suite_case(runtime, "tests/x.yaml",
"name")`` give the case's typed ``CaseOutcome``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_connic.errors import ConnicError
from pytest_connic.execution.case import ProjectRuntime, RunListener, RuntimeOptions
from pytest_connic.execution.interruption import StopSignal
from pytest_connic.execution.models import ModelSource
from pytest_connic.models.base import Model
from pytest_connic.models.cassette import DEFAULT_SIZE_LIMIT
from pytest_connic.models.matching import MatchRule
from pytest_connic.models.pricing import Prices
from pytest_connic.models.volatile import KINDS
from pytest_connic.project.loaded import LoadedProject
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.runtime.hosted import HostedSettings
from pytest_connic.runtime.ports import Host, NullHost
from pytest_connic.secrets import Masker

if TYPE_CHECKING:
    from pytest_connic.history.budget import Budget
    from pytest_connic.models.replay import UnrecordedNotes
    from pytest_connic.project.apispec import ApiRegistry


def _no_aliases() -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class RunSettings:
    """What a runtime is built from (the session's resolved settings, or a test's choice), with
    pytest-connic's defaults."""

    #: a record mode (``none``, ``once``, ``new_runs``, ``all``, ``digests``) or ``live``
    mode: str = "none"
    cassette_dir: str = "cassettes"
    concurrency: int = 8
    early_stop: bool = False
    #: ``--connic-env`` (names the data folder of the local services)
    env: str | None = None
    #: ``process`` (a worker process per run) or ``none`` (user code in this process)
    isolation: str = "process"
    worker_memory_mb: int | None = None
    match_rules: tuple[MatchRule, ...] = ()
    replay: str = "strict"
    volatile: tuple[str, ...] = KINDS
    cassette_size_limit: int = DEFAULT_SIZE_LIMIT
    aliases: Callable[[], dict[str, str]] = _no_aliases
    prices: Prices = field(default_factory=Prices)
    hosted: HostedSettings = field(default_factory=HostedSettings)
    mcp_urls: Mapping[str, str] = field(default_factory=dict)
    budget: Budget | None = None
    unrecorded: UnrecordedNotes | None = None
    #: the model recordings and live runs call (None: LiteLLM)
    live: Callable[[str], Model] | None = None

    def options(self, masker: Masker) -> RuntimeOptions:
        """The runtime's options (its model source masks with ``masker``)."""
        models = ModelSource(cassette_dir=self.cassette_dir, mode=self.mode, masker=masker, aliases=self.aliases,
                             cassette_size_limit=self.cassette_size_limit, match_rules=self.match_rules,
                             unrecorded=self.unrecorded, prices=self.prices, replay=self.replay,
                             volatile=self.volatile, live=self.live)
        return RuntimeOptions(concurrency=self.concurrency, early_stop=self.early_stop, env=self.env, models=models,
                              isolation=self.isolation, worker_memory_mb=self.worker_memory_mb, hosted=self.hosted,
                              mcp_urls=self.mcp_urls, budget=self.budget)


def assemble(root: Path, settings: RunSettings, *, masker: Masker | None = None, host: Host | None = None,
             api: ApiRegistry | None = None, interrupted: Callable[[BaseException], bool] = lambda exc: False,
             load: Callable[[Callable[[], LoadedProject]], LoadedProject] = lambda make: make(),
             run_listeners: Sequence[RunListener] = (), stop: StopSignal | None = None) -> ProjectRuntime:
    """The runtime of the project at ``root``: the project read (statically under process
    isolation, ``load`` wraps the reading: the session bounds it), its local services, its model
    source and its worker pool. Close it with ``ProjectRuntime.close()``."""
    masker = masker if masker is not None else Masker(())

    def make() -> LoadedProject:
        return LoadedProject(root, interrupted, api, static=settings.isolation == "process")

    return ProjectRuntime(load(make), settings.options(masker), masker=masker,
                          host=host if host is not None else NullHost(), run_listeners=run_listeners, stop=stop)


class CaseNotFound(ConnicError, LookupError):
    """``run_suite_case`` was asked for a suite or a case the project does not have (or that is
    invalid): the message says which, and what there is."""


def run_suite_case(runtime: ProjectRuntime, suite: str, case: str, *, nodeid: str | None = None) -> CaseOutcome:
    """Run the case named ``case`` of the suite ``suite`` (a path relative to the project, such as
    ``tests/orders.yaml``) and return its outcome; the runs' warnings go where the runtime's host
    sends them (``NullHost``: ``warnings.warn`` at the caller)."""
    from pytest_connic.suite.loader import load_suite

    root = runtime.project.root
    loaded = load_suite(root / suite, root)
    if loaded is None:
        raise CaseNotFound(f"{suite}: not a suite of the project at {root}")
    spec = next((c for c in loaded.cases if c.name == case), None)
    if spec is None:
        raise CaseNotFound(f"{suite}: no case {case!r}; its cases: {', '.join(c.name for c in loaded.cases)}")
    if spec.error is not None:
        raise CaseNotFound(spec.error)
    return runtime.run_case(loaded, spec, nodeid or f"{suite}::{case}")
