"""The worker protocol: the messages that cross between pytest's process, a project's template
process and the workers the template forks, and what may cross inside them.

Every message is a frozen dataclass, sent whole over a ``multiprocessing`` pipe (pickled by it).
Each side has one handler method per message it receives (``handle_<message>``), dispatched on the
message's class (``match``, checked exhaustive by mypy: ``unhandled``); what arrives is
narrowed to its direction's messages first (``from_template`` ...), anything else is not a
message of the protocol. The message set, by direction (as pytest-xdist's ``workermanage.py``
and ``remote.py`` name theirs):

- pytest's process to the template (``worker._Template``): ``Preload``, ``Fork`` (followed on
  the pipe by three descriptors: the worker's end of its own pipe, its fds 1 and 2);
- the template to pytest's process (``pool.Template``): ``Started``, ``Importing``, ``Ready``,
  ``LoadFailed``, ``Forked``, ``ForkFailed``, ``WorkerExited``;
- pytest's process to a worker (``worker._Worker``): ``Call``, ``ServiceReturned``,
  ``ServiceRaised``, ``Release``;
- a worker to pytest's process (``pool.Worker``): ``CallResult`` (its ``outcome`` one of
  ``Returned``, ``Untransferable``, ``Raised``, ``Exited``, ``OutOfMemory``, ``RaisedBase``),
  ``ServiceRequest``, ``Released``.

What may cross: a call's arguments are pickled with its ``Call`` (one that does not pickle fails
the send, in pytest's process). A call's result and the arguments it copies back are pickled by
the worker ahead of its ``CallResult`` (``pickled_result``, ``pickled_copies``), so a value that
does not pickle crosses as its JSON-safe form (``Untransferable`` when not even that), and
pytest's process unpickles them itself (``unpickled_copies``): a class it cannot import is that
call's error, not a broken pipe. That is the snapshot of what was delivered (a tool that mutates
its arguments cannot rewrite the record). An exception crosses as an ``EncodedException``: pickled
when both sides can rebuild it, else as a stand-in of the same type name and text, with its
traceback as plain data.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from pytest_connic.errors import ConnicError
from pytest_connic.jsonsafe import to_jsonable
from pytest_connic.project.located import safe_text
from pytest_connic.usertb import TracebackData, attach, capture, remember_import

if TYPE_CHECKING:
    from pytest_connic.execution.isolation.coverage_share import CoverageSettings

#: ("module", module name, qualname) or ("fresh", module name, file, qualname)
Ref = tuple[str, ...]
#: the arguments a call copies back: positional indexes of its dict and list arguments, "context"
Back = tuple[int | str, ...]
#: the arguments a call copied back, by their place in ``Back``
Copies = dict[int | str, object]
#: a call's recorded world: the wall clock it starts at (ISO 8601, None: the real one) and the
#: run's seed for ``random`` (models/world.py)
World = tuple[str | None, int | None]


# -- what a process takes of pytest's process -------------------------------------------------
@dataclass(frozen=True)
class WorkerSettings:
    """What the template needs of pytest's process to load the project as it does (the argument
    of ``worker.main``)."""

    root: str
    cwd: str
    env: dict[str, str]
    sys_path: list[str]
    memory_mb: int | None
    #: coverage.py's settings when pytest's process measures coverage (``coverage_share.py``)
    coverage: CoverageSettings | None = None


@dataclass(frozen=True)
class ForkSettings:
    """What a worker takes of pytest's process when it is forked for a run."""

    cwd: str
    env: dict[str, str]
    sys_path: list[str]


# -- exceptions -----------------------------------------------------------------------------
@dataclass(frozen=True)
class EncodedException:
    """An exception on the wire: ``data`` is the exception pickled (or its class and state, see
    ``encode_exception``), None when it does not pickle; its type name and text always cross, its
    traceback and cause chain as plain data (``usertb``)."""

    data: bytes | None
    type_name: str
    text: str
    trace: TracebackData | None = None


# -- pytest's process -> the template ---------------------------------------------------------
@dataclass(frozen=True)
class Preload:
    """Import ``names`` for the workers forked from now on, each within ``timeout_s``."""

    names: tuple[str, ...]
    timeout_s: float


@dataclass(frozen=True)
class Fork:
    """Fork a worker for a run; three descriptors follow on the pipe (``send_handle``): the
    worker's end of its own pipe, then what its fds 1 and 2 become."""

    token: int
    settings: ForkSettings


# -- the template -> pytest's process ---------------------------------------------------------
@dataclass(frozen=True)
class Started:
    """The template runs (its process group is its pid)."""

    pid: int


@dataclass(frozen=True)
class Importing:
    """The module of the project the template is importing while it loads (a start that hangs
    names it)."""

    module: str


@dataclass(frozen=True)
class Ready:
    """The template loaded the project: it forks workers from now on."""

    pid: int


@dataclass(frozen=True)
class LoadFailed:
    """The template could not load the project (or ended before it did)."""

    why: str


@dataclass(frozen=True)
class Forked:
    """The worker asked for by ``token`` runs as ``pid``."""

    token: int
    pid: int


@dataclass(frozen=True)
class ForkFailed:
    """No worker could be forked for ``token``."""

    token: int
    why: str


@dataclass(frozen=True)
class WorkerExited:
    """The template reaped worker ``pid`` (``status`` as ``os.waitpid`` gives it)."""

    pid: int
    status: int


# -- pytest's process -> a worker -------------------------------------------------------------
@dataclass(frozen=True)
class Call:
    """Call the function ``ref`` names; ``back``: the arguments to copy back after it."""

    cid: int
    ref: Ref
    args: tuple[object, ...]
    kwargs: dict[str, object]
    back: Back = ()
    world: World | None = None


@dataclass(frozen=True)
class ServiceReturned:
    """The value of the ``connic.tools`` service request ``rid``."""

    rid: int
    value: object


@dataclass(frozen=True)
class ServiceRaised:
    """The error of the ``connic.tools`` service request ``rid``."""

    rid: int
    error: EncodedException


@dataclass(frozen=True)
class Release:
    """The run ended (asked only when coverage is measured: save it, the worker is killed next)."""


# -- a worker -> pytest's process -------------------------------------------------------------
@dataclass(frozen=True)
class Returned:
    """The call returned this value (pickled: ``pickled_result``)."""

    data: bytes


@dataclass(frozen=True)
class Untransferable:
    """The call returned a value that pickles neither as it is nor as its JSON-safe form."""

    why: str


@dataclass(frozen=True)
class Raised:
    """The call raised an ``Exception``."""

    error: EncodedException


@dataclass(frozen=True)
class Exited:
    """The call raised ``SystemExit`` (``code``: its code, as text when not an int or None)."""

    code: int | str | None


@dataclass(frozen=True)
class OutOfMemory:
    """The call went past the worker's memory limit (``MemoryError``)."""


@dataclass(frozen=True)
class RaisedBase:
    """The call raised another ``BaseException`` (``KeyboardInterrupt``, ``GeneratorExit``, a
    cancellation, a class of the user's); ``where``: the innermost frame of the project."""

    type_name: str
    text: str
    where: str | None


CallOutcome = Returned | Untransferable | Raised | Exited | OutOfMemory | RaisedBase


@dataclass(frozen=True)
class CallResult:
    """Call ``cid`` ended; ``copies``: the arguments it copied back (``pickled_copies``)."""

    cid: int
    outcome: CallOutcome
    copies: bytes | None


@dataclass(frozen=True)
class ServiceRequest:
    """User code of call ``cid`` (None: outside any call) called ``connic.tools.<name>``: pytest's
    process runs the service and answers request ``rid``."""

    cid: int | None
    rid: int
    name: str
    params: dict[str, object]


@dataclass(frozen=True)
class Released:
    """The worker saved its coverage data."""


ToTemplate = Preload | Fork
FromTemplate = Started | Importing | Ready | LoadFailed | Forked | ForkFailed | WorkerExited
ToWorker = Call | ServiceReturned | ServiceRaised | Release
FromWorker = CallResult | ServiceRequest | Released

_TO_TEMPLATE = (Preload, Fork)
_FROM_TEMPLATE = (Started, Importing, Ready, LoadFailed, Forked, ForkFailed, WorkerExited)
_TO_WORKER = (Call, ServiceReturned, ServiceRaised, Release)
_FROM_WORKER = (CallResult, ServiceRequest, Released)


def to_template(received: object) -> ToTemplate | None:
    """What the template received, if it is a message for it."""
    return received if isinstance(received, _TO_TEMPLATE) else None


def from_template(received: object) -> FromTemplate | None:
    """What pytest's process received from a template, if it is a message of a template."""
    return received if isinstance(received, _FROM_TEMPLATE) else None


def to_worker(received: object) -> ToWorker | None:
    """What a worker received, if it is a message for it."""
    return received if isinstance(received, _TO_WORKER) else None


def from_worker(received: object) -> FromWorker | None:
    """What pytest's process received from a worker, if it is a message of a worker."""
    return received if isinstance(received, _FROM_WORKER) else None


def unhandled(message: NoReturn) -> NoReturn:
    """Where a handler's ``match`` ends: mypy rejects the call while a message class of the
    direction has no case (``typing.assert_never``, which needs Python 3.11)."""
    raise AssertionError(f"no handler for {message!r}")


# -- values -----------------------------------------------------------------------------------
def pickled_result(result: object) -> Returned | Untransferable:
    """A call's result for the wire: pickled as it is, else as its JSON-safe form."""
    try:
        return Returned(pickle.dumps(result))
    except BaseException:  # noqa: BLE001  (an unpicklable result crosses as its JSON-safe form)
        try:
            return Returned(pickle.dumps(to_jsonable(result)))
        except BaseException as error:  # noqa: BLE001
            return Untransferable(f"{type(error).__name__}: {safe_text(error)}")


def pickled_copies(copies: Copies) -> bytes | None:
    """The arguments a call copies back, pickled as they are, else as their JSON-safe forms
    (None: nothing to copy back, or nothing that pickles)."""
    if not copies:
        return None
    try:
        return pickle.dumps(copies)
    except BaseException:  # noqa: BLE001  (something unpicklable put in the context)
        try:
            return pickle.dumps({k: to_jsonable(v) for k, v in copies.items()})
        except BaseException:  # noqa: BLE001
            return None


def unpickled_copies(data: bytes | None) -> Copies:
    """The arguments a call copied back (none when their classes cannot be imported here)."""
    if data is None:
        return {}
    try:
        copies = pickle.loads(data)
    except Exception:  # noqa: BLE001  (a class pytest's process cannot import: not copied back)
        return {}
    return copies if isinstance(copies, dict) else {}


# -- exceptions -------------------------------------------------------------------------------
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


def encode_exception(exc: BaseException, text: str) -> EncodedException:
    """``exc`` for the wire: pickled when it can be, always with its type name and text.

    An exception whose ``__init__`` does not take its own ``args`` back (the SDK's
    ``TransferCall(number)`` validates a phone number, its message is a sentence) pickles but does
    not unpickle: it crosses as its class and state instead, rebuilt without calling ``__init__``.
    Its traceback and ``__cause__`` / ``__context__`` chain cross as plain data (``usertb``), which
    pickling an exception would drop."""
    data: bytes | None
    try:
        data = pickle.dumps(exc)
        pickle.loads(data)
    except Exception:  # noqa: BLE001  (any user exception may refuse pickling or unpickling)
        data = _state_of(exc)
    try:
        trace: TracebackData | None = capture(exc)
    except Exception:  # noqa: BLE001  # pragma: no cover - the error still crosses, without frames
        trace = None
    return EncodedException(data, type(exc).__name__, text, trace)


@dataclass(frozen=True)
class _State:
    """An exception's class and state, for one that pickles but does not unpickle."""

    cls: type[BaseException]
    args: tuple[object, ...]
    attributes: dict[str, object]


def _state_of(exc: BaseException) -> bytes | None:
    """``exc``'s class and state, pickled (None when its state does not pickle)."""
    try:
        return pickle.dumps(_State(type(exc), exc.args, dict(vars(exc))))
    except Exception:  # noqa: BLE001
        return None


def decode_exception(encoded: EncodedException) -> BaseException:
    """The exception ``encode_exception`` sent, or its stand-in. The traceback of a module of the
    project that failed to import in the worker (what the exception carries) is remembered here
    (``usertb.remember_import``), as when the import fails in this process."""
    exc = _rebuilt(encoded.data) if encoded.data is not None else None
    remember_import(encoded.trace)
    return attach(exc if exc is not None else standin(encoded.type_name, encoded.text), encoded.trace)


def _from_state(value: object) -> object:
    """An exception rebuilt from ``_state_of`` (its class's ``__init__`` is not called)."""
    if not isinstance(value, _State):
        return value
    exc = value.cls.__new__(value.cls)
    exc.args = value.args
    exc.__dict__.update(value.attributes)
    return exc


def _rebuilt(data: bytes) -> Exception | None:
    """The pickled exception, when it unpickles here and prints (else None: its stand-in)."""
    try:
        exc = _from_state(pickle.loads(data))
        str(exc)
    except Exception:  # noqa: BLE001  (its class is not importable here, or its __str__ raises)
        return None
    return exc if isinstance(exc, Exception) else None
