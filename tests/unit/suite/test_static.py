"""Collection-time checks that need no project run: the open catalogue rule, names bound to values."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_connic.suite.static import catalogue_is_open, not_callable


@pytest.mark.parametrize(("config", "expected"), [
    ({"tools": ["calc.add", "web_search"]}, False),
    ({"tools": ["calc.add"], "mcp_servers": [{"name": "crm"}]}, True),
    ({"tools": ["api:weather.lookup"]}, True),
    ({"tools": [{"api:weather.*": "context.x == 1"}]}, True),
    ({"tools": [], "discoverable_tools": ["api:crm.find"]}, True),
    ({}, False),
])
def test_catalogue_is_open(config: dict[str, object], expected: bool) -> None:
    assert catalogue_is_open(SimpleNamespace(**config)) is expected


def test_not_callable_finds_literals_bound_to_called_names(tmp_path: Path) -> None:
    mocks = tmp_path / "m.py"
    mocks.write_text(
        "import functools\n"
        "mock_a = 3\n"
        "mock_b: dict = {}\n"
        "mock_c = functools.partial(print)\n"  # an expression: not judged
        "guardrail_input = None\n"
        "def mock_d(tool_name, params, context):\n    return {}\n"
        "mock_e = 'x'\n"
        "def mock_e(tool_name, params, context):\n    return {}\n"  # rebound to a def: fine
        "helper = 5\n"  # not a name Connic calls
        "build = 1\n",  # a builder name: not in a mocks module
        "utf-8",
    )
    found = {name: (line, col, kind) for name, line, col, kind in not_callable(mocks, "mocks")}
    assert found == {"mock_a": (2, 1, "3 (int)"), "mock_b": (3, 1, "a dict"), "guardrail_input": (5, 1, "None")}
    builder = tmp_path / "b.py"
    builder.write_text("build = [1]\ncleanup = None\nmock_x = 1\n", "utf-8")
    assert [(n, k) for n, _, _, k in not_callable(builder, "builders")] == [("build", "a list"), ("cleanup", "None")]


def test_not_callable_leaves_unparsable_modules_to_the_run(tmp_path: Path) -> None:
    broken = tmp_path / "x.py"
    broken.write_text("mock_a = (\n", "utf-8")
    assert not_callable(broken, "mocks") == []
    assert not_callable(tmp_path / "missing.py", "mocks") == []
