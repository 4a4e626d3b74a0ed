"""The default implementations of the plugin's own hooks (``plugin/hookspecs.py``), as pytest
keeps the defaults of its hooks in its own plugins: each answers ``None``, "no answer: the
runtime's own way", and runs last, so any ``conftest.py`` or plugin that implements the hook is
asked first. Registered with the hook specifications (``pytest_addhooks``).

What ``None`` means for each hook is said here once, and in docs/hooks.md."""

from __future__ import annotations

import pytest

#: this module's name as the plugin manager knows it (``user_implements`` leaves it out)
NAME = "connic-defaults"


@pytest.hookimpl(trylast=True)
def pytest_connic_make_model(config: pytest.Config, agent: object, model: str, case: object,
                             run_index: int) -> object:
    """The case's cassette (replay or recording), or LiteLLM with ``--connic-live``."""
    return None


@pytest.hookimpl(trylast=True)
def pytest_connic_guardrail(config: pytest.Config, rule: object, direction: str, content: str,
                            context: dict[str, object]) -> object:
    """The case's cassette (a ``guardrail`` entry of ``calls``), or the judge model while
    recording (``--connic-guardrail-model``); with neither, the check fails its case unless
    ``--connic-unjudged-guardrails=pass``."""
    return None


@pytest.hookimpl(trylast=True)
def pytest_connic_predefined_tool(config: pytest.Config, name: str, params: dict[str, object],
                                  context: dict[str, object]) -> object:
    """The tool's local implementation (``runtime/predefined/``)."""
    return None


def user_implements(config: pytest.Config, hook: str) -> bool:
    """Whether a ``conftest.py`` or another plugin implements ``hook`` (not only its default here)."""
    caller = getattr(config.pluginmanager.hook, hook)
    return any(impl.plugin_name != NAME for impl in caller.get_hookimpls())
