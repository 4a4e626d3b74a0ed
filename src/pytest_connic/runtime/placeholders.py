"""Replace the SDK's ``connic.tools`` placeholders with local implementations.

User code imports them at module import time (``from connic.tools import db_find``).
``install()`` swaps every coroutine function of ``connic.tools`` for a dispatcher, so
modules imported afterwards (builders and mocks are loaded fresh for each run,
middleware and hooks on first use) bind the dispatcher; ``rebind_modules()`` swaps
the placeholders that modules imported earlier (the project's tools, loaded with the
project) hold in their globals. ``uninstall()`` puts everything back when the
session ends.

A dispatcher finds the running agent invocation through a context variable and runs
the tool for it (``predefined_dispatch.run_predefined``: the hook, then the local
implementation, with the agent's access rules). Outside an agent run, inside a
builder's ``build``/``cleanup``, the data tools (``db_*``, ``file_*``,
``retrieval_*``) run against the same local services without access rules, so a
builder can seed and remove data.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import types
from collections.abc import Callable
from typing import Any

from pytest_connic.project.sdk import sdk_tools as connic_tools
from pytest_connic.runtime.services import RuntimeServices

#: the services of the project whose builder is running (set around build/cleanup)
BUILDER_SERVICES: contextvars.ContextVar[RuntimeServices | None] = contextvars.ContextVar(
    "connic_builder_services", default=None
)

_ORIGINALS: dict[str, Callable[..., Any]] = {}
_DISPATCHERS: dict[str, Callable[..., Any]] = {}
#: module globals that held a placeholder: (namespace, key, placeholder), restored by ``uninstall``
_REBOUND: list[tuple[dict[str, Any], str, Callable[..., Any]]] = []


def _names() -> list[str]:
    return [
        name
        for name, value in vars(connic_tools).items()
        if inspect.iscoroutinefunction(value) and getattr(value, "__module__", "") == "connic.tools"
    ]


def is_dispatcher(value: Any) -> bool:
    """Whether ``value`` is one of the dispatchers ``install()`` put in place."""
    return bool(getattr(value, "__connic_dispatcher__", False))


def _outside_run(name: str, params: dict[str, Any]) -> Any:
    """The local implementation for a builder (no agent runs): the data tools, unrestricted."""
    services = BUILDER_SERVICES.get()
    if services is None:
        raise RuntimeError(
            f"connic.tools.{name} was called outside a pytest-connic run; it works inside agent runs "
            "(tools, hooks, middleware) and in builders"
        )
    func = services.local.tools_for("<builder>", None).get(name)
    if func is None:
        raise RuntimeError(
            f"connic.tools.{name} needs a running agent; a builder can use the db_*, file_* and "
            "retrieval_* tools"
        )
    return func(**params)


def _make(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    async def dispatcher(*args: Any, **kwargs: Any) -> Any:
        # imported at call time: a dispatcher installed in connic.tools outlives a re-import of
        # pytest-connic's modules (pytester restores sys.modules between inner runs), and must
        # see the invocation that the current modules run
        from pytest_connic.runtime.predefined_dispatch import run_predefined
        from pytest_connic.runtime.state import CURRENT

        try:
            params = dict(signature.bind(*args, **kwargs).arguments)
        except TypeError as exc:
            raise TypeError(f"connic.tools.{name}(): {exc}") from None
        inv = CURRENT.get()
        if inv is not None:
            return await run_predefined(inv, name, params)
        return await _outside_run(name, params)

    dispatcher.__connic_dispatcher__ = True  # type: ignore[attr-defined]
    return dispatcher


async def dispatch(name: str, params: dict[str, Any]) -> Any:
    """Run ``connic.tools.<name>`` for a call made in a worker process (the caller's context holds
    the invocation, as for a call made here)."""
    dispatcher = _DISPATCHERS.get(name)
    if dispatcher is None:
        raise RuntimeError(f"connic.tools.{name} is not available in this session")
    return await dispatcher(**params)


def install() -> None:
    """Swap every placeholder in ``connic.tools`` for a dispatcher (idempotent)."""
    if _DISPATCHERS:
        return
    for name in _names():
        original = getattr(connic_tools, name)
        _ORIGINALS[name] = original
        _DISPATCHERS[name] = _make(name, original)
        setattr(connic_tools, name, _DISPATCHERS[name])


def rebind_modules(modules: list[types.ModuleType]) -> None:
    """Replace placeholder references held in module globals (imported before ``install``),
    under any name (``from connic.tools import db_find as find``)."""
    if not _DISPATCHERS:
        return
    originals = {id(f): name for name, f in _ORIGINALS.items()}
    for module in modules:
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict) or module is connic_tools:
            continue
        for key, value in list(namespace.items()):
            name = originals.get(id(value))
            if name is not None and value is _ORIGINALS[name]:
                namespace[key] = _DISPATCHERS[name]
                _REBOUND.append((namespace, key, value))


def uninstall() -> None:
    """Put the SDK's placeholders back, in ``connic.tools`` and in rebound module globals."""
    for namespace, key, original in _REBOUND:
        if is_dispatcher(namespace.get(key)):
            namespace[key] = original
    _REBOUND.clear()
    for name, original in _ORIGINALS.items():
        setattr(connic_tools, name, original)
    _ORIGINALS.clear()
    _DISPATCHERS.clear()
