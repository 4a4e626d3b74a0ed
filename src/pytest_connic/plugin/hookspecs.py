"""Hooks a conftest.py can implement to extend pytest-connic."""

from __future__ import annotations

import pytest


@pytest.hookspec(firstresult=True)
def pytest_connic_make_model(config: pytest.Config, agent: object, model: str, case: object, run_index: int) -> object:
    """Supply the model for one agent invocation.

    Return any object with ``async complete(request: ModelRequest) -> ModelResponse``
    (see ``pytest_connic.models.base``), or None to use the default (cassettes,
    or LiteLLM with ``--connic-live``). ``agent`` is the SDK's ``Agent``, ``model``
    its model string, ``case`` the resolved case record (a dict) or None for the
    ``connic`` fixture, ``run_index`` the 0-based run of the case.
    """


@pytest.hookspec(firstresult=True)
def pytest_connic_guardrail(
    config: pytest.Config, rule: object, direction: str, content: str, context: dict[str, object]
) -> object:
    """Judge a model-based built-in guardrail (Connic evaluates it with a hosted model).

    ``rule`` is the SDK's ``GuardrailRule`` (``type`` is one of prompt_injection,
    moderation, topic_restriction, relevance, system_prompt_leakage,
    data_exfiltration), ``direction`` is ``input`` or ``output``. Return a
    ``connic.GuardrailResult`` (or a bool: True = passed), or None to leave the check
    to the case's cassette (a ``guardrail`` entry of ``calls``) or, while recording,
    the judge model (``--connic-guardrail-model``); a check with no judgement fails
    the case unless ``--connic-unjudged-guardrails=pass`` (docs/guardrails.md). Asked
    first, in every mode; never recorded. May be a coroutine function.
    """


@pytest.hookspec(firstresult=True)
def pytest_connic_predefined_tool(
    config: pytest.Config, name: str, params: dict[str, object], context: dict[str, object]
) -> object:
    """Supply the implementation of a Connic predefined tool for one call.

    Called for every predefined tool call before the local implementation, also when
    user code awaits ``connic.tools.<name>``, in every mode (never recorded). Return
    None to use the local one (``web_search``/``web_read_page``: the real call while
    recording, the cassette in replay; ``web_browser_*`` have none). Any other
    return value is the tool's result; a coroutine is awaited. Raise an exception to
    make the call fail (the model sees the error). ``send_connector`` is recorded in the
    run whatever the hook returns; it is never delivered.
    """
