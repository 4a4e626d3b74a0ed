"""Connic's static coverage report (``connic test --coverage``) and pytest-connic's runtime
extras. Plain library code, no pytest: a script can call it directly (docs/coverage.md).

``compute`` builds the report equal to Connic's, ``runtime`` adds what a test run knows, and
``render`` prints both as Connic does. The submodules never import this package's namespace.
"""

from pytest_connic.coverage.compute import (
    CoverageReport,
    compute_coverage,
    coverage_exit_status,
    tool_inventory,
)
from pytest_connic.coverage.render import render_coverage, render_runtime_coverage
from pytest_connic.coverage.runtime import add_runtime_coverage, asserted_from_suites, merge_called

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
