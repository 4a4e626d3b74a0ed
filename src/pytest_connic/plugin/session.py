"""Per-session state, kept under a ``pytest.StashKey`` (never in module globals): what one
pytest session (or one xdist worker) knows about its Connic projects and has produced."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_connic.execution.interruption import StopSignal
from pytest_connic.plugin.interrupts import Interrupts
from pytest_connic.plugin.options import Settings
from pytest_connic.secrets import Masker

if TYPE_CHECKING:
    from pytest_connic.execution.assembly import RunSettings
    from pytest_connic.execution.case import ProjectRuntime, RunListener
    from pytest_connic.history.view import HistoryView
    from pytest_connic.project.apispec import ApiRegistry
    from pytest_connic.project.envfile import AppliedEnv
    from pytest_connic.project.index import ProjectIndex
    from pytest_connic.project.loaded import LoadedProject
    from pytest_connic.records.outcome import CaseOutcome


class ConnicSession:
    """The session's projects (index, runtime, env file), outcomes and report state."""

    def __init__(self, config: pytest.Config, settings: Settings, secrets: Iterable[str]) -> None:
        """``secrets``: the values to mask from the start (the environment's secret values)."""
        self.config = config
        self.settings = settings
        self.masker = Masker(secrets)
        # a password in an option's URL (``--connic-mcp-url crm=https://u:TOKEN@host``) is a secret
        # in every form, also where it appears without its URL (the history's command line)
        from pytest_connic.secrets import url_passwords

        self.masker.add(p for value in (*settings.mcp_url, *settings.api_url) for p in url_passwords(value))
        #: one outcome per case (a rerun's earlier attempts are its ``attempts``): ``add_outcome``
        self.outcomes: list[CaseOutcome] = []
        self._by_nodeid: dict[str, CaseOutcome] = {}
        #: pytest's outcome of the current attempt of each case, from its reports (``set_verdict``)
        self._verdicts: dict[str, tuple[str, str | None]] = {}
        #: suite files that failed to collect: in coverage mode the report judges them
        self._suite_collection_errors = 0
        from pytest_connic.plugin.host import PytestHost

        #: the runtime's ``Host`` port, and the session's one located "warn once" (``host.warn_once``)
        self.host = PytestHost(config)
        self._coverage_roots: set[Path] = set()
        self._coverage_texts: list[tuple[str, str, str]] = []
        self._coverage_gate_message: str | None = None
        #: called with ``(outcome, record)`` as each run of a case finishes (``-v`` progress)
        self._run_listeners: list[RunListener] = []
        #: set by a real SIGINT or SIGTERM: no run starts after it (``plugin/interrupts.py``)
        self.stop = StopSignal()
        self.interrupts = Interrupts(self.stop)
        #: case items whose reports pytest has logged (the others are interrupted when the session is)
        self._reported: set[str] = set()
        #: cases whose setup passed and whose result is not in yet -> the xdist node running them
        self._started: dict[str, object] = {}
        #: on the xdist controller: the cases the workers collected (node id -> location)
        self._collected: dict[str, tuple[str, int, str]] = {}
        #: across sessions (``plugin/history.py``): what the reports mark, why no history was kept,
        #: and the budget's spend (the JSON report's ``budget`` section)
        self._history: HistoryView | None = None
        self._history_warning: str | None = None
        #: report files that could not be written, one located line each (``plugin/outputs.py``)
        self._output_failures: list[str] = []
        self._budget_section: dict[str, object] | None = None
        self._indexes: dict[Path, ProjectIndex] = {}
        self._runtimes: dict[Path, ProjectRuntime] = {}
        #: projects whose import hung in this process: the message every later case gets
        self._hung: dict[Path, str] = {}
        self._envs: dict[Path, AppliedEnv] = {}
        self._apis: dict[Path, ApiRegistry] = {}
        self._lock = threading.RLock()

    # What the other plugin modules tell the session, one method per job; what they read of it,
    # read-only properties (``tests/unit/test_session_hub.py`` keeps every write in this class).

    def suite_failed_to_collect(self) -> None:
        """A suite file failed to collect (``plugin/reporting.py``: the exit code; the coverage report
        judges it in ``plugin/coverage_mode.py``)."""
        self._suite_collection_errors += 1

    @property
    def suite_collection_errors(self) -> int:
        """How many suite files failed to collect."""
        return self._suite_collection_errors

    def add_coverage_root(self, root: Path) -> None:
        """A project the coverage report covers (a case of it was collected, run or merged)."""
        self._coverage_roots.add(root)

    @property
    def coverage_roots(self) -> AbstractSet[Path]:
        """The projects the coverage report covers."""
        return self._coverage_roots

    def set_coverage_texts(self, texts: list[tuple[str, str, str]]) -> None:
        """The coverage report's terminal sections: ``(header, table, runtime table)`` per project."""
        self._coverage_texts = texts

    @property
    def coverage_texts(self) -> Sequence[tuple[str, str, str]]:
        return self._coverage_texts

    def set_coverage_gate(self, message: str) -> None:
        """``--connic-coverage-fail-under``'s verdict line (``FAIL ...`` when not reached)."""
        self._coverage_gate_message = message

    @property
    def coverage_gate_message(self) -> str | None:
        return self._coverage_gate_message

    def add_run_listener(self, listener: RunListener) -> None:
        """Call ``listener`` with ``(outcome, record)`` as each run of a case finishes (the project
        runtimes built later share the list)."""
        self._run_listeners.append(listener)

    def mark_reported(self, nodeid: str) -> None:
        """pytest has logged a report of the case (an interrupted session leaves it as it is)."""
        self._reported.add(nodeid)

    @property
    def reported(self) -> AbstractSet[str]:
        """The cases whose reports pytest has logged."""
        return self._reported

    def mark_started(self, nodeid: str, node: object) -> None:
        """The case's setup passed on ``node`` (its xdist node, or None): its runs are under way."""
        self._started[nodeid] = node

    @property
    def started(self) -> Mapping[str, object]:
        """Cases whose setup passed -> the xdist node running them (or None)."""
        return self._started

    def add_collected(self, nodeid: str, location: tuple[str, int, str]) -> None:
        """On the xdist controller: a case a worker collected (the first location is kept)."""
        self._collected.setdefault(nodeid, location)

    @property
    def collected(self) -> Mapping[str, tuple[str, int, str]]:
        """On the xdist controller: the cases the workers collected (node id -> location)."""
        return self._collected

    def set_history(self, view: HistoryView | None) -> None:
        """The history's view of this session (``None``: no history shown in the reports)."""
        self._history = view

    @property
    def history(self) -> HistoryView | None:
        return self._history

    def history_failed(self, message: str) -> None:
        """Why the history was not kept this time (the terminal summary says it and warns)."""
        self._history_warning = message

    @property
    def history_warning(self) -> str | None:
        return self._history_warning

    def set_budget_section(self, section: dict[str, object]) -> None:
        """The budget's spend: the JSON report's ``budget`` section and the terminal's line."""
        self._budget_section = section

    @property
    def budget_section(self) -> Mapping[str, object] | None:
        return self._budget_section

    def output_failed(self, message: str) -> None:
        """A report file could not be written: one located line (``plugin/outputs.py``)."""
        self._output_failures.append(message)

    @property
    def output_failures(self) -> Sequence[str]:
        """The report files that could not be written, one line each."""
        return self._output_failures

    @property
    def infrastructure_errors(self) -> int:
        """Cases whose last attempt hit an infrastructure error (the session exits 2)."""
        return sum(1 for o in self.outcomes if o.infrastructure_error is not None and o.status == "error")

    def exit_code(self, status: int | pytest.ExitCode) -> int | pytest.ExitCode:
        """pytest's exit ``status``, raised to 2 when an infrastructure error (a provider down or
        refusing) kept cases from running."""
        return 2 if self.infrastructure_errors and status in (0, 1) else status

    def add_outcome(self, outcome: CaseOutcome, *, reported: bool = False) -> CaseOutcome:
        """Record a case's outcome. A case has one: a new attempt of a case (pytest-rerunfailures)
        replaces the outcome of the earlier one, which becomes its history (``attempts``).
        ``reported``: the outcome came with its attempt's report (the xdist controller), so pytest's
        outcome of the attempt, already known, is applied (where the case runs, pytest's reports
        always follow the outcome; rerunfailures logs an attempt's reports after the next starts)."""
        with self._lock:
            previous = self._by_nodeid.get(outcome.nodeid)
            if previous is outcome:
                return outcome
            self._by_nodeid[outcome.nodeid] = outcome
            if previous is None:
                self.outcomes.append(outcome)
            else:
                if not outcome.attempts:  # an xdist worker's outcome brings its history along
                    outcome.attempts = [*previous.attempts, previous.attempt_summary()]
                self.outcomes[next(i for i, o in enumerate(self.outcomes) if o is previous)] = outcome
            verdict = self._verdicts.get(outcome.nodeid) if reported else None
            if verdict is not None:
                outcome.pytest_outcome, outcome.pytest_reason = verdict
            return outcome

    def outcome_of(self, nodeid: str) -> CaseOutcome | None:
        return self._by_nodeid.get(nodeid)

    def new_attempt(self, nodeid: str) -> None:
        """A case's setup report: an attempt starts, pytest has said nothing of it yet."""
        self._verdicts.pop(nodeid, None)

    def set_verdict(self, nodeid: str, word: str, reason: str | None) -> None:
        """pytest's outcome of a phase of the current attempt of a case; the worst phase decides
        (a failed call stays failed when teardown then errs: Connic's verdict is the call's)."""
        current = self._verdicts.get(nodeid)
        if current is not None and (_RANK[current[0]] >= _RANK[word] or current[0] == "failed"):
            return
        self._verdicts[nodeid] = (word, reason)
        outcome = self._by_nodeid.get(nodeid)
        if outcome is not None:
            outcome.pytest_outcome, outcome.pytest_reason = word, reason

    def project_index(self, root: Path) -> ProjectIndex:
        """The project's agents as collection sees them (no user code executed)."""
        with self._lock:
            if root not in self._indexes:
                from pytest_connic.project.index import index_project

                self._indexes[root] = index_project(root, self.api_registry(root))
                self._prestart(root)
            return self._indexes[root]

    def _prestart(self, root: Path) -> None:
        """Under process isolation, the project's worker template starts loading the project in
        the background while pytest collects (``execution/isolation/pool.py``)."""
        if self.settings.isolation != "process" or self.config.option.collectonly:
            return
        from pytest_connic.execution.isolation.pool import DEFAULT_MEMORY_MB, has_user_code, prestart
        from pytest_connic.project.load import ProjectError

        if not has_user_code(root):
            return
        try:
            self._apply_env(root)  # the template imports the project with the environment cases see
        except ProjectError:
            return  # said by the first case's setup
        prestart(root, self.settings.worker_memory_mb or DEFAULT_MEMORY_MB)

    def before_first_case(self, stopped: Callable[[], bool]) -> None:
        """Before the first case: the plugin's modules that run a case are imported (about 0.2 s),
        the templates started while collecting have loaded their project (bounded; a stop request
        ends the wait), and in a session that calls providers LiteLLM is imported (meanwhile, on a
        thread), so no case's time (nor its first model call's) includes any of them."""
        if not self._indexes or self.config.option.collectonly:  # no case runs
            return
        _import_case_machinery()
        calls_providers = self.settings.live or self.settings.record_mode in ("once", "new_runs", "all")
        if calls_providers:  # LiteLLM's import (seconds of CPU) while this thread waits for the templates
            from pytest_connic.models.live import import_in_background

            import_in_background()  # after this thread's own imports: two threads never import at once
        if self.settings.isolation == "process":
            from pytest_connic.execution.isolation.pool import wait_prestarted

            wait_prestarted(stopped)
        if calls_providers:
            from pytest_connic.models.live import wait_imported

            wait_imported(stopped)

    def runtime(self, root: Path) -> ProjectRuntime:
        """The project's runtime (real modules, local services), built on first use
        (``execution/assembly.py``, from the session's settings)."""
        with self._lock:
            if root not in self._runtimes:
                from pytest_connic.execution.assembly import assemble

                self._apply_env(root)
                self._runtimes[root] = assemble(
                    root, self._run_settings(), masker=self.masker, host=self.host, api=self.api_registry(root),
                    interrupted=self.interrupts.real, load=lambda make: self._load_project(root, make),
                    run_listeners=self._run_listeners, stop=self.stop,
                )
            return self._runtimes[root]

    def _run_settings(self) -> RunSettings:
        """The session's settings as a runtime is built from them."""
        from pytest_connic.execution.assembly import RunSettings
        from pytest_connic.models.pricing import Prices
        from pytest_connic.plugin.budget import budget_for
        from pytest_connic.plugin.unrecorded import notes_for
        from pytest_connic.runtime.hosted import HostedSettings

        settings = self.settings
        hosted = HostedSettings(guardrail_model=settings.guardrail_model,
                                unjudged_guardrails=settings.unjudged_guardrails, aliases=settings.model_aliases)
        return RunSettings(
            mode="live" if settings.live else settings.record_mode, cassette_dir=settings.cassette_dir,
            concurrency=settings.concurrency, early_stop=settings.early_stop, env=settings.env,
            isolation=settings.isolation, worker_memory_mb=settings.worker_memory_mb,
            match_rules=settings.matching_rules(), replay=settings.replay, volatile=settings.volatile_kinds(),
            cassette_size_limit=settings.cassette_size_limit, aliases=settings.model_aliases,
            prices=Prices(settings.model_prices(), _valid_aliases(settings)), hosted=hosted,
            mcp_urls=settings.mcp_urls(), budget=budget_for(self.config), unrecorded=notes_for(self.config),
        )

    def _load_project(self, root: Path, load: Callable[[], LoadedProject]) -> LoadedProject:
        """The project imported in pytest's process, bounded (``project/bounded.py``): a signal
        during the import stops the session at once (pytest's own interruption), an import that
        hangs is every case's setup error."""
        from pytest_connic.project.bounded import ImportHung, ImportStopped, load_bounded
        from pytest_connic.project.load import ProjectError

        if root in self._hung:
            raise ProjectError(self._hung[root])
        try:
            return load_bounded(load, root, lambda: self.stop.reason if self.stop.is_set() else None)
        except ImportStopped as exc:
            self.interrupts.raised = True
            raise KeyboardInterrupt(exc.reason) from None
        except ImportHung as exc:
            self._hung[root] = f"the Connic project failed to load: {exc}"
            raise ProjectError(self._hung[root]) from None

    def api_registry(self, root: Path) -> ApiRegistry:
        """The project's OpenAPI specs (``--connic-api-spec``, ``apis/``), read once per root."""
        with self._lock:
            if root not in self._apis:
                from pytest_connic.project.apispec import load_registry

                settings = self.settings
                self._apis[root] = load_registry(root, settings.api_specs(), settings.api_urls(),
                                                 source=settings.source("api_spec"))
            return self._apis[root]

    def _apply_env(self, root: Path) -> None:
        """``--connic-env``: load the project's ``.env.NAME`` before any user code imports."""
        name = self.settings.env
        if not name or root in self._envs:
            return
        from pytest_connic.project.envfile import EnvFileError, apply_env
        from pytest_connic.project.load import ProjectError

        try:
            applied = apply_env(root, name)
        except (EnvFileError, OSError) as exc:
            raise ProjectError(f"{exc} (from {self.settings.source('env')})") from None
        self._envs[root] = applied
        self.masker.add(applied.values.values())

    def shown_path(self, path: Path) -> str:
        """``path`` as pytest shows it: relative to the invocation directory when inside it."""
        from pytest_connic.plugin.host import shown_path

        return shown_path(self.config, path if path.is_absolute() else Path.cwd() / path)

    @contextlib.contextmanager
    def case_running(self, path: Path, line: int) -> Iterator[None]:
        """While a case runs, the runtime's warnings point at its suite file and line."""
        with self.host.case_running(self.shown_path(path), line):
            yield

    def close(self) -> None:
        for runtime in self._runtimes.values():
            runtime.close()
        if self._indexes and self.settings.isolation == "process":
            from pytest_connic.execution.isolation.pool import close_prestarted

            close_prestarted()
        if self._runtimes:
            from pytest_connic.runtime import placeholders

            placeholders.uninstall()
        self._runtimes.clear()
        for applied in self._envs.values():
            applied.restore()
        self._envs.clear()
        from pytest_connic.yamlpos import forget_files

        forget_files()  # one parse per file and session


#: how bad each of pytest's outcomes is, for the worst phase of an attempt
_RANK = {"passed": 0, "xfailed": 1, "skipped": 1, "failed": 2, "error": 3}

SESSION_KEY = pytest.StashKey[ConnicSession]()


def state(config: pytest.Config) -> ConnicSession:
    """The session's state (``plugin.activation.activate`` creates it)."""
    return config.stash[SESSION_KEY]


def _valid_aliases(settings: Settings) -> dict[str, str]:
    """The model aliases for pricing; a bad one is reported where a live model needs it."""
    try:
        aliases: dict[str, str] = settings.model_aliases()
    except pytest.UsageError:
        return {}
    return aliases


def _import_case_machinery() -> None:
    """Import what running a case imports (``ConnicSession.runtime``, the runtime's loop, the reports
    of an outcome): none of it runs user code or says anything."""
    from pytest_connic.checks.evaluate import evaluate_run  # noqa: F401
    from pytest_connic.execution.assembly import assemble  # noqa: F401
    from pytest_connic.execution.case import ProjectRuntime  # noqa: F401
    from pytest_connic.execution.isolation.pool import WorkerStartError  # noqa: F401
    from pytest_connic.execution.models import ModelSource  # noqa: F401
    from pytest_connic.models.pricing import Prices  # noqa: F401
    from pytest_connic.plugin.budget import budget_for  # noqa: F401
    from pytest_connic.plugin.unrecorded import notes_for  # noqa: F401
    from pytest_connic.project.bounded import load_bounded  # noqa: F401
    from pytest_connic.project.loaded import LoadedProject  # noqa: F401
    from pytest_connic.reports.failure import failure_text  # noqa: F401
    from pytest_connic.reports.junit import junit_properties  # noqa: F401
    from pytest_connic.runtime.hosted import HostedSettings  # noqa: F401
