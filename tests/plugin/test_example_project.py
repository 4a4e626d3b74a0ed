"""The showcase project examples/order-desk stays green: every case of every suite passes offline."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "order-desk"


def _case_count(project: Path) -> int:
    """Cases in every suite (``tests/**/*.yaml``, Connic's discovery, no hidden paths)."""
    count = 0
    for suite in sorted((project / "tests").rglob("*.yaml")):
        if any(part.startswith(".") for part in suite.relative_to(project).parts):
            continue
        data = yaml.safe_load(suite.read_text("utf-8"))
        if data:
            count += len(data["tests"])
    return count


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_order_desk_example_passes_offline(pytester: pytest.Pytester) -> None:
    shutil.copytree(
        EXAMPLE,
        pytester.path,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"),
    )
    cases = _case_count(pytester.path)
    assert cases >= 10
    before = _snapshot(pytester.path / "cassettes")

    result = pytester.runpytest("-p", "no:cacheprovider")

    result.assert_outcomes(passed=cases)
    result.stdout.fnmatch_lines([f"{cases}/{cases} cases passed."])
    assert result.ret == 0
    # replay (the default record mode) never writes a cassette
    assert _snapshot(pytester.path / "cassettes") == before
