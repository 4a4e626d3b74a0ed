"""Suite files and case items: how a case item runs, and how its failures look."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import pytest

from pytest_connic.errors import ConnicError
from pytest_connic.plugin.session import ConnicSession
from pytest_connic.plugin.session import state as state_of
from pytest_connic.project.layout import DiscoveryError
from pytest_connic.warnings import ConnicWarning

if TYPE_CHECKING:
    from pytest_connic.project.load import LoadWarning
    from pytest_connic.project.loaded import LoadedProject
    from pytest_connic.records.run import CaseOutcome
    from pytest_connic.suite.loader import CaseSpec, Suite

# The SDK (and pydantic behind it) is imported by the first suite collected, not by importing
# this module: session hooks look for ``CaseItem``s in every session, Connic project or not.


class CaseFailed(ConnicError):
    """A case missed its expectations. ``text`` is the whole plain-text report."""

    def __init__(self, text: str, outcome: CaseOutcome | None = None) -> None:
        super().__init__(text.splitlines()[0] if text else "")
        self.text = text
        self.outcome = outcome


class CaseInfrastructureError(ConnicError):
    """A provider was down or refusing: the case is an error, the session exits 2."""

    def __init__(self, text: str, outcome: CaseOutcome | None = None) -> None:
        super().__init__(text.splitlines()[0] if text else "")
        self.text = text
        self.outcome = outcome


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while one suite file is collected.

    Parsing and validating a suite allocates thousands of short-lived objects (YAML nodes,
    positions, items), none of them in reference cycles, so reference counting frees them; but
    each allocation burst would trigger full collections that rescan every item collected so
    far, which was a quarter of the time of collecting 10,000 cases. No user code runs here.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class SuiteFile(pytest.File):
    """A Connic suite (``tests/**/*.yaml``): one item per case."""

    def __init__(self, *, project_root: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.project_root = project_root

    def collect(self) -> list[pytest.Item]:
        with _gc_paused():
            return self._collect()

    def _collect(self) -> list[pytest.Item]:
        from pytest_connic.project.load import ProjectError
        from pytest_connic.suite.loader import SuiteError, load_suite

        state = state_of(self.config)
        try:
            index = state.project_index(self.project_root)
        except (ProjectError, DiscoveryError) as exc:
            raise self.CollectError(f"Connic project {self.project_root}: {exc}") from None
        if _shows_collection_warnings(self.config):
            try:
                show_load_warnings(state, index.warnings)
            except ConnicWarning as exc:  # -W error: this suite's collection fails with it
                raise self.CollectError(f"{type(exc).__name__}: {exc}") from None
        if index.load_errors and index.is_first_suite(self.path):
            raise self.CollectError(
                "the Connic project failed to load (connic lint reports the same):\n"
                + "\n".join(f"  {e}" for e in index.load_errors)
            )
        try:
            suite = load_suite(self.path, self.project_root)
        except SuiteError as exc:
            raise self.CollectError(str(exc)) from None
        if suite is None:
            return []  # an empty document: Connic skips it
        unknown = index.unknown_agent_message(suite.relpath, suite.agent_name, not suite.agent_explicit)
        if unknown:
            raise self.CollectError(unknown)
        group = _session_group(self.config, index.agents, suite.agent_name)
        suffix = f"@{group}" if group is not None and _loadgroup_suffix_needed(self.config) else ""
        items: list[pytest.Item] = []
        for case in suite.cases:
            named: dict[str, Any] = {"nodeid": f"{self.nodeid}::{case.name}{suffix}"} if suffix else {}
            item = CaseItem.from_parent(self, name=case.name, suite=suite, spec=case, **named)
            if group is not None:
                item.add_marker(pytest.mark.xdist_group(group))
            items.append(item)
        return items


def _session_group(config: pytest.Config, agents: Any, agent_name: str) -> str | None:
    """The ``xdist_group`` of the cases of an agent with a session, so that ``--dist loadgroup``
    keeps them on one worker's session store (runtime/sessions.py, docs/running.md "Sessions")."""
    if not config.pluginmanager.hasplugin("xdist"):
        return None
    from pytest_connic.runtime.sessions import xdist_group

    return xdist_group(agents, agent_name)


def _loadgroup_suffix_needed(config: pytest.Config) -> bool:
    """On an xdist worker under ``--dist loadgroup``, whether the group suffix must be in the
    item's nodeid from the start: xdist appends it by assigning ``item._nodeid``, which pytest
    releases with structured node ids (``Node._id``) ignore (pytest-xdist#1386), so the scheduler
    would never see the group."""
    if not getattr(config.option, "loadgroup", False):
        return False
    return any("_id" in getattr(cls, "__slots__", ()) for cls in pytest.Item.__mro__)


#: one marker shared by every case (marks are immutable): a new one per item was measurable
#: in collecting 10,000 cases
_CONNIC_MARK = pytest.mark.connic


class CaseItem(pytest.Item):
    """One case of a suite; it runs the agent ``runs`` times."""

    def __init__(self, *, suite: Suite, spec: CaseSpec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite = suite
        self.spec = spec
        self.outcome: CaseOutcome | None = None
        #: the project its runs loaded (its load warnings are shown after the runs)
        self.loaded: LoadedProject | None = None
        #: what the runs in ``setup`` left for ``runtest`` to raise (``CaseFailed``, or a bug), with
        #: its traceback from ``setup`` down (re-raising prepends pytest's frames to it)
        self._verdict: tuple[Exception, TracebackType | None] | None = None
        self.add_marker(_CONNIC_MARK)

    @property
    def project_root(self) -> Path:
        parent = self.parent
        assert isinstance(parent, SuiteFile)
        return parent.project_root

    def setup(self) -> None:
        state = state_of(self.config)
        if self.spec.error is not None:
            record_invalid(state, self)
            pytest.fail(self.spec.error, pytrace=False)
        if self.config.getoption("setuponly", False):
            return  # --setup-only / --setup-plan promise that no test runs
        if state.stop.is_set():  # the session is stopping: nothing more starts
            self._interrupted(state)
        # The runs execute here and ``runtest`` judges them, like a fixture that gathers evidence
        # and a test that asserts on it: so a provider that is down (the runs could not happen)
        # is a pytest *error* in every report (terminal, JUnit, xdist), and a bad verdict a failure.
        try:
            with state.interrupts.case():
                run_item(state, self)
        except CaseInfrastructureError as exc:
            text = exc.text
        except CaseFailed as exc:  # the verdict belongs to the call phase
            self._verdict = (exc, exc.__traceback__)
            self._after_stop(state)
            return
        except BaseException as exc:  # noqa: BLE001 -- whatever ended the case, the case has its outcome
            if isinstance(exc, Exception) and self._is_bug(state, exc):
                self._verdict = (exc, exc.__traceback__)  # a bug of the plugin: its traceback, in the call phase
                return
            text = self._escaped(state, exc)
        else:
            self._after_stop(state)
            return
        pytest.fail(text, pytrace=False)  # outside the except block: no chained traceback

    def _after_stop(self, state: ConnicSession) -> None:
        """After a real SIGINT/SIGTERM during this case: the session stops after it, through
        pytest's own ``shouldstop`` (exit code 2, every report written); an unfinished case is
        skipped as interrupted."""
        if not state.stop.is_set():
            return
        self.session.shouldstop = state.interrupts.reason
        if self.outcome is not None and self.outcome.interrupted:
            self._verdict = None
            pytest.skip(self.outcome.interrupted)

    def _interrupted(self, state: ConnicSession) -> None:
        """This case was never started: the session is stopping."""
        outcome = _setup_outcome(state, self, None)
        outcome.interrupted = state.interrupts.reason
        _add_junit_properties(state, self)
        self.session.shouldstop = state.interrupts.reason
        pytest.skip(outcome.interrupted)

    def _is_bug(self, state: ConnicSession, exc: Exception) -> bool:
        """An exception with no frame of the user's project: pytest-connic's own bug (its traceback
        is kept for the report); the case still gets an outcome."""
        from pytest_connic.project.located import exception_text, user_location

        if user_location(exc, self.project_root) is not None:
            return False
        if self.outcome is None or not any(o is self.outcome for o in state.outcomes):
            _setup_outcome(state, self, f"internal error in pytest-connic: {exception_text(exc)}")
            _add_junit_properties(state, self)
        return True

    def _escaped(self, state: ConnicSession, exc: BaseException) -> str:
        """A ``BaseException`` ended the case's runs: the case keeps an outcome; the user's real
        interruption and pytest's own outcomes (pytest-timeout's failure, ``pytest.exit``)
        propagate, anything else (user code's ``KeyboardInterrupt``, ``GeneratorExit``,
        ``SystemExit``, a custom ``BaseException``) is this case's error, located."""
        from pytest_connic.project.located import exception_text, located

        if state.interrupts.real(exc):
            raise exc  # the user's second Ctrl-C: the session ends now; sessionfinish marks the case
        outcome_exc = isinstance(exc, (pytest.fail.Exception, pytest.skip.Exception, pytest.exit.Exception))
        text = (exception_text(exc) if outcome_exc else
                f"{located(exc, self.project_root, f'{self.suite.relpath}:{self.spec.line}')} "
                "escaped the case's runs and ended them")
        if self.outcome is None or not any(o is self.outcome for o in state.outcomes):
            _setup_outcome(state, self, text)
            _add_junit_properties(state, self)
        if outcome_exc:
            raise exc
        return f"{self.suite.relpath}:{self.spec.line}: case '{self.spec.name}' ({self.suite.agent_name}): {text}"

    def runtest(self) -> None:
        verdict = self._verdict[0] if self._verdict is not None else None
        if self.outcome is not None:
            from pytest_connic.execution.models import divergence_notes, warn_divergence

            try:
                _show_runtime_load_warnings(state_of(self.config), self)
                state = state_of(self.config)
                warn_divergence(divergence_notes(self.outcome), (state.shown_path(self.path), self.spec.line))
            except ConnicWarning:  # -W error: the case fails with it, unless it failed anyway
                if verdict is None:
                    raise
        if verdict is not None:
            raise verdict

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, (CaseFailed, CaseInfrastructureError)):
            from pytest_connic.plugin.longrepr import case_longrepr

            return case_longrepr(excinfo.value.text, excinfo.value.outcome, state_of(self.config).masker,
                                 style=self.config.getoption("tbstyle", "auto"))
        if isinstance(excinfo.value, ConnicWarning):  # made an error with -W: a message, not a bug
            return f"{self.suite.relpath}:{self.spec.line}: {type(excinfo.value).__name__}: {excinfo.value}"
        if self._verdict is not None:
            exc, tb = self._verdict
            if excinfo.value is exc and tb is not None:  # show it from setup down, as if uncaught
                excinfo = pytest.ExceptionInfo.from_exc_info((type(exc), exc, tb))
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.spec.line - 1, f"{self.suite.agent_name}::{self.spec.name}"


def _shows_collection_warnings(config: pytest.Config) -> bool:
    """Every xdist worker collects every suite: only the first (``gw0``) shows the collection's
    load warnings, so the controller's summary has each once (pytest groups identical warnings by
    text, but would list the location of each worker's copy)."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput is None or workerinput.get("workerid", "gw0") == "gw0"


def show_load_warnings(state: ConnicSession, found: list[LoadWarning], seen: frozenset[str] = frozenset()) -> None:
    """Each load warning once per session, located at the file (and line) it is about, so pytest's
    warning summary names the user's file, not pytest-connic's source."""
    import warnings

    from pytest_connic.warnings import ConnicLoadWarning, UnknownAgentKeyWarning

    for warning in found:
        key = f"load:{warning.key}"
        if warning.key in seen or key in state.warned:
            continue
        state.warned.add(key)
        category = UnknownAgentKeyWarning if warning.unknown_key else ConnicLoadWarning
        warnings.warn_explicit(category(warning.message), category, str(warning.path), warning.line)


def _show_runtime_load_warnings(state: ConnicSession, item: CaseItem) -> None:
    """What the project's real import warned about that collection could not see (middleware or
    hooks that fail to import: collection imports nothing), after the case's runs loaded them."""
    if item.loaded is None:
        return
    index = state.project_index(item.project_root)
    show_load_warnings(state, item.loaded.warnings, frozenset(w.key for w in index.warnings))


def run_item(state: ConnicSession, item: CaseItem) -> None:
    """Run one case item; raises ``CaseFailed`` / ``CaseInfrastructureError`` on a bad verdict."""
    from pytest_connic.project.load import ProjectError
    from pytest_connic.reports.failure import failure_text

    state.coverage_roots.add(item.project_root)
    try:
        with state.case_running(item.path, item.spec.line):
            _run_case(state, item)
    except ProjectError as exc:
        outcome = _setup_outcome(state, item, str(exc))
        raise CaseFailed(failure_text(outcome, state.masker), outcome) from None
    finally:
        _add_junit_properties(state, item)


def _run_case(state: ConnicSession, item: CaseItem) -> None:
    """Run the case behind ``item`` and raise on a bad verdict."""
    from pytest_connic.project.load import ProjectError
    from pytest_connic.reports.failure import failure_text

    runtime = state.runtime(item.project_root)
    item.loaded = runtime.project
    failed = runtime.project.import_errors_for(item.suite.agent_name)
    if failed:
        raise ProjectError("the Connic project failed to load:\n" + "\n".join(f"  {e}" for e in failed))
    outcome = runtime.run_case(item.suite, item.spec, item.nodeid)
    item.outcome = outcome
    state.outcomes.append(outcome)
    if outcome.infrastructure_error:
        state.infrastructure_errors += 1
        raise CaseInfrastructureError(failure_text(outcome, state.masker), outcome)
    if not outcome.passed:
        raise CaseFailed(failure_text(outcome, state.masker), outcome)


def record_invalid(state: ConnicSession, item: CaseItem) -> None:
    """Count an invalid case in the reports (it fails in setup, no run happens)."""
    assert item.spec.error is not None
    _setup_outcome(state, item, item.spec.error)
    _add_junit_properties(state, item)


def _setup_outcome(state: ConnicSession, item: CaseItem, error: str | None) -> CaseOutcome:
    """The outcome of a case that could not start (invalid, or its project/env failed)."""
    from pytest_connic.execution.outcomes import suite_outcome

    outcome = suite_outcome(item.nodeid, item.suite, item.spec, setup_error=error)
    item.outcome = outcome
    state.outcomes.append(outcome)
    return outcome


def _add_junit_properties(state: ConnicSession, item: CaseItem) -> None:
    if item.outcome is not None and state.settings.junit_properties:
        from pytest_connic.reports.junit import junit_properties

        item.user_properties.extend(junit_properties(item.outcome))
