"""coverage.py in the worker processes: when pytest's process measures coverage (pytest-cov,
``coverage run -m pytest``), each worker measures the user code it runs with the same
configuration and saves its data beside the session's data file, where coverage's combine step
(pytest-cov's, or ``coverage combine``) picks it up (docs/ci.md "Coverage of your tools").

Nothing here imports coverage unless pytest's process already has it running.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Protocol, TypedDict


class CoverageSettings(TypedDict):
    """The keyword arguments of ``coverage.Coverage`` a worker measures with."""

    data_file: str
    config_file: str | bool
    source: list[str] | None
    include: list[str] | None
    omit: list[str] | None
    branch: bool


class Measurement(Protocol):
    """What a worker uses of a ``coverage.Coverage`` (coverage.py is not a dependency)."""

    _auto_save: bool

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def save(self) -> None: ...


def settings_of_current() -> CoverageSettings | None:
    """What a worker needs to measure as pytest's process does, or None when it does not measure;
    pytest's process then expects its data from the workers (no "No data was collected")."""
    if "coverage" not in sys.modules:
        return None
    import coverage

    current = getattr(coverage.Coverage, "current", None)
    cov = current() if callable(current) else None
    if cov is None:
        return None
    # user code runs in the workers: this process may measure none of the source, and coverage.py
    # would warn "No data was collected" when pytest-cov saves it (once per xdist worker), though
    # the combined figures are right (coverage.py quiets the processes process_startup() measures so)
    cov._warn_no_data = False
    config = cov.config
    return {
        "data_file": os.path.abspath(config.data_file),
        "config_file": config.config_file or False,
        "source": list(config.source or []) or None,
        "include": list(config.run_include or []) or None,
        "omit": list(config.run_omit or []) or None,
        "branch": bool(config.branch),
    }


def start(settings: CoverageSettings | None) -> Measurement | None:
    """Start measuring in this worker (before the project loads: its import-time lines count
    too); None when pytest's process does not measure or coverage cannot start here."""
    if not settings:
        return None
    try:
        import coverage

        cov = coverage.Coverage(data_suffix=True, **settings)
        cov.start()
    except Exception:  # noqa: BLE001  (no coverage here, a config it refuses: the run goes on)
        return None
    return cov


def save(cov: Measurement | None) -> None:
    """Write what this worker measured so far (after each run: a worker may be killed, never
    asked to exit, so its data is on disk before the session's combine step reads it)."""
    if cov is None:
        return
    # saved while measuring: a stop and a start would leave the worker's existing call threads
    # untraced (coverage traces the threads that start after it does)
    with contextlib.suppress(Exception):  # a full disk: the measurement is lost, never the run
        cov.save()


def restart(template: Measurement | None, settings: CoverageSettings | None) -> Measurement | None:
    """In a worker forked from the template: a measurement of its own (its own data file suffix),
    the template's left unsaved here (the template saved what it measured while loading)."""
    if template is None:
        return None
    with contextlib.suppress(Exception):
        template._auto_save = False
        template.stop()
    return start(settings)
