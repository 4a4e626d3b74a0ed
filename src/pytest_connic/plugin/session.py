"""Per-session state, kept under a ``pytest.StashKey`` (never in module globals)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_connic.plugin.options import Settings
from pytest_connic.secrets import Masker, secret_values_from_env

if TYPE_CHECKING:
    from pytest_connic.plugin.items import CaseItem
    from pytest_connic.project.index import ProjectIndex
    from pytest_connic.records.run import CaseOutcome, RunRecord


class ConnicSession:
    """What one pytest session (or one xdist worker) knows and has produced."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.masker = Masker(secret_values_from_env())
        self.outcomes: list[CaseOutcome] = []
        self.infrastructure_errors = 0
        self.warned: set[str] = set()
        self.coverage_roots: set[Path] = set()
        self.coverage_texts: list[tuple[str, str, str]] = []
        self.coverage_gate_message: str | None = None
        #: called with ``(outcome, record)`` as each run of a case finishes (``-v`` progress)
        self.run_listeners: list[Callable[[CaseOutcome, RunRecord], None]] = []
        self._indexes: dict[Path, ProjectIndex] = {}
        self._runtimes: dict[Path, Any] = {}
        self._envs: dict[Path, Any] = {}
        self._lock = threading.RLock()

    def project_index(self, root: Path) -> ProjectIndex:
        """The project's agents as collection sees them (no user code executed)."""
        with self._lock:
            if root not in self._indexes:
                from pytest_connic.project.index import index_project

                self._indexes[root] = index_project(root)
            return self._indexes[root]

    def runtime(self, root: Path) -> Any:
        """The project's runtime (real modules, local services), built on first use."""
        with self._lock:
            if root not in self._runtimes:
                from pytest_connic.execution.case import ProjectRuntime
                from pytest_connic.project.loaded import LoadedProject

                self._apply_env(root)
                self._runtimes[root] = ProjectRuntime(self, LoadedProject(root))
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

    def run_item(self, item: CaseItem) -> None:
        """Run one case item; raises ``CaseFailed`` / ``CaseInfrastructureError`` on a bad verdict."""
        from pytest_connic.execution.case import run_case_item
        from pytest_connic.plugin.items import CaseFailed
        from pytest_connic.project.load import ProjectError

        self.coverage_roots.add(item.project_root)
        try:
            run_case_item(self, item)
        except ProjectError as exc:
            from pytest_connic.reports.failure import failure_text

            outcome = self._setup_outcome(item, str(exc))
            raise CaseFailed(failure_text(outcome, self.masker), outcome) from None
        finally:
            self._add_junit_properties(item)

    def _add_junit_properties(self, item: CaseItem) -> None:
        if item.outcome is not None and self.settings.junit_properties:
            from pytest_connic.reports.junit import junit_properties

            item.user_properties.extend(junit_properties(item.outcome))

    def record_invalid(self, item: CaseItem) -> None:
        """Count an invalid case in the reports (it fails in setup, no run happens)."""
        assert item.spec.error is not None
        self._setup_outcome(item, item.spec.error)
        self._add_junit_properties(item)

    def _setup_outcome(self, item: CaseItem, error: str) -> CaseOutcome:
        """The outcome of a case that could not start (invalid, or its project/env failed)."""
        from pytest_connic.records.run import CaseOutcome

        spec, suite = item.spec, item.suite
        resolved = spec.resolved or {}
        outcome = CaseOutcome(
            nodeid=item.nodeid, suite_path=suite.relpath, line=spec.line, agent_name=suite.agent_name,
            case_name=spec.name, runs=int(resolved.get("runs", suite.defaults.runs)),
            success_threshold=int(resolved.get("success_threshold", suite.defaults.success_threshold)),
            setup_error=error,
        )
        item.outcome = outcome
        self.outcomes.append(outcome)
        return outcome

    def warn_once(self, key: str, message: str, category: type[Warning] | None = None) -> None:
        """Emit a warning (a ``ConnicWarning`` unless ``category`` says which) once per session for ``key``."""
        from pytest_connic.warnings import ConnicWarning

        with self._lock:
            if key in self.warned:
                return
            self.warned.add(key)
        import warnings

        warnings.warn((category or ConnicWarning)(message), stacklevel=2)

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
