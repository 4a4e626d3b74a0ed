"""The session's registry of project runtimes: each project's index (collection), its OpenAPI
specs, its ``--connic-env`` file, and its runtime, assembled below the plugin
(``execution/assembly.py``) from the session's settings on the first case that needs it."""

from __future__ import annotations

import threading
from collections.abc import Callable
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
    from pytest_connic.plugin.host import PytestHost
    from pytest_connic.project.apispec import ApiRegistry
    from pytest_connic.project.envfile import AppliedEnv
    from pytest_connic.project.index import ProjectIndex
    from pytest_connic.project.loaded import LoadedProject


class Runtimes:
    """One index, API registry, applied env file and runtime per project root, built on first use."""

    def __init__(self, config: pytest.Config, settings: Settings, *, masker: Masker, host: PytestHost,
                 stop: StopSignal, interrupts: Interrupts, run_listeners: list[RunListener]) -> None:
        """``run_listeners``: the session's list, shared by every runtime (built before or after a
        listener is added)."""
        self.config = config
        self.settings = settings
        self._masker = masker
        self._host = host
        self._stop = stop
        self._interrupts = interrupts
        self._run_listeners = run_listeners
        self._indexes: dict[Path, ProjectIndex] = {}
        self._runtimes: dict[Path, ProjectRuntime] = {}
        #: projects whose import hung in this process: the message every later case gets
        self._hung: dict[Path, str] = {}
        self._envs: dict[Path, AppliedEnv] = {}
        self._apis: dict[Path, ApiRegistry] = {}
        self._lock = threading.RLock()

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
                    root, self._run_settings(), masker=self._masker, host=self._host, api=self.api_registry(root),
                    interrupted=self._interrupts.real, load=lambda make: self._load_project(root, make),
                    run_listeners=self._run_listeners, stop=self._stop,
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
            return load_bounded(load, root, lambda: self._stop.reason if self._stop.is_set() else None)
        except ImportStopped as exc:
            self._interrupts.raised = True
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
        self._masker.add(applied.values.values())

    def close(self) -> None:
        """Every runtime closed, the prestarted templates ended, the placeholders put back and the
        env files' variables restored."""
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


def _valid_aliases(settings: Settings) -> dict[str, str]:
    """The model aliases for pricing; a bad one is reported where a live model needs it."""
    try:
        aliases: dict[str, str] = settings.model_aliases()
    except pytest.UsageError:
        return {}
    return aliases


def _import_case_machinery() -> None:
    """Import what running a case imports (``Runtimes.runtime``, the runtime's loop, the reports
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
