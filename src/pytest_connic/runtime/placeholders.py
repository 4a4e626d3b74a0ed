"""Replace the SDK's ``connic.tools`` placeholders with local implementations.

User code imports them at module import time (``from connic.tools import db_find``),
so the functions in ``connic.tools`` are swapped for dispatchers before the
project's modules load, and module globals that still hold a placeholder are
swapped too. A dispatcher finds the running invocation through a context
variable; outside a run (a builder) it uses the project's services with
unrestricted access. Everything is restored when the session ends.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import connic.tools as connic_tools

if TYPE_CHECKING:
    from .services import ProjectServices

#: the services of the project whose builder is running (set around build/cleanup)
BUILDER_SERVICES: contextvars.ContextVar[ProjectServices | None] = contextvars.ContextVar(
    "connic_builder_services", default=None
)

_ORIGINALS: dict[str, Callable[..., Any]] = {}
_DISPATCHERS: dict[str, Callable[..., Any]] = {}


def _names() -> list[str]:
    return [
        name
        for name, value in vars(connic_tools).items()
        if inspect.iscoroutinefunction(value) and getattr(value, "__module__", "") == "connic.tools"
    ]


def _bind(params: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    bound = params.bind(*args, **kwargs)
    return dict(bound.arguments)


def _make(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    async def dispatcher(*args: Any, **kwargs: Any) -> Any:
        from .invocation import CURRENT
        from .predefined_dispatch import run_predefined, send_connector_record

        params = _bind(signature, args, kwargs)
        inv = CURRENT.get()
        if inv is not None:
            if name == "send_connector":
                return send_connector_record(inv, params["action_name"], params.get("payload"),
                                             params.get("idempotency_key"))
            return await run_predefined(inv, name, params)
        services = BUILDER_SERVICES.get()
        if services is None:
            raise RuntimeError(f"connic.tools.{name} was called outside a pytest-connic run")
        func = services.local.tools_for("<builder>", None).get(name)
        if func is None:
            raise RuntimeError(f"connic.tools.{name} is only available inside an agent run")
        return await func(**params)

    dispatcher.__connic_dispatcher__ = True  # type: ignore[attr-defined]
    return dispatcher


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
    """Replace placeholder references held in module globals (imported before ``install``)."""
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


def uninstall() -> None:
    """Put the SDK's placeholders back."""
    for name, original in _ORIGINALS.items():
        setattr(connic_tools, name, original)
    _ORIGINALS.clear()
    _DISPATCHERS.clear()
