"""pytest entry point (``pytest11: connic``): hook implementations and options only.

Everything heavy is imported lazily, so a session without a Connic project pays
(almost) nothing for the plugin being installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_connic.plugin import hookspecs
from pytest_connic.plugin.options import Settings, add_options
from pytest_connic.project.layout import suite_root


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "connic: a case of a Connic test suite (tests/*.yaml)")
    from pytest_connic.plugin.session import SESSION_KEY, ConnicSession

    config.stash[SESSION_KEY] = ConnicSession(config, Settings(config))
    from pytest_connic.plugin.reporting import register

    register(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    from pytest_connic.plugin.session import SESSION_KEY

    state = config.stash.get(SESSION_KEY, None)
    if state is not None:
        state.close()


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Any:
    root = suite_root(file_path)
    if root is None:
        return None
    from pytest_connic.plugin.items import SuiteFile

    return SuiteFile.from_parent(parent, path=file_path, project_root=root)


@pytest.fixture
def connic(request: pytest.FixtureRequest) -> Any:
    """Drive the Connic runtime from Python tests: ``connic.run(agent, payload, ...)``.

    Returns run records (status, output, error, tool calls, trace) to assert on.
    See ``pytest_connic.plugin.fixture.ConnicRunner``.
    """
    from pytest_connic.plugin.fixture import make_runner

    return make_runner(request)
