"""Per-session state, kept under a ``pytest.StashKey`` (never in module globals): what one
pytest session (or one xdist worker) knows about its Connic projects and has produced."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_connic.execution.interruption import StopSignal
from pytest_connic.plugin.interrupts import Interrupts
from pytest_connic.plugin.options import Settings
from pytest_connic.secrets import Masker

if TYPE_CHECKING:
    from pytest_connic.execution.case import ProjectRuntime, RunListener
    from pytest_connic.project.envfile import AppliedEnv
    from pytest_connic.project.index import ProjectIndex
    from pytest_connic.records.run import CaseOutcome


class ConnicSession:
    """The session's projects (index, runtime, env file), outcomes and report state."""

    def __init__(self, config: pytest.Config, settings: Settings, secrets: Iterable[str]) -> None:
        """``secrets``: the values to mask from the start (the environment's secret values)."""
        self.config = config
        self.settings = settings
        self.masker = Masker(secrets)
        self.outcomes: list[CaseOutcome] = []
        self.infrastructure_errors = 0
        #: suite files that failed to collect: in coverage mode the report judges them
        self.suite_collection_errors = 0
        self.warned: set[str] = set()
        #: the suite file (as pytest shows paths) and line of the case running now: the runtime's
        #: warnings are attributed to it (cases run one at a time in a pytest process)
        self.case_location: tuple[str, int] | None = None
        self.coverage_roots: set[Path] = set()
        self.coverage_texts: list[tuple[str, str, str]] = []
        self.coverage_gate_message: str | None = None
        #: called with ``(outcome, record)`` as each run of a case finishes (``-v`` progress)
        self.run_listeners: list[RunListener] = []
        #: set by a real SIGINT or SIGTERM: no run starts after it (``plugin/interrupts.py``)
        self.stop = StopSignal()
        self.interrupts = Interrupts(self.stop)
        #: case items whose reports pytest has logged (the others are interrupted when the session is)
        self.reported: set[str] = set()
        #: on the xdist controller: the cases the workers collected (node id -> location)
        self.collected: dict[str, tuple[str, int, str]] = {}
        self._indexes: dict[Path, ProjectIndex] = {}
        self._runtimes: dict[Path, ProjectRuntime] = {}
        self._envs: dict[Path, AppliedEnv] = {}
        self._lock = threading.RLock()

    def project_index(self, root: Path) -> ProjectIndex:
        """The project's agents as collection sees them (no user code executed)."""
        with self._lock:
            if root not in self._indexes:
                from pytest_connic.project.index import index_project

                self._indexes[root] = index_project(root)
            return self._indexes[root]

    def runtime(self, root: Path) -> ProjectRuntime:
        """The project's runtime (real modules, local services), built on first use."""
        with self._lock:
            if root not in self._runtimes:
                from pytest_connic.execution.case import ProjectRuntime, RuntimeOptions
                from pytest_connic.execution.models import ModelSource
                from pytest_connic.plugin.host import PytestHost
                from pytest_connic.project.loaded import LoadedProject

                self._apply_env(root)
                settings = self.settings
                models = ModelSource(cassette_dir=settings.cassette_dir,
                                     mode="live" if settings.live else settings.record_mode,
                                     masker=self.masker, aliases=settings.model_aliases,
                                     cassette_size_limit=settings.cassette_size_limit)
                options = RuntimeOptions(concurrency=settings.concurrency, early_stop=settings.early_stop,
                                         env=settings.env, models=models, isolation=settings.isolation, worker_memory_mb=settings.worker_memory_mb)
                self._runtimes[root] = ProjectRuntime(
                    LoadedProject(root, self.interrupts.real), options, masker=self.masker,
                    host=PytestHost(self.config, self.warn_once), run_listeners=self.run_listeners,
                    stop=self.stop,
                )
            return self._runtimes[root]

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

    def warn_once(self, key: str, message: str, category: type[Warning] | None = None) -> None:
        """Emit a warning (a ``ConnicWarning`` unless ``category`` says which) once per session for ``key``."""
        from pytest_connic.warnings import ConnicWarning

        with self._lock:
            if key in self.warned:
                return
            self.warned.add(key)
        import warnings

        category = category or ConnicWarning
        where = self.case_location
        if where is not None:  # the case's suite file and line, not the runtime's source line
            warnings.warn_explicit(category(message), category, where[0], where[1])
        else:
            warnings.warn(category(message), stacklevel=2)

    def shown_path(self, path: Path) -> str:
        """``path`` as pytest shows it: relative to the invocation directory when inside it."""
        try:
            return path.resolve().relative_to(Path(self.config.invocation_params.dir).resolve()).as_posix()
        except (ValueError, OSError):
            return str(path)

    @contextlib.contextmanager
    def case_running(self, path: Path, line: int) -> Iterator[None]:
        """While a case runs, the runtime's warnings point at its suite file and line."""
        self.case_location = (self.shown_path(path), line)
        try:
            yield
        finally:
            self.case_location = None

    def close(self) -> None:
        for runtime in self._runtimes.values():
            runtime.close()
        if self._runtimes:
            from pytest_connic.runtime import placeholders

            placeholders.uninstall()
        self._runtimes.clear()
        for applied in self._envs.values():
            applied.restore()
        self._envs.clear()


SESSION_KEY = pytest.StashKey[ConnicSession]()


def state(config: pytest.Config) -> ConnicSession:
    """The session's state (``plugin.activation.activate`` creates it)."""
    return config.stash[SESSION_KEY]
