"""Suite files and case items: how a case item runs, and how its failures look."""

from __future__ import annotations

import contextlib
import gc
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_connic.errors import ConnicError
from pytest_connic.plugin.session import ConnicSession
from pytest_connic.plugin.session import state as state_of
from pytest_connic.project.layout import DiscoveryError
from pytest_connic.warnings import CassetteDivergenceWarning, ConnicWarning

if TYPE_CHECKING:
    from pytest_connic.plugin.pytest_private import TerminalRepr, TracebackStyle
    from pytest_connic.project.index import ProjectIndex
    from pytest_connic.project.load import LoadWarning
    from pytest_connic.project.loaded import LoadedProject
    from pytest_connic.records.outcome import CaseOutcome
    from pytest_connic.suite.loader import CaseSpec, Suite

# The SDK (and pydantic behind it) is imported by the first suite collected, not by importing
# this module: session hooks look for ``CaseItem``s in every session, Connic project or not.


class CaseFailed(ConnicError, AssertionError):
    """A case missed its expectations. ``text`` is the whole plain-text report.

    An ``AssertionError``: the case's verdict is its test's assertion, raised in pytest's call
    phase, so IDEs, allure and JUnit file it as a failure (not as a broken test)."""

    def __init__(self, text: str, outcome: CaseOutcome | None = None) -> None:
        super().__init__(text.splitlines()[0] if text else "")
        self.text = text
        self.outcome = outcome


class CaseErrored(ConnicError):
    """The case's runs could not happen or were cut short by something other than its verdict:
    pytest reports the case as an *error* (``pytest_report_teststatus``), and so do the reports."""

    def __init__(self, text: str, outcome: CaseOutcome | None = None) -> None:
        super().__init__(text.splitlines()[0] if text else "")
        self.text = text
        self.outcome = outcome


class CaseInfrastructureError(CaseErrored):
    """A provider was down or refusing: the case is an error, the session exits 2."""


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
            index = state.runtimes.project_index(self.project_root)
        except (ProjectError, DiscoveryError) as exc:
            raise self.CollectError(f"Connic project {self.project_root}: {exc}") from None
        self._show_warnings(state, index.warnings)
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
        unknown = index.unknown_agent_message(suite.agent_where, suite.agent_name, not suite.agent_explicit)
        if unknown:
            raise self.CollectError(unknown)
        self._check_statically(state, suite, index)
        group = _session_group(self.config, state, index.agents, suite.agent_name)
        suffix = f"@{group}" if group is not None and _loadgroup_suffix_needed(self.config) else ""
        items: list[pytest.Item] = []
        for case in suite.cases:
            name = item_name(case.name)
            named: dict[str, Any] = {"nodeid": f"{self.nodeid}::{name}{suffix}"} if suffix else {}
            item = CaseItem.from_parent(self, name=name, suite=suite, spec=case, **named)
            if group is not None:
                item.add_marker(pytest.mark.xdist_group(group))
            items.append(item)
        return items

    def _check_statically(self, state: ConnicSession, suite: Suite, index: ProjectIndex) -> None:
        """Mistakes caught before the run (suite/static.py): a case's error fails it in setup;
        the located warnings are shown once, and with ``-W error`` fail this file's collection."""
        from pytest_connic.suite.static import check_suite

        self._show_warnings(state, check_suite(suite, index))

    def _show_warnings(self, state: ConnicSession, found: list[LoadWarning]) -> None:
        """Load and collection warnings, shown once (on one process under xdist); with ``-W error``
        this suite's collection fails with the first."""
        if not found or not _shows_collection_warnings(self.config):
            return
        try:
            show_load_warnings(state, found)
        except ConnicWarning as exc:
            raise self.CollectError(f"{type(exc).__name__}: {exc}") from None


#: what a case name cannot hold as it is in a pytest node id: ``::`` (pytest splits command-line
#: ids there), ``[`` and ``]`` (a parametrization: pytest matches ``name`` against ``name[...]``, and
#: pytest 9.2 parses ``--lf``/``--nf`` ids at the first ``[``), control characters (an id is one
#: line of ``--co -q``), and ``%`` before two hex digits (so the escaping is reversible)
_ESCAPED = re.compile(r"::+|[\[\]\x00-\x1f\x7f-\x9f]|%(?=[0-9A-Fa-f]{2})")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def item_name(case_name: str) -> str:
    """The name of a case's pytest item (the last part of its node id): the case name, with each
    character pytest's node ids give a meaning to percent-encoded (``a [b] :: c`` ->
    ``a %5Bb%5D %3A%3A c``, docs/ci.md "Node ids"); every other name is unchanged."""
    return _ESCAPED.sub(lambda m: "".join(f"%{ord(c):02X}" for c in m.group()), case_name)


def case_name(name: str) -> str:
    """The case name behind an item name (the inverse of ``item_name``)."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), name)


def _session_group(config: pytest.Config, state: ConnicSession, agents: Mapping[str, object], agent_name: str) -> str | None:
    """The ``xdist_group`` of the cases of an agent with a session, so that ``--dist loadgroup``
    keeps them on one worker's session store (runtime/sessions.py, docs/running.md "Sessions").
    Only where history flows from case to case as on Connic: ``--connic-live``, a recording
    session, models from a ``pytest_connic_make_model`` hook. A case replayed from its cassette
    starts its session from the cassette (docs/models.md "Sessions") and needs no earlier case."""
    if not config.pluginmanager.hasplugin("xdist"):
        return None
    from pytest_connic.models.runs import REPLAY_ONLY
    from pytest_connic.runtime.sessions import xdist_group

    settings = state.settings
    from pytest_connic.plugin.defaults import user_implements

    hooked = user_implements(config, "pytest_connic_make_model")
    if not settings.live and settings.record_mode in REPLAY_ONLY and not hooked:
        return None
    return xdist_group(agents, agent_name)


def _loadgroup_suffix_needed(config: pytest.Config) -> bool:
    """On an xdist worker under ``--dist loadgroup``, whether the group suffix must be in the
    item's nodeid from the start: xdist appends it by assigning ``item._nodeid``, which pytest
    releases with structured node ids (``Node._id``) ignore (pytest-xdist#1386), so the scheduler
    would never see the group."""
    if not getattr(config.option, "loadgroup", False):
        return False
    from pytest_connic.plugin.pytest_private import structured_node_ids

    return structured_node_ids()


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
        #: the connic ``(name, value)`` pairs in ``user_properties`` (replaced on each attempt)
        self._junit: list[tuple[str, object]] = []
        self.add_marker(_CONNIC_MARK)

    @property
    def project_root(self) -> Path:
        parent = self.parent
        assert isinstance(parent, SuiteFile)
        return parent.project_root

    def setup(self) -> None:
        state = state_of(self.config)
        self.outcome = None  # a new attempt (pytest-rerunfailures): nothing of the last one stays
        if self.spec.error is not None:
            record_invalid(state, self)
            pytest.fail(self.spec.error, pytrace=False)
        if state.stop.is_set():  # the session is stopping: nothing more starts
            self._interrupted(state)

    def runtest(self) -> None:
        """The case's runs execute here, in pytest's call phase (so every tool that times or
        classifies the call sees them), and their verdict is this test's assertion."""
        state = state_of(self.config)
        verdict: BaseException | None = None
        try:
            with state.interrupts.case():
                run_item(state, self)
        except CaseErrored as exc:
            verdict = exc
        except CaseFailed as exc:
            verdict = exc
            self._after_stop(state)
        except BaseException as exc:  # whatever ended the case, the case has its outcome
            if isinstance(exc, Exception) and self._is_bug(state, exc):
                raise  # a bug of pytest-connic: its traceback
            verdict = self._escaped(state, exc)
        else:
            self._after_stop(state)
        if self.outcome is not None:
            from pytest_connic.execution.models import divergence_message
            from pytest_connic.warnings import CassetteDivergenceWarning

            try:
                _show_runtime_load_warnings(state, self)
                divergence = divergence_message(self.outcome)
                if divergence is not None:
                    state.host.warn_once(None, divergence, CassetteDivergenceWarning,
                                         (state.shown_path(self.path), self.spec.line))
            except ConnicWarning:  # -W error: the case fails with it, unless it failed anyway
                if verdict is None:
                    raise
        if verdict is not None:
            raise verdict
        if self.outcome is not None and self.outcome.left_out is not None:
            # the budget was spent: skipped (never failed), located at the case
            raise pytest.skip.Exception(self.outcome.left_out, _use_item_location=True)

    def _after_stop(self, state: ConnicSession) -> None:
        """After a real SIGINT/SIGTERM during this case: the session stops after it, through
        pytest's own ``shouldstop`` (exit code 2, every report written); an unfinished case is
        skipped as interrupted."""
        if not state.stop.is_set():
            return
        self.session.shouldstop = state.interrupts.reason
        if self.outcome is not None and self.outcome.interrupted:
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
        self._outcome_after(state, f"internal error in pytest-connic: {exception_text(exc)}")
        return True

    def _escaped(self, state: ConnicSession, exc: BaseException) -> BaseException:
        """A ``BaseException`` ended the case's runs: the case keeps an outcome. The user's real
        interruption, ``pytest.exit`` and ``pytest.skip`` propagate; pytest's failure (pytest-timeout's
        ``Timeout (>1.0s)``) fails the case in one located line, without the traceback of the
        runtime it was raised in; anything else (user code's ``KeyboardInterrupt``,
        ``GeneratorExit``, ``SystemExit``, a custom ``BaseException``) is this case's error, located."""
        from pytest_connic.project.located import exception_text, located

        if state.interrupts.real(exc):
            raise exc  # the user's second Ctrl-C: the session ends now; sessionfinish marks the case
        head = f"{self.suite.relpath}:{self.spec.line}: case '{self.spec.name}' ({self.suite.agent_name})"
        if isinstance(exc, pytest.fail.Exception):
            text = exception_text(exc)
            outcome = self._outcome_after(state, None)
            outcome.pytest_reason = text  # until pytest's report says the same
            return CaseFailed(f"{head}: {text}", outcome)
        if isinstance(exc, (pytest.skip.Exception, pytest.exit.Exception)):
            self._outcome_after(state, exception_text(exc))
            raise exc
        text = (f"{located(exc, self.project_root, f'{self.suite.relpath}:{self.spec.line}')} "
                "escaped the case's runs and ended them")
        return CaseErrored(f"{head}: {text}", self._outcome_after(state, text))

    def _outcome_after(self, state: ConnicSession, error: str | None) -> CaseOutcome:
        """The case's outcome after its runs were cut short (a new one if they left none)."""
        if self.outcome is None or state.ledger.outcome_of(self.nodeid) is not self.outcome:
            _setup_outcome(state, self, error)
            _add_junit_properties(state, self)
        assert self.outcome is not None
        return self.outcome

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None) -> str | TerminalRepr:
        if isinstance(excinfo.value, (CaseFailed, CaseErrored)):
            from pytest_connic.plugin.longrepr import case_longrepr
            from pytest_connic.plugin.usertrace import TraceOptions

            return case_longrepr(excinfo.value.text, excinfo.value.outcome, state_of(self.config).masker,
                                 style=self.config.getoption("tbstyle", "auto"), trace=TraceOptions.of(self.config))
        if isinstance(excinfo.value, ConnicWarning):  # made an error with -W: a message, not a bug
            message = f"{type(excinfo.value).__name__}: {excinfo.value}"
            line = f"{self.suite.relpath}:{self.spec.line}: {message}"
            if isinstance(excinfo.value, CassetteDivergenceWarning) and self.outcome is not None:
                from pytest_connic.plugin.longrepr import warning_longrepr
                from pytest_connic.plugin.usertrace import TraceOptions

                return warning_longrepr(line, message, self.outcome, state_of(self.config).masker,
                                        style=self.config.getoption("tbstyle", "auto"),
                                        trace=TraceOptions.of(self.config))
            return line
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int, str]:
        from pytest_connic.reports.terminal import escape_text

        return self.path, self.spec.line - 1, f"{self.suite.agent_name}::{escape_text(self.spec.name)}"


def _shows_collection_warnings(config: pytest.Config) -> bool:
    """Every xdist worker collects every suite: only the first (``gw0``) shows the collection's
    load warnings, so the controller's summary has each once (pytest groups identical warnings by
    text, but would list the location of each worker's copy)."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput is None or workerinput.get("workerid", "gw0") == "gw0"


def show_load_warnings(state: ConnicSession, found: list[LoadWarning], seen: frozenset[str] = frozenset()) -> None:
    """Each load warning once per session, located at the file (and line) it is about, so pytest's
    warning summary names the user's file, not pytest-connic's source."""
    from pytest_connic.warnings import ConnicLoadWarning, UnknownAgentKeyWarning

    for warning in found:
        if warning.key in seen:
            continue
        category = UnknownAgentKeyWarning if warning.unknown_key else ConnicLoadWarning
        state.host.warn_once(f"load:{warning.key}", warning.message, category, (warning.path, warning.line))


def _show_runtime_load_warnings(state: ConnicSession, item: CaseItem) -> None:
    """What the project's real import warned about that collection could not see (middleware or
    hooks that fail to import: collection imports nothing), after the case's runs loaded them."""
    if item.loaded is None:
        return
    index = state.runtimes.project_index(item.project_root)
    show_load_warnings(state, item.loaded.warnings, frozenset(w.key for w in index.warnings))


def run_item(state: ConnicSession, item: CaseItem) -> None:
    """Run one case item; raises ``CaseFailed`` / ``CaseInfrastructureError`` on a bad verdict."""
    from pytest_connic.project.load import ProjectError
    from pytest_connic.reports.failure import failure_text

    state.reports.add_coverage_root(item.project_root)
    try:
        with state.case_running(item.path, item.spec.line):
            _run_case(state, item)
    except ProjectError as exc:
        from pytest_connic import usertb

        outcome = _setup_outcome(state, item, str(exc))
        trace = usertb.import_in(str(exc))  # a module of the project failed to import: its traceback
        outcome.setup_traceback = usertb.masked(trace, state.masker.text) if trace else None
        raise CaseFailed(failure_text(outcome, state.masker, _width(state)), outcome) from None
    finally:
        _add_junit_properties(state, item)


def _run_case(state: ConnicSession, item: CaseItem) -> None:
    """Run the case behind ``item`` and raise on a bad verdict."""
    from pytest_connic.project.load import ProjectError
    from pytest_connic.reports.failure import failure_text

    runtime = state.runtimes.runtime(item.project_root)
    item.loaded = runtime.project
    failed = runtime.project.import_errors_for(item.suite.agent_name)
    if failed:
        raise ProjectError("the Connic project failed to load:\n" + "\n".join(f"  {e}" for e in failed))
    outcome = runtime.run_case(item.suite, item.spec, item.nodeid)
    item.outcome = state.ledger.add_outcome(outcome)
    if outcome.infrastructure_error:
        raise CaseInfrastructureError(failure_text(outcome, state.masker, _width(state)), outcome)
    if outcome.recording_error is not None:  # no cassette was written: an error, never a silent pass
        raise CaseErrored(failure_text(outcome, state.masker, _width(state)), outcome)
    if not outcome.verdict_passed and outcome.left_out is None:
        from pytest_connic.plugin.debugging import live_traceback

        error = CaseFailed(failure_text(outcome, state.masker, _width(state)), outcome)
        raise error.with_traceback(live_traceback(outcome))  # --pdb: the debugger stops in the user's frame


def _width(state: ConnicSession) -> int:
    """The terminal's width, which a failure report's first line fits."""
    return int(state.config.get_terminal_writer().fullwidth)


def record_invalid(state: ConnicSession, item: CaseItem) -> None:
    """Count an invalid case in the reports (it fails in setup, no run happens)."""
    assert item.spec.error is not None
    _setup_outcome(state, item, item.spec.error)
    _add_junit_properties(state, item)


def _setup_outcome(state: ConnicSession, item: CaseItem, error: str | None) -> CaseOutcome:
    """The outcome of a case that could not start (invalid, or its project/env failed)."""
    from pytest_connic.execution.outcomes import suite_outcome

    outcome = suite_outcome(item.nodeid, item.suite, item.spec, setup_error=error)
    item.outcome = state.ledger.add_outcome(outcome)
    return outcome


def _add_junit_properties(state: ConnicSession, item: CaseItem) -> None:
    """The case's JUnit properties: one set, the last attempt's (a rerun replaces them)."""
    if item.outcome is not None and state.settings.junit_properties:
        from pytest_connic.reports.junit import junit_properties

        stale = {id(p) for p in item._junit}
        item.user_properties[:] = [p for p in item.user_properties if id(p) not in stale]
        item._junit = list(junit_properties(item.outcome))
        item.user_properties.extend(item._junit)
