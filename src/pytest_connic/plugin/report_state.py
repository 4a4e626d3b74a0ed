"""What the session's reports gather besides the outcomes (``plugin/ledger.py``): the coverage
report's projects, texts and gate, the history's view and warning, the budget's spend, and the
report files that could not be written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_connic.history.view import HistoryView


class ReportState:
    """Set by the jobs that compute a part of the reports, read where the reports are written."""

    def __init__(self) -> None:
        self._coverage_roots: set[Path] = set()
        self._coverage_texts: list[tuple[str, str, str]] = []
        self._coverage_gate_message: str | None = None
        #: across sessions (``plugin/history.py``): what the reports mark, why no history was kept
        self._history: HistoryView | None = None
        self._history_warning: str | None = None
        #: the budget's spend (the JSON report's ``budget`` section)
        self._budget_section: dict[str, object] | None = None
        #: report files that could not be written, one located line each (``plugin/outputs.py``)
        self._output_failures: list[str] = []

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
