"""Builders (https://connic.co/docs/v1/test/fixtures-and-mocks): ``tests/builders/<name>.py`` with ``build`` and optional ``cleanup``."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pytest_connic.checks.compiled import ResolvedCase
from pytest_connic.errors import ConnicError
from pytest_connic.project.located import safe_text
from pytest_connic.runtime.mocks import ModuleLoadError, load_fresh
from pytest_connic.runtime.signals import UserCodeEnded
from pytest_connic.usertb import attach, import_traceback

Caller = Callable[..., Awaitable[Any]]


class BuilderError(ConnicError):
    """``build()`` failed: the run fails before the agent, cleanup still runs; ``__cause__`` is
    the user's exception when ``build()`` raised; it carries the import's traceback when the
    builder's module failed to import in its worker (``usertb.import_traceback``)."""


class CleanupFailure(str):
    """What ``cleanup()`` failing means, in words; ``raised`` is the user's exception when it raised."""

    raised: BaseException | None = None


class _OwnTimeout(ConnicError):
    """A ``TimeoutError`` of the builder's own, told apart from its bound running out."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(str(exc))
        self.exc = exc


class _BoundReached(ConnicError):
    """The bound of ``build()`` or ``cleanup()`` ran out."""


async def _bounded(awaitable: Awaitable[Any], timeout_s: float | None) -> object:
    """``awaitable`` within ``timeout_s``: ``_BoundReached`` when the bound ran out, a
    ``TimeoutError`` of the user's own passes as it is."""
    async def inner() -> object:
        try:
            return await awaitable
        except asyncio.TimeoutError as exc:
            raise _OwnTimeout(exc) from None

    try:
        return await asyncio.wait_for(inner(), timeout_s)
    except _OwnTimeout as own:
        raise own.exc from None
    except asyncio.TimeoutError:
        raise _BoundReached from None


def builder_path(project_root: Path, name: str) -> Path:
    """``tests/builders/<name>.py``; ``name`` may carry the ``.py`` suffix (Connic allows both)."""
    return _inside(project_root, project_root / "tests" / "builders" / f"{name.removesuffix('.py')}.py",
                   f"builder '{name}'")


def mocks_path(project_root: Path, name: str) -> Path:
    """``tests/mocks/<name>.py``; ``name`` may carry the ``.py`` suffix (Connic allows both)."""
    return _inside(project_root, project_root / "tests" / "mocks" / f"{name.removesuffix('.py')}.py",
                   f"mocks '{name}'")


def _inside(project_root: Path, path: Path, label: str) -> Path:
    """``path``, when no symbolic link leads it out of the project's ``tests/`` (Connic refuses
    links, so the code there would never run on Connic); else ``ModuleLoadError``."""
    tests = project_root / "tests"
    for part in (path, path.parent, tests):
        if part.is_symlink():
            where = part.relative_to(project_root).as_posix()
            raise ModuleLoadError(f"{label}: {where} is a symbolic link; Connic refuses links, so pytest-connic "
                                  "does not load code through one")
    if not path.resolve().is_relative_to(tests.resolve()):
        raise ModuleLoadError(f"{label}: {path} lies outside the project's tests/")
    return path


def load_builder(project_root: Path, name: str, *, static: bool = False) -> types.ModuleType:
    """A fresh builder module; raises ``ModuleLoadError`` when missing or without ``build``
    (``static``: read, not executed: ``load_fresh``)."""
    path = builder_path(project_root, name)
    module = load_fresh(path, f"builder '{name}'", static=static)
    if not callable(getattr(module, "build", None)):
        raise ModuleLoadError(f"builder '{name}': tests/builders/{path.name} defines no build() function")
    return module


def merge_files(built: object, fixtures: list[dict[str, str]]) -> tuple[Any, list[dict[str, str]]]:
    """Attach YAML fixtures to what ``build()`` returned: builder's own ``files`` first."""
    if isinstance(built, dict) and isinstance(built.get("files"), list):
        merged = dict(built)
        merged["files"] = [*built["files"], *fixtures]
        return merged, []
    return built, fixtures


async def build(
    call: Caller, module: types.ModuleType, context: dict[str, object], case: ResolvedCase,
    *, timeout_s: float | None = None,
) -> object:
    """Call ``build(context, builder_args, test_name, payload, files)``, bounded by ``timeout_s``."""
    try:
        result = await _bounded(call(
            module.build, context, dict(case.get("builder_args") or {}), case["name"], case.get("payload"),
            list(case.get("files") or []),
        ), timeout_s)
    except _BoundReached:
        raise BuilderError(f"builder build timed out after {timeout_s:g}s (timeout_s)") from None
    except UserCodeEnded as exc:  # a crash, a BaseException, the module's import in its worker: already in words
        raise attach(BuilderError(exc.message), import_traceback(exc)) from None
    except Exception as exc:
        raise BuilderError(f"builder build raised: {type(exc).__name__}: {safe_text(exc)}") from exc
    if not isinstance(result, (str, dict)):
        raise BuilderError(f"builder build must return str or dict, got {type(result).__name__}")
    return result


async def cleanup(
    call: Caller, module: types.ModuleType, run: dict[str, object], context: dict[str, object], case: ResolvedCase,
    *, timeout_s: float | None = None,
) -> str | None:
    """Call ``cleanup(run, context, builder_args)`` bounded by ``timeout_s`` (its own bound, after
    the run's); the failure it means, with Connic's messages."""
    func = getattr(module, "cleanup", None)
    if not callable(func):
        return None
    try:
        verdict = await _bounded(call(func, run, context, dict(case.get("builder_args") or {})), timeout_s)
    except _BoundReached:
        return f"builder cleanup timed out after {timeout_s:g}s (timeout_s)"
    except UserCodeEnded as exc:
        return exc.message
    except Exception as exc:  # noqa: BLE001  (user code)
        failure = CleanupFailure(f"builder cleanup raised: {safe_text(exc) or type(exc).__name__}")
        failure.raised = exc
        return failure
    if verdict is None or verdict is True:
        return None
    if verdict is False:
        return "builder cleanup returned False"
    return f"builder cleanup must return bool or None, got {type(verdict).__name__}"
