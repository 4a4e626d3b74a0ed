"""The ports through which the runtime reaches the outside.

The runtime never imports the layer that drives it (pytest, the ``connic`` fixture, a library
caller): whoever builds the :class:`~pytest_connic.runtime.services.RuntimeServices` hands it a
:class:`Host`. ``pytest_connic.plugin.host.PytestHost`` answers over pytest's hook relay (the
``pytest_connic_*`` hooks of a conftest.py); :class:`NullHost` has no user hooks.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pytest_connic.warnings import ConnicWarning

if TYPE_CHECKING:
    from pytest_connic.project.sdk import Agent, GuardrailRule


class Host(Protocol):
    """What the runtime asks of the program that runs it.

    Each method answers None when the host has nothing to say (the runtime then uses its
    default: cassettes or live models, the local tool, a guardrail not evaluated). A result
    may be awaitable where the hook allows it (``guardrail``, ``predefined_tool``)."""

    def make_model(self, agent: Agent, model: str, case: Mapping[str, object] | None,
                   run_index: int) -> object | None:
        """A model for one agent invocation (``pytest_connic_make_model``)."""

    def guardrail(self, rule: GuardrailRule, direction: str, content: str,
                  context: dict[str, object]) -> object | None:
        """The result of a model-based built-in guardrail (``pytest_connic_guardrail``)."""

    def predefined_tool(self, name: str, params: dict[str, object],
                        context: dict[str, object]) -> object | None:
        """The result of a predefined tool call (``pytest_connic_predefined_tool``)."""

    def warn_once(self, key: str | None, message: str, category: type[Warning] | None = None,
                  location: tuple[str | Path, int] | None = None) -> None:
        """The one way the runtime (and the layers under the plugin) warns: ``message`` (a
        ``ConnicWarning`` unless ``category`` says which) once per ``key`` (``None``: every time),
        located at ``location`` (a file and line of the user's: a suite file, a cassette), else at
        the case running now, else at the caller, so pytest's summary names the user's file."""


class WarnedKeys:
    """The keys a host has warned about (thread-safe): :meth:`first` is true once per key, and
    always for ``None`` (a warning that is not deduplicated)."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def first(self, key: str | None) -> bool:
        if key is None:
            return True
        with self._lock:
            if key in self._seen:
                return False
            self._seen.add(key)
            return True


class NullHost:
    """A host without user hooks, for library use: every question is answered with None, and
    each warning is emitted once per key, at the caller (pytest's host locates them,
    ``plugin/host.py``)."""

    def __init__(self) -> None:
        self._warned = WarnedKeys()

    def make_model(self, agent: Agent, model: str, case: Mapping[str, object] | None,
                   run_index: int) -> object | None:
        return None

    def guardrail(self, rule: GuardrailRule, direction: str, content: str,
                  context: dict[str, object]) -> object | None:
        return None

    def predefined_tool(self, name: str, params: dict[str, object],
                        context: dict[str, object]) -> object | None:
        return None

    def warn_once(self, key: str | None, message: str, category: type[Warning] | None = None,
                  location: tuple[str | Path, int] | None = None) -> None:
        if self._warned.first(key):
            warnings.warn((category or ConnicWarning)(message), stacklevel=2)
