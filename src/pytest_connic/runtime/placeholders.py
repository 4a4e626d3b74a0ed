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
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from pytest_connic.project.sdk import sdk_tools as connic_tools

if TYPE_CHECKING:
    from pytest_connic.runtime.services import RuntimeServices

#: the services of the project whose builder is running (set around build/cleanup)
BUILDER_SERVICES: contextvars.ContextVar[RuntimeServices | None] = contextvars.ContextVar(
    "connic_builder_services", default=None
)


def is_dispatcher(value: object) -> bool:
    """Whether ``value`` is one of the stand-ins a :class:`PlaceholderSwap` put in place."""
    return bool(getattr(value, "__connic_dispatcher__", False))


class PlaceholderSwap:
    """The one swap of ``connic.tools``' placeholders, in pytest's process (the dispatcher below)
    and in a worker process (forwarders to pytest's process, ``execution/isolation/worker.py``).

    Each coroutine function the SDK defines in ``connic.tools`` is replaced by a stand-in that
    binds its arguments as the placeholder's signature does and awaits ``run(name, params)``;
    ``rebind`` swaps the placeholders that modules imported earlier hold in their globals, under
    any name (``from connic.tools import db_find as find``); ``restore`` puts everything back."""

    def __init__(self, run: Callable[[str, dict[str, object]], Awaitable[object]]) -> None:
        self._run = run
        #: the SDK's placeholders by name (kept alive: ``rebind`` matches them by id)
        self.originals: dict[str, Callable[..., Awaitable[object]]] = {}
        self.stand_ins: dict[str, Callable[..., Awaitable[object]]] = {}
        #: module globals that held a placeholder: (namespace, key, placeholder), for ``restore``
        self._rebound: list[tuple[dict[str, object], str, Callable[..., Awaitable[object]]]] = []

    def install(self) -> None:
        """Swap every placeholder in ``connic.tools`` for a stand-in (idempotent)."""
        if self.stand_ins:
            return
        for name, value in list(vars(connic_tools).items()):
            if (inspect.iscoroutinefunction(value) and getattr(value, "__module__", "") == "connic.tools"
                    and not is_dispatcher(value)):
                self.originals[name] = value
                self.stand_ins[name] = self._stand_in(name, value)
                setattr(connic_tools, name, self.stand_ins[name])

    def rebind(self, modules: list[types.ModuleType], *, undo: bool = True) -> None:
        """Replace placeholder references held in the globals of ``modules``; with ``undo``,
        ``restore`` puts them back (a worker drops its fresh modules instead)."""
        if not self.stand_ins:
            return
        by_id = {id(f): name for name, f in self.originals.items()}
        for module in modules:
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict) or module is connic_tools:
                continue
            for key, value in list(namespace.items()):
                name = by_id.get(id(value))
                if name is not None and value is self.originals[name]:
                    namespace[key] = self.stand_ins[name]
                    if undo:
                        self._rebound.append((namespace, key, value))

    def restore(self) -> None:
        """Put the SDK's placeholders back, in ``connic.tools`` and in rebound module globals."""
        for namespace, key, original in self._rebound:
            if is_dispatcher(namespace.get(key)):
                namespace[key] = original
        self._rebound.clear()
        for name, original in self.originals.items():
            setattr(connic_tools, name, original)
        self.originals.clear()
        self.stand_ins.clear()

    def _stand_in(self, name: str, original: Callable[..., Awaitable[object]]) -> Callable[..., Awaitable[object]]:
        signature = inspect.signature(original)
        run = self._run

        @functools.wraps(original)  # the SDK reads a tool's schema from its signature
        async def stand_in(*args: object, **kwargs: object) -> object:
            try:
                params = dict(signature.bind(*args, **kwargs).arguments)
            except TypeError as exc:
                raise TypeError(f"connic.tools.{name}(): {exc}") from None
            return await run(name, params)

        stand_in.__connic_dispatcher__ = True  # type: ignore[attr-defined]
        return stand_in


def _outside_run(name: str, params: dict[str, object]) -> Awaitable[object]:
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


async def _dispatch_here(name: str, params: dict[str, object]) -> object:
    """A call of ``connic.tools.<name>`` in pytest's process: for the running invocation, else a builder's."""
    # imported at call time: a dispatcher installed in connic.tools outlives a re-import of
    # pytest-connic's modules (pytester restores sys.modules between inner runs), and must
    # see the invocation that the current modules run
    from pytest_connic.runtime.predefined_dispatch import run_predefined
    from pytest_connic.runtime.state import CURRENT

    inv = CURRENT.get()
    if inv is not None:
        return await run_predefined(inv, name, params)
    return await _outside_run(name, params)


_SWAP = PlaceholderSwap(_dispatch_here)


async def dispatch(name: str, params: dict[str, object]) -> object:
    """Run ``connic.tools.<name>`` for a call made in a worker process (the caller's context holds
    the invocation, as for a call made here)."""
    dispatcher = _SWAP.stand_ins.get(name)
    if dispatcher is None:
        raise RuntimeError(f"connic.tools.{name} is not available in this session")
    return await dispatcher(**params)


def install() -> None:
    """Swap every placeholder in ``connic.tools`` for a dispatcher (idempotent)."""
    _SWAP.install()


def rebind_modules(modules: list[types.ModuleType]) -> None:
    """Replace placeholder references held in module globals (imported before ``install``)."""
    _SWAP.rebind(modules)


def uninstall() -> None:
    """Put the SDK's placeholders back, in ``connic.tools`` and in rebound module globals."""
    _SWAP.restore()
