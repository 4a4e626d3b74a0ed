"""The worker protocol (``execution/isolation/wire.py``): named messages, one handler method per
message on the side that receives it, dispatched on the message's class (as pytest-xdist's
``workermanage.py`` / ``remote.py`` do); every message crosses whole as data, each direction
decodes only its own messages."""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path

import msgspec
import pytest

from pytest_connic.execution.isolation import endpoint, template, template_process, wire, worker
from pytest_connic.execution.isolation import template as template_module

ISOLATION = Path(wire.__file__).parent

#: direction -> (its union, its decoder, the class that receives it)
DIRECTIONS: dict[str, tuple[object, wire.Decoder[typing.Any], type]] = {
    "to the template": (wire.ToTemplate, wire.TO_TEMPLATE, template_process.TemplateProcess),
    "from the template": (wire.FromTemplate, wire.FROM_TEMPLATE, template.Template),
    "to a worker": (wire.ToWorker, wire.TO_WORKER, worker.Endpoint),
    "from a worker": (wire.FromWorker, wire.FROM_WORKER, endpoint.Worker),
}

SETTINGS = wire.ForkSettings.of("/\udcff", {b"A": b"1", b"ODD": b"\xff"}, ["/x"])
ERROR = wire.EncodedException("builtins", "ValueError", "ValueError", "v", ("v",))
#: one instance of every message
SAMPLES: list[object] = [
    wire.Preload(("tools.calc",), 1.5),
    wire.Fork(3, SETTINGS),
    wire.Started(10),
    wire.Importing("tools/calc.py"),
    wire.Ready(10),
    wire.LoadFailed("SyntaxError: x"),
    wire.Forked(3, 11),
    wire.ForkFailed(3, "OSError: no"),
    wire.WorkerExited(11, 9),
    wire.Call(1, ("module", "tools.calc", "add"), ({"a": 1},), {"context": {}}, (0, "context"), 7),
    wire.ServiceReturned(2, {"ok": True}),
    wire.ServiceRaised(2, ERROR),
    wire.Release(),
    wire.CallResult(1, wire.Returned(3)),
    wire.CallResult(1, wire.Untransferable("a message of 65 MiB")),
    wire.CallResult(1, wire.Raised(ERROR), [(0, {"a": 2})]),
    wire.CallResult(1, wire.Exited(3)),
    wire.CallResult(1, wire.OutOfMemory()),
    wire.CallResult(1, wire.RaisedBase("KeyboardInterrupt", "", "tools/calc.py:3")),
    wire.ServiceRequest(1, 2, "trigger_agent", {"agent_name": "x"}),
    wire.Released(),
]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_every_message_is_a_frozen_struct_of_exactly_one_direction() -> None:
    seen: list[type] = []
    for union, _, _ in DIRECTIONS.values():
        seen.extend(typing.get_args(union))
    assert len(seen) == len(set(seen))
    assert {type(m) for m in SAMPLES} == set(seen)
    for message in SAMPLES:
        assert isinstance(message, msgspec.Struct)
        with pytest.raises(AttributeError):
            setattr(message, "cid", 0)  # noqa: B010


@pytest.mark.parametrize("direction", sorted(DIRECTIONS))
def test_each_message_has_its_handler_on_the_receiving_side_and_is_dispatched_by_its_class(direction: str) -> None:
    union, narrow, receiver = DIRECTIONS[direction]
    members = typing.get_args(union)
    for sample in [m for m in SAMPLES if type(m) in members]:
        handler = f"handle_{_snake(type(sample).__name__)}"
        assert callable(getattr(receiver, handler, None)), f"{receiver.__qualname__}.{handler}"
        handled: list[tuple[str, object]] = []
        side = object.__new__(receiver)
        for cls in members:  # every handler of the side records what it got
            name = f"handle_{_snake(cls.__name__)}"
            setattr(side, name, lambda message, name=name, handled=handled: handled.append((name, message)))
        received = wire.decode(narrow, wire.encode(sample))  # type: ignore[arg-type]
        assert received == sample
        side.handle(received)
        assert handled == [(handler, sample)]
    # anything else is not a message of the direction
    for other in [m for m in SAMPLES if type(m) not in members]:
        with pytest.raises(wire.BadFrame):
            wire.decode(narrow, wire.encode(other))  # type: ignore[arg-type]
    with pytest.raises(wire.BadFrame):
        wire.decode(narrow, msgspec.msgpack.encode(["call", 1]))  # type: ignore[arg-type]


def test_no_tuple_crosses_and_no_message_is_read_by_position() -> None:
    for path in sorted(ISOLATION.glob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "send":
                assert not any(isinstance(a, ast.Tuple) for a in node.args), f"{path.name}:{node.lineno}"
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
                assert node.value.id not in ("message", "received", "outcome"), f"{path.name}:{node.lineno}"


def test_nothing_of_the_isolation_package_decodes_with_pickle() -> None:
    """What a worker or the template sends is decoded by ``wire.decode`` alone: no module of the
    package imports pickle (or marshal, shelve, dill...), nor calls ``Connection.recv``."""
    for path in sorted(ISOLATION.glob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and
                                                        node.module else [])
                assert not {n.split(".")[0] for n in names} & {"pickle", "marshal", "shelve", "dill", "cloudpickle"}, \
                    f"{path.name}:{node.lineno}"
            if isinstance(node, ast.Attribute) and node.attr == "recv":
                raise AssertionError(f"{path.name}:{node.lineno}: Connection.recv unpickles")


class _ClosedUnderTheReader:
    """A pipe that ``Template.close`` closed while the reader was in ``recv``: multiprocessing
    then reads from a handle that is None."""

    closed = True

    def recv_bytes(self, maxlength: int | None = None) -> bytes:
        raise TypeError("'NoneType' object cannot be interpreted as an integer")

    def close(self) -> None:
        pass


class _EndedProcess:
    sentinel = -1
    exitcode = 0

    def join(self, timeout: float | None = None) -> None:
        pass


def test_a_pipe_closed_in_the_middle_of_a_read_ends_the_reader_quietly(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    """The session's end closes the template's pipe from another thread; the reader thread ends
    as for a closed pipe, not with an unhandled exception (pytest's thread-exception warning)."""
    conn = _ClosedUnderTheReader()

    class Readable:
        def __init__(self, *args: object) -> None:
            pass

        def readable(self) -> bool:
            return True

        def close(self) -> None:
            pass

    monkeypatch.setattr(template_module, "Waiter", Readable)
    template = template_module.Template(tmp_path, None)
    template._read(_EndedProcess(), conn)  # type: ignore[arg-type]
    assert template.dead
    conn.closed = False  # the same error on an open pipe is a bug, and propagates
    with pytest.raises(TypeError):
        template_module.Template(tmp_path, None)._read(_EndedProcess(), conn)  # type: ignore[arg-type]


def test_names_that_are_not_utf8_cross_as_they_are() -> None:
    """A path or variable holding a byte that is not UTF-8 (a lone surrogate in Python) crosses
    unchanged: the worker runs with pytest's environment exactly."""
    crossed = wire.decode(wire.TO_TEMPLATE, wire.encode(wire.Fork(1, SETTINGS)))
    assert isinstance(crossed, wire.Fork) and crossed.settings is not None
    assert crossed.settings.env == {"A": "1", "ODD": "\udcff"} and crossed.settings.cwd == "/\udcff"
