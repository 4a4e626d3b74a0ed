"""The worker protocol: the messages that cross between pytest's process, a project's template
process and the workers the template forks, and how they cross: as data.

Every message is a frozen ``msgspec.Struct``, tagged with its class name, and crosses as one
MessagePack frame of a ``multiprocessing`` pipe (``send_bytes``/``recv_bytes``): no pickle in
either direction. Each direction has its own decoder (``FROM_WORKER`` ...), which accepts only
that direction's messages, checks every field's type, and every value inside (``values.checked``:
data only, at most ``values.MAX_DEPTH`` deep); a frame over ``MAX_FRAME`` bytes is not read. What
fails any of that is a :class:`BadFrame`: the side that reads it ends that pipe (pytest's process
kills the worker and says why), and nothing of it reaches pytest's state.

Each side has one handler method per message it receives (``handle_<message>``), dispatched on the
message's class (``match``, checked exhaustive by mypy: ``unhandled``). The message set, by
direction (as pytest-xdist's ``workermanage.py`` and ``remote.py`` name theirs):

- pytest's process to the template (``worker.TemplateProcess``): ``Preload``, ``Fork`` (followed on
  the pipe by three descriptors: the worker's end of its own pipe, its fds 1 and 2);
- the template to pytest's process (``pool.Template``): ``Started``, ``Importing``, ``Ready``,
  ``LoadFailed``, ``Forked``, ``ForkFailed``, ``WorkerExited``;
- pytest's process to a worker (``worker.Endpoint``): ``Call``, ``ServiceReturned``,
  ``ServiceRaised``, ``Release``;
- a worker to pytest's process (``pool.Worker``): ``CallResult`` (its ``outcome`` one of
  ``Returned``, ``Untransferable``, ``Raised``, ``Exited``, ``OutOfMemory``, ``RaisedBase``),
  ``ServiceRequest``, ``Released``.

Values inside messages are in their data form (``values.to_data``, by the sender); exceptions
cross as an :class:`EncodedException` (``errors.py``), their traceback as data.
"""

from __future__ import annotations

from typing import NoReturn, Protocol, TypedDict, TypeVar

import msgspec

from pytest_connic.errors import ConnicError
from pytest_connic.execution.isolation.coverage_share import CoverageSettings
from pytest_connic.execution.isolation.values import NotData, checked, ext_hook, might_not_be_data

#: the largest frame a side reads (a result past it crosses as ``Untransferable``)
MAX_FRAME = 64 * 1024 * 1024

#: the exit code of a worker whose reply path user code broke (``worker.Endpoint._answer``)
REPLY_BROKEN = 87

#: ("module", module name, qualname) or ("fresh", module name, file, qualname)
Ref = tuple[str, ...]
#: the arguments a call copies back: positional indexes of its dict and list arguments, "context"
Back = tuple[int | str, ...]
#: the arguments a call copied back, by their place in ``Back``
Copies = dict[int | str, object]


class Pipe(Protocol):
    """One end of a ``multiprocessing`` pipe, as the wire uses it (frames of bytes only)."""

    def send_bytes(self, buf: bytes, offset: int = 0, size: int | None = None) -> None: ...

    def recv_bytes(self, maxlength: int | None = None) -> bytes: ...


class BadFrame(ConnicError):
    """A frame that is not a message of its direction: malformed, mistyped, too deep or too big."""


class _Struct(msgspec.Struct, frozen=True, array_like=True):
    """A part of a message."""


class _Message(msgspec.Struct, frozen=True, array_like=True, tag=True):
    """A message: tagged with its class's name."""


# -- what a process takes of pytest's process -------------------------------------------------
def raw(text: str) -> bytes:
    """``text`` as bytes that keep any lone surrogate (a path or variable that is not UTF-8)."""
    return text.encode("utf-8", "surrogatepass")


def cooked(data: bytes) -> str:
    """The text ``raw`` gave."""
    return data.decode("utf-8", "surrogatepass")


class ForkSettings(_Struct, frozen=True):
    """What a worker takes of pytest's process when it is forked for a run: its working directory,
    environment and ``sys.path``, as bytes (``raw``: a name that is not UTF-8 crosses as it is)."""

    raw_cwd: bytes
    raw_env: dict[bytes, bytes]
    raw_sys_path: list[bytes]

    @classmethod
    def of(cls, cwd: str, env: dict[bytes, bytes], sys_path: list[str]) -> ForkSettings:
        """``env``: the environment's bytes (``os.environb``)."""
        return cls(raw(cwd), env, [raw(p) for p in sys_path])

    @property
    def cwd(self) -> str:
        return cooked(self.raw_cwd)

    @property
    def env(self) -> dict[str, str]:
        import os

        return {os.fsdecode(k): os.fsdecode(v) for k, v in self.raw_env.items()}

    @property
    def sys_path(self) -> list[str]:
        return [cooked(p) for p in self.raw_sys_path]


class WorkerSettings(_Struct, frozen=True):
    """What the template needs of pytest's process to load the project as it does (the argument
    of ``template_process.main``): the project's root, and ``ForkSettings`` of collection time."""

    raw_root: bytes
    process: ForkSettings
    memory_mb: int | None
    #: coverage.py's settings when pytest's process measures coverage (``coverage_share.py``)
    coverage: CoverageSettings | None = None

    @property
    def root(self) -> str:
        return cooked(self.raw_root)


# -- exceptions and their tracebacks (``usertb.TracebackData``, checked field by field) ---------
class Frame(TypedDict):
    """One frame of a traceback (``usertb._frames``)."""

    file: str
    line: int
    name: str
    first: int
    source: list[str]
    locals: dict[str, str]
    hidden: bool


class ChainEntry(TypedDict):
    """One exception of a traceback's chain."""

    type: str
    text: str
    frames: list[Frame]
    relation: str | None


class _TraceChain(TypedDict):
    chain: list[ChainEntry]


class Trace(_TraceChain, total=False):
    """A traceback as data (``usertb.TracebackData``); ``text``, ``where``, ``origin`` once
    finished for a record."""

    text: str
    where: str | None
    origin: str


class EncodedException(_Struct, frozen=True):
    """An exception on the wire: its class by module and qualname (rebuilt on the other side only
    when it is a built-in, the SDK's or pytest-connic's own class, ``errors.decode_exception``,
    else a stand-in of the same name), its type name and text, its args and attributes as data,
    its traceback and cause chain as data."""

    module: str
    qualname: str
    type_name: str
    text: str
    args: tuple[object, ...] = ()
    attrs: dict[str, object] = {}
    trace: Trace | None = None


# -- pytest's process -> the template ---------------------------------------------------------
class Preload(_Message, frozen=True):
    """Import ``names`` for the workers forked from now on, each within ``timeout_s``."""

    names: tuple[str, ...]
    timeout_s: float


class Fork(_Message, frozen=True):
    """Fork a worker for a run; three descriptors follow on the pipe in one message
    (``reduction.sendfds``): the worker's end of its own pipe, then what its fds 1 and 2 become.
    ``settings``: None when they are those of the previous ``Fork`` (pytest's environment, working
    directory and ``sys.path`` rarely change between runs: not sent again)."""

    token: int
    settings: ForkSettings | None


# -- the template -> pytest's process ---------------------------------------------------------
class Started(_Message, frozen=True):
    """The template runs (its process group is its pid); ``mark``: the inode of the pipe every
    process forked below it holds (``procs.kill_marked``: what outlives a killed template)."""

    pid: int
    mark: int = 0


class Importing(_Message, frozen=True):
    """The module of the project the template is importing while it loads (a start that hangs
    names it)."""

    module: str


class Ready(_Message, frozen=True):
    """The template loaded the project: it forks workers from now on."""

    pid: int


class LoadFailed(_Message, frozen=True):
    """The template could not load the project (or ended before it did)."""

    why: str


class Forked(_Message, frozen=True):
    """The worker asked for by ``token`` runs as ``pid``."""

    token: int
    pid: int


class ForkFailed(_Message, frozen=True):
    """No worker could be forked for ``token``."""

    token: int
    why: str


class WorkerExited(_Message, frozen=True):
    """The template reaped worker ``pid`` (``status`` as ``os.waitpid`` gives it)."""

    pid: int
    status: int


# -- pytest's process -> a worker -------------------------------------------------------------
class Call(_Message, frozen=True):
    """Call the function ``ref`` names with ``args`` and ``kwargs`` (data); ``back``: the
    arguments to copy back after it; ``seed``: the run's seed for ``random``, applied before the
    run's first call (models/world.py; user code reads the real clock)."""

    cid: int
    ref: Ref
    args: tuple[object, ...]
    kwargs: dict[str, object]
    back: Back = ()
    seed: int | None = None


class ServiceReturned(_Message, frozen=True):
    """The value of the ``connic.tools`` service request ``rid``."""

    rid: int
    value: object


class ServiceRaised(_Message, frozen=True):
    """The error of the ``connic.tools`` service request ``rid``."""

    rid: int
    error: EncodedException


class Release(_Message, frozen=True):
    """The run ended (asked only when coverage is measured: save it, the worker is killed next)."""


# -- a worker -> pytest's process -------------------------------------------------------------
class Returned(_Message, frozen=True):
    """The call returned this value (its data form)."""

    value: object


class Untransferable(_Message, frozen=True):
    """The call returned a value whose data form is more than a frame carries."""

    why: str


class Raised(_Message, frozen=True):
    """The call raised an ``Exception``."""

    error: EncodedException


class Exited(_Message, frozen=True):
    """The call raised ``SystemExit`` (``code``: its code, as text when not an int or None)."""

    code: int | str | None


class OutOfMemory(_Message, frozen=True):
    """The call went past the worker's memory limit (``MemoryError``)."""


class RaisedBase(_Message, frozen=True):
    """The call raised another ``BaseException`` (``KeyboardInterrupt``, ``GeneratorExit``, a
    cancellation, a class of the user's); ``where``: the innermost frame of the project."""

    type_name: str
    text: str
    where: str | None


CallOutcome = Returned | Untransferable | Raised | Exited | OutOfMemory | RaisedBase


class CallResult(_Message, frozen=True):
    """Call ``cid`` ended; ``copies``: the arguments it copied back (their data form)."""

    cid: int
    outcome: CallOutcome
    copies: list[tuple[int | str, object]] = []


class ServiceRequest(_Message, frozen=True):
    """User code of call ``cid`` (None: outside any call) called ``connic.tools.<name>``: pytest's
    process runs the service and answers request ``rid``."""

    cid: int | None
    rid: int
    name: str
    params: dict[str, object]


class Released(_Message, frozen=True):
    """The worker saved its coverage data."""


ToTemplate = Preload | Fork
FromTemplate = Started | Importing | Ready | LoadFailed | Forked | ForkFailed | WorkerExited
ToWorker = Call | ServiceReturned | ServiceRaised | Release
FromWorker = CallResult | ServiceRequest | Released
Message = ToTemplate | FromTemplate | ToWorker | FromWorker

_M = TypeVar("_M")


#: the decoder of one direction's messages (and of what a process is started with)
Decoder = msgspec.msgpack.Decoder

TO_TEMPLATE: Decoder[ToTemplate] = Decoder(ToTemplate, ext_hook=ext_hook)
FROM_TEMPLATE: Decoder[FromTemplate] = Decoder(FromTemplate, ext_hook=ext_hook)
TO_WORKER: Decoder[ToWorker] = Decoder(ToWorker, ext_hook=ext_hook)
FROM_WORKER: Decoder[FromWorker] = Decoder(FromWorker, ext_hook=ext_hook)
SETTINGS: Decoder[WorkerSettings] = Decoder(WorkerSettings, ext_hook=ext_hook)

_encode = msgspec.msgpack.Encoder().encode


def encode(message: Message | WorkerSettings) -> bytes:
    """``message`` as one frame; ``BadFrame`` when it is over ``MAX_FRAME`` bytes."""
    frame = _encode(message)
    if len(frame) > MAX_FRAME:
        raise BadFrame(f"a message of {len(frame) / 2**20:.0f} MiB, more than the {MAX_FRAME // 2**20} MiB "
                       "a message may carry")
    return frame


def decode(decoder: Decoder[_M], frame: bytes) -> _M:
    """The message ``frame`` holds, its values checked (``BadFrame`` when it is none)."""
    try:
        message = decoder.decode(frame)
        if might_not_be_data(frame):
            _check_values(message)
    except (msgspec.DecodeError, NotData, RecursionError, TypeError, ValueError, OverflowError) as exc:
        raise BadFrame(f"{type(exc).__name__}: {str(exc)[:200]}") from None
    return message


def _check_values(message: object) -> None:
    """The free-form values of a message are data (``values.checked``)."""
    match message:
        case Call():
            checked(message.args)
            checked(message.kwargs)
        case ServiceReturned():
            checked(message.value)
        case ServiceRaised():
            _check_error(message.error)
        case CallResult():
            checked(message.copies)
            if isinstance(message.outcome, Returned):
                checked(message.outcome.value)
            elif isinstance(message.outcome, Raised):
                _check_error(message.outcome.error)
        case ServiceRequest():
            checked(message.params)


def _check_error(error: EncodedException) -> None:
    checked(error.args)
    checked(error.attrs)


def send(conn: Pipe, message: Message) -> None:
    """Send ``message`` on ``conn`` as one frame."""
    conn.send_bytes(encode(message))


def receive(conn: Pipe, decoder: Decoder[_M]) -> _M:
    """The next message on ``conn`` (``EOFError``/``OSError`` when the pipe ends, ``BadFrame``
    when what came is not a message of ``decoder``'s direction)."""
    try:
        frame = conn.recv_bytes(MAX_FRAME)
    except OSError as exc:
        if str(exc) == "bad message length":  # multiprocessing's words for a frame over the limit
            raise BadFrame(f"a message of more than {MAX_FRAME // 2**20} MiB") from None
        raise
    return decode(decoder, frame)


def unhandled(message: NoReturn) -> NoReturn:
    """Where a handler's ``match`` ends: mypy rejects the call while a message class of the
    direction has no case (``typing.assert_never``, which needs Python 3.11)."""
    raise AssertionError(f"no handler for {message!r}")
