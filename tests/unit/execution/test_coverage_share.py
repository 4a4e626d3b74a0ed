"""coverage.py in the worker processes (``execution/isolation/coverage_share.py``), with a
stand-in ``coverage`` module: what a worker is told to measure with, how it starts, saves and
restarts after a fork, and that a failure to measure never fails a run. The real measurement
across processes is tests/plugin/test_coverage_workers.py's."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from pytest_connic.execution.isolation.coverage_share import (
    CoverageSettings,
    restart,
    save,
    settings_of_current,
    start,
)


class FakeCoverage:
    """What coverage_share uses of ``coverage.Coverage`` (and ``Coverage.current``)."""

    running: FakeCoverage | None = None
    refuse: Exception | None = None

    def __init__(self, **kwargs: Any) -> None:
        if FakeCoverage.refuse is not None:
            raise FakeCoverage.refuse
        self.kwargs = kwargs
        self.calls: list[str] = []
        self._auto_save = True
        self._warn_no_data = True
        self.config = types.SimpleNamespace(data_file=".coverage", config_file="", source=None, run_include=[],
                                            run_omit=["*/venv/*"], branch=1)

    @classmethod
    def current(cls) -> FakeCoverage | None:
        return cls.running

    def start(self) -> None:
        self.calls.append("start")

    def stop(self) -> None:
        self.calls.append("stop")

    def save(self) -> None:
        self.calls.append("save")
        if self.kwargs.get("data_file") == "full disk":
            raise OSError("No space left on device")


@pytest.fixture
def coverage(monkeypatch: pytest.MonkeyPatch) -> type[FakeCoverage]:
    module = types.ModuleType("coverage")
    module.Coverage = FakeCoverage  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "coverage", module)
    monkeypatch.setattr(FakeCoverage, "running", None)
    monkeypatch.setattr(FakeCoverage, "refuse", None)
    return FakeCoverage


def settings(data_file: str = "/data/.coverage") -> CoverageSettings:
    return {"data_file": data_file, "config_file": False, "source": None, "include": None, "omit": None,
            "branch": False}


def test_nothing_is_measured_unless_pytests_process_measures(monkeypatch: pytest.MonkeyPatch,
                                                             coverage: type[FakeCoverage]) -> None:
    assert settings_of_current() is None  # coverage imported, not measuring
    monkeypatch.delitem(sys.modules, "coverage")
    coverage.running = coverage()
    assert settings_of_current() is None  # not even imported: never imported here
    assert "coverage" not in sys.modules


def test_the_workers_measure_with_the_sessions_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             coverage: type[FakeCoverage]) -> None:
    monkeypatch.chdir(tmp_path)
    running = coverage.running = coverage()
    running.config = types.SimpleNamespace(data_file=".coverage", config_file="/p/.coveragerc", source=["src"],
                                           run_include=[], run_omit=["*/venv/*"], branch=1)
    assert settings_of_current() == {
        "data_file": os.path.join(str(tmp_path), ".coverage"), "config_file": "/p/.coveragerc",
        "source": ["src"], "include": None, "omit": ["*/venv/*"], "branch": True}
    # this process measures none of the user code: coverage.py must not warn "No data was collected"
    assert running._warn_no_data is False
    running.config.config_file = ""
    assert (settings_of_current() or {})["config_file"] is False


def test_a_worker_starts_with_a_data_file_of_its_own_and_saves_while_measuring(coverage: type[FakeCoverage]) -> None:
    assert start(None) is None
    cov = start(settings())
    assert isinstance(cov, FakeCoverage)
    assert cov.kwargs == {"data_suffix": True, **settings()}
    save(cov)
    assert cov.calls == ["start", "save"]  # saved, not stopped: its call threads stay traced
    save(None)


def test_a_measurement_that_cannot_start_or_save_never_fails_the_run(coverage: type[FakeCoverage]) -> None:
    coverage.refuse = RuntimeError("Couldn't read config file")
    assert start(settings()) is None
    coverage.refuse = None
    cov = start(settings("full disk"))
    save(cov)  # the OSError is swallowed: the measurement is lost, never the run
    assert cov is not None and cov.calls == ["start", "save"]


def test_a_forked_worker_leaves_the_templates_measurement_unsaved_and_starts_its_own(
        coverage: type[FakeCoverage]) -> None:
    assert restart(None, settings()) is None
    template = start(settings())
    assert isinstance(template, FakeCoverage)
    own = restart(template, settings())
    assert (template._auto_save, template.calls) == (False, ["start", "stop"])
    assert isinstance(own, FakeCoverage) and own is not template and own.calls == ["start"]
