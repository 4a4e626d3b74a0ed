"""The first Connic suite (or the ``connic`` fixture, or an option that needs it) brings the
session state and the session plugins; a session without them never imports them."""

from __future__ import annotations

import pytest

from pytest_connic.plugin.options import ENV_SECRETS_KEY, SETTINGS_KEY
from pytest_connic.plugin.session import SESSION_KEY, ConnicSession


def activate(config: pytest.Config) -> ConnicSession:
    """The session state, created (and the session plugins registered) on the first call."""
    existing = config.stash.get(SESSION_KEY, None)
    if existing is not None:
        return existing
    from pytest_connic.pyparse import guard_ast_parse

    guard_ast_parse()  # the SDK, pytest and the plugin parse in several threads (CPython #106905)
    from pytest_connic.plugin.lifecycle import ConnicLifecycle
    from pytest_connic.plugin.xdist import ConnicWorker, is_worker

    secrets: frozenset[str] = config.stash[ENV_SECRETS_KEY]
    state = ConnicSession(config, config.stash[SETTINGS_KEY], secrets)
    config.stash[SESSION_KEY] = state
    config.add_cleanup(state.close)
    manager = config.pluginmanager
    manager.register(ConnicLifecycle(config, state), "connic-lifecycle")
    # optional features: a plugin object each, registered only when on
    from pytest_connic.plugin.progress import register as register_progress

    register_progress(config, state.settings.progress_interval)
    if is_worker(config):
        manager.register(ConnicWorker(config, state), "connic-worker")
    if state.settings.coverage:
        from pytest_connic.plugin.coverage_mode import ConnicCoverageMode

        manager.register(ConnicCoverageMode(config), "connic-coverage-mode")
    if state.settings.filter:
        from pytest_connic.plugin.selection import ConnicFilter

        manager.register(ConnicFilter(config, state.settings.filter), "connic-filter")
    if state.settings.ab:
        from pytest_connic.plugin.ab import register as register_ab

        register_ab(config, state)
    return state

