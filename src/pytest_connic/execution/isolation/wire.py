"""What crosses between pytest's process and a worker: function references, values, exceptions.

Values cross by pickling: that is the snapshot of what was delivered (a tool that mutates its
arguments cannot rewrite the record). An exception crosses pickled when both sides can rebuild
it, else as a stand-in of the same type name and text.
"""

from __future__ import annotations

import pickle
from typing import Any

from pytest_connic.errors import ConnicError
from pytest_connic.usertb import attach, capture, remember_import

#: ("module", module name, qualname) or ("fresh", module name, file, qualname)
Ref = tuple[str, ...]


class RemoteUserError(ConnicError):
    """Base of the stand-ins for user exceptions that cannot be rebuilt in pytest's process
    (their class lives in a builder or mocks module, or they do not pickle)."""


_STANDINS: dict[str, type[RemoteUserError]] = {}


def standin(type_name: str, text: str) -> RemoteUserError:
    """An exception whose type is named ``type_name`` and whose text is ``text``."""
    cls = _STANDINS.get(type_name)
    if cls is None:
        cls = _STANDINS[type_name] = type(type_name, (RemoteUserError,), {"__module__": __name__})
    return cls(text)


def encode_exception(exc: BaseException, text: str) -> tuple[Any, ...]:
    """``exc`` for the wire: pickled when it can be, always with its type name and text.

    An exception whose ``__init__`` does not take its own ``args`` back (the SDK's
    ``TransferCall(number)`` validates a phone number, its message is a sentence) pickles but does
    not unpickle: it crosses as its class and state instead, rebuilt without calling ``__init__``.
    Its traceback and ``__cause__`` / ``__context__`` chain cross as plain data (``usertb``), which
    pickling an exception would drop."""
    try:
        data: bytes | None = pickle.dumps(exc)
        pickle.loads(data)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001  (any user exception may refuse pickling or unpickling)
        data = _state_of(exc)
    try:
        trace = capture(exc)
    except Exception:  # noqa: BLE001  # pragma: no cover - the error still crosses, without frames
        trace = None
    return (data, type(exc).__name__, text, trace)


def _state_of(exc: BaseException) -> bytes | None:
    """``exc``'s class and state, pickled (None when its state does not pickle)."""
    try:
        return pickle.dumps(("state", type(exc), exc.args, dict(vars(exc))))
    except Exception:  # noqa: BLE001
        return None


def decode_exception(encoded: tuple[Any, ...]) -> BaseException:
    """The exception ``encode_exception`` sent, or its stand-in. The traceback of a module of the
    project that failed to import in the worker (what the exception carries) is remembered here
    (``usertb.remember_import``), as when the import fails in this process."""
    data, type_name, text = encoded[:3]
    exc = _rebuilt(data) if data is not None else None
    trace = encoded[3] if len(encoded) > 3 else None
    remember_import(trace)
    return attach(exc if exc is not None else standin(type_name, text), trace)


def _from_state(value: Any) -> Any:
    """An exception rebuilt from ``_state_of`` (its class's ``__init__`` is not called)."""
    if not (isinstance(value, tuple) and len(value) == 4 and value[0] == "state"):
        return value
    _, cls, args, state = value
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc


def _rebuilt(data: bytes) -> Exception | None:
    """The pickled exception, when it unpickles here and prints (else None: its stand-in)."""
    try:
        exc = _from_state(pickle.loads(data))
        str(exc)
    except Exception:  # noqa: BLE001  (its class is not importable here, or its __str__ raises)
        return None
    return exc if isinstance(exc, Exception) else None
