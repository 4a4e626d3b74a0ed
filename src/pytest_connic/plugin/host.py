"""The runtime's :class:`~pytest_connic.runtime.ports.Host` over pytest: the user's
``pytest_connic_*`` hooks (conftest.py) through the hook relay, and the session's warnings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


class PytestHost:
    """Answers the runtime's questions with the ``pytest_connic_*`` hooks of ``config``."""

    def __init__(self, config: pytest.Config, warn_once: Callable[..., None]) -> None:
        self.config = config
        #: the session's own method, called directly so that a warning points at the runtime's line
        self.warn_once = warn_once

    def make_model(self, agent: Any, model: str, case: dict[str, Any] | None, run_index: int) -> object | None:
        result: object | None = self.config.hook.pytest_connic_make_model(
            config=self.config, agent=agent, model=model, case=case, run_index=run_index
        )
        return result

    def guardrail(self, rule: Any, direction: str, content: str, context: dict[str, Any]) -> object | None:
        result: object | None = self.config.hook.pytest_connic_guardrail(
            config=self.config, rule=rule, direction=direction, content=content, context=context
        )
        return result

    def predefined_tool(self, name: str, params: dict[str, Any], context: dict[str, Any]) -> object | None:
        result: object | None = self.config.hook.pytest_connic_predefined_tool(
            config=self.config, name=name, params=params, context=context
        )
        return result
