"""A run's trace as Connic spans: kept as an import path; the span builder lives in
:mod:`pytest_connic.records.run` beside the records it derives from (``RunRecord.trace``)."""

from __future__ import annotations

from pytest_connic.records.run import build_spans

__all__ = ["build_spans"]
