"""pytest entry point (``pytest11: connic``): hook implementations and options only.

Everything heavy is imported lazily: the session state and the session plugins come with the
first Connic suite collected (``plugin.activation``), so a session without a Connic project
pays (almost) nothing for the plugin being installed.
"""

from __future__ import annotations

import sys
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_connic.plugin import hookspecs
from pytest_connic.plugin.options import ENV_SECRETS_KEY, SETTINGS_KEY, Settings, add_options
from pytest_connic.project.layout import suite_root
from pytest_connic.secrets import secret_values_from_env

#: the SDK's pydantic models use class-based ``Config`` (``PydanticDeprecatedSince20`` at import)
SDK_WARNINGS = r"ignore:Support for class-based `config` is deprecated:DeprecationWarning:connic(\.|$)"

if TYPE_CHECKING:
    from pytest_connic.plugin.session import ConnicSession


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_connic.plugin import defaults

    pluginmanager.add_hookspecs(hookspecs)
    pluginmanager.register(defaults, defaults.NAME)


@pytest.hookimpl(wrapper=True, tryfirst=True)  # before pytest's warnings plugin reads its filters
def pytest_load_initial_conftests(early_config: pytest.Config) -> Generator[None, None, None]:
    from pytest_connic.plugin.rootdir import keep_rootdir

    keep_rootdir(early_config)
    # a conftest.py that imports connic (docs/hooks.md) must not bring the SDK's own deprecation
    # warnings into the session's summary; set before any conftest is imported
    early_config.addinivalue_line("filterwarnings", SDK_WARNINGS)
    return (yield)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "connic: a case of a Connic test suite (tests/*.yaml)")
    usertb = sys.modules.get("pytest_connic.usertb")
    if usertb is not None:  # a session in the same process before this one (pytester's inline runs)
        usertb.forget_imports()
    settings = Settings.from_config(config)
    from pytest_connic.plugin.debugging import debugger_flag, with_debugger
    from pytest_connic.plugin.ecosystem import with_testmon

    settings = config.stash[SETTINGS_KEY] = with_testmon(config, with_debugger(config, settings))
    flag = debugger_flag(config)
    if flag is not None and settings.source("isolation") == flag:
        from pytest_connic.plugin.debugging import DebuggerLine

        config.pluginmanager.register(DebuggerLine(flag), "connic-debugger")
    config.stash[ENV_SECRETS_KEY] = frozenset(secret_values_from_env())
    if not hasattr(config, "workerinput") and (settings.json or settings.html or settings.traces
                                                or settings.coverage_json or settings.history or settings.summary
                                                or settings.cassette_dir != "cassettes"):
        from pytest_connic.plugin.outputguard import check_outputs

        check_outputs(config, settings)  # before anything is written: outputs never name inputs
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        from pytest_connic.plugin.xdist import ConnicXdist

        config.pluginmanager.register(ConnicXdist(config, _activate), "connic-xdist")
    if not hasattr(config, "workerinput"):  # the history is written once, by the controller
        from pytest_connic.plugin.history import ConnicHistory

        config.pluginmanager.register(ConnicHistory(config), "connic-history")
    if settings.needed_at_start():
        _activate(config)
    if any(config.pluginmanager.hasplugin(name) for name in ("repeat", "picked", "pytest-testmon")):
        from pytest_connic.plugin.ecosystem import ConnicEcosystem

        config.pluginmanager.register(ConnicEcosystem(config), "connic-ecosystem")
    annotates = config.pluginmanager.hasplugin("pytest_github_actions_annotate_failures")
    if annotates and not hasattr(config, "workerinput"):  # the controller re-emits workers' reports
        from pytest_connic.plugin.ecosystem import SetupErrorAnnotations

        config.pluginmanager.register(SetupErrorAnnotations(), "connic-setup-annotations")
    if settings.merge:
        from pytest_connic.plugin.merge import ConnicMerge

        config.pluginmanager.register(ConnicMerge(config), "connic-merge")


def _activate(config: pytest.Config) -> ConnicSession:
    from pytest_connic.plugin.activation import activate

    return activate(config)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> object:
    root = suite_root(file_path)
    if root is None:
        return None
    _activate(parent.config)
    from pytest_connic.plugin.items import SuiteFile

    return SuiteFile.from_parent(parent, path=file_path, project_root=root)


@pytest.fixture
def connic(request: pytest.FixtureRequest) -> object:
    """Drive the Connic runtime from Python tests: ``connic.run(agent, payload, ...)``.

    Returns run records (status, output, error, tool calls, trace) to assert on.
    See ``pytest_connic.plugin.fixture.ConnicRunner``.
    """
    from pytest_connic.plugin.fixture import make_runner

    _activate(request.config)
    return make_runner(request)
