"""Connic's static coverage report (``connic test --coverage``) and pytest-connic's runtime
extras. Plain library code, no pytest: a script can call it directly (docs/coverage.md)."""

from pytest_connic.coverage.compute import (
    CoverageReport,
    add_runtime_coverage,
    asserted_from_suites,
    compute_coverage,
    coverage_exit_status,
    merge_called,
    render_coverage,
    render_runtime_coverage,
    tool_inventory,
)

__all__ = [
    "CoverageReport",
    "add_runtime_coverage",
    "asserted_from_suites",
    "compute_coverage",
    "coverage_exit_status",
    "merge_called",
    "render_coverage",
    "render_runtime_coverage",
    "tool_inventory",
]
