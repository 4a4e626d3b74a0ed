"""Exceptions across the wire, as data (``wire.EncodedException``).

The sender describes an exception: its class's module and qualname, its type name and text, its
args and attributes in their data form (``values.to_data``), its traceback and cause chain as data
(``usertb.capture``). The receiver rebuilds it only when its class is one that pytest's process
already has and that cannot be the user's: a built-in exception, an exception of the SDK
(``connic``: ``StopProcessing``, ``AbortTool``, ...), or one of pytest-connic's own (a
``ConnicError``: ``RunFailed``, ``CassetteError``, ...), from modules already imported (nothing is
imported for it), without calling their ``__init__`` (only built-ins, whose constructors are the
interpreter's). Anything else (a class of the project, of a builder or mocks module) becomes a
stand-in of the same type name and text (:class:`RemoteUserError`), as the run's record and the
model read it.
"""

from __future__ import annotations

import builtins
import contextlib
import sys
from typing import Any, cast

from pytest_connic.errors import ConnicError
from pytest_connic.execution.isolation.values import text as _text
from pytest_connic.execution.isolation.values import to_data
from pytest_connic.execution.isolation.wire import EncodedException, Trace
from pytest_connic.jsonsafe import to_jsonable
from pytest_connic.usertb import TracebackData, attach, capture, remember_import

#: how many stand-in classes are kept (their names come from a worker)
_MAX_STANDINS = 256
_MAX_NAME = 200


class RemoteUserError(ConnicError):
    """Base of the stand-ins for user exceptions that cannot be rebuilt in pytest's process
    (their class lives in the project, a builder or mocks module)."""


_STANDINS: dict[str, type[RemoteUserError]] = {}


def standin(type_name: str, text: str) -> RemoteUserError:
    """An exception whose type is named ``type_name`` and whose text is ``text``."""
    name = type_name[:_MAX_NAME] if type_name.isidentifier() else "RemoteError"
    cls = _STANDINS.get(name)
    if cls is None:
        cls = type(name, (RemoteUserError,), {"__module__": __name__})
        if len(_STANDINS) < _MAX_STANDINS:
            _STANDINS[name] = cls
    return cls(text)


def encode_exception(exc: BaseException, text: str) -> EncodedException:
    """``exc`` for the wire: its class by name, its type name and text, its args and attributes
    as data, its traceback as data."""
    cls = type(exc)
    try:
        attrs = {k: to_data(v) for k, v in vars(exc).items() if isinstance(k, str) and _crosses(k)}
    except TypeError:  # no __dict__ (__slots__)
        attrs = {}
    try:
        trace: TracebackData | None = capture(exc)
    except Exception:  # noqa: BLE001  # pragma: no cover - the error still crosses, without frames
        trace = None
    args = tuple(to_data(a) for a in exc.args) if isinstance(exc.args, tuple) else ()
    # every string as a message carries it (a lone surrogate in a file name, a text: its escape)
    data = to_jsonable(trace) if trace is not None else None
    return EncodedException(_text(str(cls.__module__)), _text(str(cls.__qualname__)), _text(cls.__name__),
                            _text(text), args, attrs, cast("Trace | None", data))


def decode_exception(encoded: EncodedException) -> BaseException:
    """The exception ``encode_exception`` sent, or its stand-in. The traceback of a module of the
    project that failed to import in the worker (what the exception carries) is remembered here
    (``usertb.remember_import``), as when the import fails in this process."""
    trace = cast("TracebackData | None", encoded.trace)
    exc = _rebuilt(encoded)
    remember_import(trace)
    return attach(exc if exc is not None else standin(encoded.type_name, encoded.text), trace)


def known_class(module: str, qualname: str) -> type[BaseException] | None:
    """The exception class ``module``/``qualname`` names when it is one this process may rebuild:
    a built-in, the SDK's, or pytest-connic's own, from a module already imported."""
    if module == "builtins":
        found = getattr(builtins, qualname, None) if qualname.isidentifier() else None
        return found if isinstance(found, type) and issubclass(found, BaseException) else None
    ours = module.startswith("pytest_connic.")
    if not (ours or module == "connic" or module.startswith("connic.")):
        return None
    value: object = sys.modules.get(module)
    for part in qualname.split("."):
        if value is None or not part.isidentifier():
            return None
        value = getattr(value, part, None)
    if not isinstance(value, type) or not issubclass(value, BaseException):
        return None
    if ours and (not issubclass(value, ConnicError) or issubclass(value, RemoteUserError)):
        return None
    return value


def _rebuilt(encoded: EncodedException) -> BaseException | None:
    """The exception rebuilt from its data, when its class is known here and it prints."""
    cls = known_class(encoded.module, encoded.qualname)
    if cls is None:
        return None
    try:
        exc = _instance(cls, encoded.args)
        for key, value in encoded.attrs.items():
            if _crosses(key):
                setattr(exc, key, value)
        str(exc)
    except Exception:  # noqa: BLE001  (args its class refuses, an attribute it does not take)
        return None
    return exc


def _crosses(attribute: str) -> bool:
    """Whether an exception's attribute crosses: not a dunder, not the traceback it carries (that
    crosses checked, as ``trace``)."""
    return not attribute.startswith(("__", "_connic"))


def _instance(cls: type[BaseException], args: tuple[Any, ...]) -> BaseException:
    if cls.__module__ == "builtins":
        with contextlib.suppress(Exception):  # args its constructor refuses: built without it
            return cls(*args)  # the interpreter's own constructors (OSError's errno, ...)
    exc = cls.__new__(cls, *args)  # no __init__: the exception's state is what crossed
    exc.args = args
    return exc
