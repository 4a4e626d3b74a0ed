"""Per-session state, kept under a ``pytest.StashKey`` (never in module globals): what one
pytest session (or one xdist worker) knows about its Connic projects and has produced.

Split by job: the :class:`~pytest_connic.plugin.ledger.Ledger` of outcomes (``state.ledger``),
the :class:`~pytest_connic.plugin.runtimes.Runtimes` registry of project runtimes
(``state.runtimes``), and the :class:`~pytest_connic.plugin.report_state.ReportState` the
reports gather (``state.reports``). The session object itself holds what they share: the
settings, the masker, the host of the ``pytest_connic_*`` hooks, and the stop signal."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

from pytest_connic.execution.interruption import StopSignal
from pytest_connic.plugin.interrupts import Interrupts
from pytest_connic.plugin.ledger import Ledger
from pytest_connic.plugin.options import Settings
from pytest_connic.plugin.report_state import ReportState
from pytest_connic.plugin.runtimes import Runtimes
from pytest_connic.secrets import Masker

if TYPE_CHECKING:
    from pytest_connic.execution.case import RunListener


class ConnicSession:
    """The session's settings, masker, hook host and stop signal, and its three jobs."""

    def __init__(self, config: pytest.Config, settings: Settings, secrets: Iterable[str]) -> None:
        """``secrets``: the values to mask from the start (the environment's secret values)."""
        self.config = config
        self.settings = settings
        self.masker = Masker(secrets)
        # a password in an option's URL (``--connic-mcp-url crm=https://u:TOKEN@host``) is a secret
        # in every form, also where it appears without its URL (the history's command line)
        from pytest_connic.secrets import url_passwords

        self.masker.add(p for value in (*settings.mcp_url, *settings.api_url) for p in url_passwords(value))
        from pytest_connic.plugin.host import PytestHost

        #: the runtime's ``Host`` port, and the session's one located "warn once" (``host.warn_once``)
        self.host = PytestHost(config)
        #: set by a real SIGINT or SIGTERM: no run starts after it (``plugin/interrupts.py``)
        self.stop = StopSignal()
        self.interrupts = Interrupts(self.stop)
        #: called with ``(outcome, record)`` as each run of a case finishes (``-v`` progress)
        self._run_listeners: list[RunListener] = []
        # the jobs (``Final``): their state is private, read through read-only views (``Sequence``,
        # ``Mapping``, properties) and changed through their methods, so mypy keeps every write in them
        self.ledger: Final = Ledger()
        self.reports: Final = ReportState()
        self.runtimes: Final = Runtimes(config, settings, masker=self.masker, host=self.host, stop=self.stop,
                                 interrupts=self.interrupts, run_listeners=self._run_listeners)

    def add_run_listener(self, listener: RunListener) -> None:
        """Call ``listener`` with ``(outcome, record)`` as each run of a case finishes (the project
        runtimes built later share the list)."""
        self._run_listeners.append(listener)

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
        self.runtimes.close()
        from pytest_connic.yamlpos import forget_files

        forget_files()  # one parse per file and session


SESSION_KEY = pytest.StashKey[ConnicSession]()


def state(config: pytest.Config) -> ConnicSession:
    """The session's state (``plugin.activation.activate`` creates it)."""
    return config.stash[SESSION_KEY]
