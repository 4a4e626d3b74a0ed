"""Secrets are masked in pytest's own output too: the captured stdout, stderr and log
sections, tracebacks (``longrepr``), and the warnings summary, in the terminal and in JUnit
XML (``junit_logging=all``). Used by the session's lifecycle (``plugin/lifecycle.py``), so
only a session with Connic suites (or the ``connic`` fixture, or a Connic report option)
masks; the masker is the session's (the environment's secret values and the ``--connic-env``
file's values).

Tracebacks are masked in place (pytest's ``Repr*`` objects are dataclasses of strings and
lists), so colours and the short summary line stay; what cannot be walked becomes its masked
text. Warnings are masked as pytest records them (the ``WarningMessage`` handed to
``pytest_warning_recorded`` is the one the terminal reporter and pytest-xdist then read) and
once more at the session's finish, before the warnings summary is written (for warnings recorded
before the session's masking began).
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import pytest

from pytest_connic.plugin.session import state
from pytest_connic.secrets import Masker

_MAX_DEPTH = 32


class ReportMasking:
    """Masks the session's secrets in pytest's reports and warnings (``plugin/lifecycle.py``
    calls it from the hooks where pytest makes and records them)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.masker: Masker = state(config).masker
        self.masker.report_limit = state(config).settings.report_value_limit
        self._env_roots: set[Path] = set()

    def mask_case_report(self, report: pytest.TestReport) -> None:
        """A case's report masked; the case name a report shows (the failure's header, GitHub
        annotations' titles) is the plugin's: a secret in it is masked; the node id is pytest's
        and stays as it is."""
        self.mask_report(report)
        path, line, domain = report.location
        if self.masker.find(domain):
            report.location = (path, line, self.masker.text(domain))

    def mask_junit_names(self, report: pytest.TestReport) -> None:
        """JUnit XML's ``name`` and ``classname`` of a case whose node id holds a secret, masked."""
        if not self.masker.find(report.nodeid):
            return
        from pytest_connic.plugin.pytest_private import junit_node

        reporter = junit_node(self.config, report)  # the one pytest's JUnit plugin records this report in
        if reporter is None or getattr(reporter, "_connic_masked", False):
            return
        record, masker = reporter.record_testreport, self.masker

        def record_masked(testreport: pytest.TestReport | pytest.CollectReport) -> None:
            record(testreport)
            for key in ("name", "classname", "file"):
                if isinstance(reporter.attrs.get(key), str):
                    reporter.attrs[key] = masker.text(reporter.attrs[key])

        reporter.record_testreport = record_masked  # type: ignore[method-assign]
        reporter._connic_masked = True  # type: ignore[attr-defined]

    def collecting(self, collector: pytest.Collector) -> None:
        """A collector is about to collect: a suite file's project's env file is learnt."""
        root = getattr(collector, "project_root", None)  # a suite file: its project's env file
        if root is not None and root not in self._env_roots:
            self._env_roots.add(root)
            self._learn_env_file(root)

    def _learn_env_file(self, root: Path) -> None:
        """``--connic-env``: the file's values are masked from collection on, also in a process
        (an xdist worker) that runs none of the project's cases and so never loads it."""
        name = state(self.config).settings.env
        if not name:
            return
        from pytest_connic.project.envfile import EnvFileError, env_file, parse_env_file

        try:
            self.masker.add(parse_env_file(env_file(root, name)).values())
        except (EnvFileError, OSError, UnicodeDecodeError):
            pass  # the run that loads it reports the problem, with its source

    def mask_warning(self, warning_message: warnings.WarningMessage) -> None:
        """A warning as pytest records it (the ``WarningMessage`` the terminal reporter and
        pytest-xdist then read)."""
        if not self.masker.active:
            return
        message = warning_message.message
        text = str(message)
        masked = self.masker.text(text)
        if masked != text:
            if isinstance(message, BaseException):
                message.args = (masked, *message.args[1:])  # a ConnicWarning's key stays
            if str(message) != masked:  # a warning class with its own __str__
                warning_message.message = Warning(masked)
        line = warning_message.line
        if line:
            warning_message.line = self.masker.text(line)

    def mask_warnings_summary(self, stats: dict[str, list[object]]) -> None:
        """The warnings pytest recorded before this session's masking began, masked before the
        terminal writes its warnings summary."""
        if self.masker.active:
            for report in stats.get("warnings", []):
                if isinstance(getattr(report, "message", None), str):
                    report.message = self.masker.text(report.message)  # type: ignore[attr-defined]

    def mask_report(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        """Mask the sections and the ``longrepr`` of ``report`` in place."""
        if not self.masker.active:
            return
        report.sections = [(self.masker.text(title), self.masker.text(text)) for title, text in report.sections]
        longrepr = report.longrepr
        if longrepr is None:
            return
        if isinstance(longrepr, str):
            report.longrepr = self.masker.text(longrepr)
        elif isinstance(longrepr, tuple):  # a skip: (path, line, message)
            path, line, message = longrepr
            report.longrepr = (self.masker.text(path), line, self.masker.text(message))
        else:
            try:
                _mask_in_place(longrepr, self.masker, set(), 0)
            except Exception:  # noqa: BLE001 - an unexpected repr object: keep its masked text instead
                report.longrepr = self.masker.text(str(longrepr))
                return
            text = str(longrepr)
            if self.masker.find(text):  # something the walk did not reach
                report.longrepr = self.masker.text(text)


def _mask_in_place(value: object, masker: Masker, seen: set[int], depth: int) -> object:
    """``value`` with every string masked: lists are changed in place, dataclass objects get
    their fields set (pytest's ``Repr*`` objects); returns the masked value."""
    if isinstance(value, str):
        return masker.text(value)
    if depth > _MAX_DEPTH or id(value) in seen:
        return value
    seen.add(id(value))
    if isinstance(value, list):
        value[:] = [_mask_in_place(v, masker, seen, depth + 1) for v in value]
        return value
    if isinstance(value, tuple):
        items = [_mask_in_place(v, masker, seen, depth + 1) for v in value]
        make = getattr(type(value), "_make", None) if hasattr(value, "_fields") else None
        return make(items) if make is not None else tuple(items)  # a named tuple stays one
    if isinstance(value, dict):
        for key in list(value):
            value[key] = _mask_in_place(value[key], masker, seen, depth + 1)
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            current = getattr(value, f.name, None)
            masked = _mask_in_place(current, masker, seen, depth + 1)
            if masked is not current:
                object.__setattr__(value, f.name, masked)
    return value
