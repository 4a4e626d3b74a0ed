"""Values and exceptions on the wire (``execution/isolation/values.py``, ``exceptions.py``): data
crosses as itself, anything else as its description; what a hostile sender writes is refused
before it reaches pytest's state, and no class it names is imported or called."""

from __future__ import annotations

import datetime as dt
import sys
from multiprocessing import Pipe
from typing import Any

import msgspec
import pytest

from pytest_connic.execution.isolation import wire
from pytest_connic.execution.isolation.exceptions import RemoteUserError, decode_exception, encode_exception
from pytest_connic.execution.isolation.values import MAX_DEPTH, checked, to_data
from pytest_connic.project.sdk import ToolFile, TransferCall
from pytest_connic.runtime.signals import RunFailed


def crossed(value: object) -> Any:
    """``value`` as the other side reads it: its data form, through a frame, decoded."""
    message = wire.decode(wire.FROM_WORKER, wire.encode(wire.CallResult(1, wire.Returned(to_data(value)))))
    assert isinstance(message, wire.CallResult) and isinstance(message.outcome, wire.Returned)
    return message.outcome.value


class Point:
    def __repr__(self) -> str:
        return "Point(1, 2)"


class Model:
    def model_dump(self, mode: str = "python") -> dict[str, object]:
        return {"at": "2026-01-01T00:00:00", "mode": mode}


def test_data_crosses_as_itself_and_keeps_its_types() -> None:
    value = {"s": "ä", "i": -3, "big": 2**100, "f": 1.5, "n": None, "b": True, "raw": b"\x00\xff",
             "list": [1, [2]], "tuple": (1, (2, "x")), 7: "int key"}
    assert crossed(value) == value
    assert type(crossed((1, 2))) is tuple
    file = ToolFile(mime_type="image/png", data=b"png", name="a.png")
    assert crossed([file, "caption"]) == [file, "caption"]  # rebuilt by the SDK's constructor


def test_what_is_not_data_crosses_as_its_description() -> None:
    assert crossed(Point()) == "Point(1, 2)"
    assert crossed({"p": Point(), "s": {3, 1}}) == {"p": "Point(1, 2)", "s": [1, 3]}
    assert crossed(Model()) == {"at": "2026-01-01T00:00:00", "mode": "json"}  # pydantic's JSON dump
    assert crossed(dt.date(2026, 1, 2)) == "datetime.date(2026, 1, 2)"
    assert crossed("\ud800") == "\\ud800"  # a lone surrogate UTF-8 cannot carry
    loop: list[object] = []
    loop.append(loop)
    assert crossed(loop) == ["<cycle>"]
    deep: list[object] = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    text = str(crossed(deep))
    assert "<too deep>" in text


def test_a_huge_description_is_bounded() -> None:
    class Huge:
        def __repr__(self) -> str:
            return "x" * 1_000_000

    assert len(crossed(Huge())) < 70_000


def test_the_receiver_refuses_what_is_not_data() -> None:
    with pytest.raises(Exception, match="nested more than"):
        deep: list[object] = []
        for _ in range(MAX_DEPTH + 1):
            deep = [deep]
        checked(deep)
    nested: object = 1
    for _ in range(MAX_DEPTH + 1):
        nested = [nested]
    with pytest.raises(wire.BadFrame, match="nested more than"):  # as a hostile worker writes it
        wire.decode(wire.FROM_WORKER, msgspec.msgpack.encode(["CallResult", 1, ["Returned", nested], []]))
    timestamp = msgspec.msgpack.Ext(-1, b"\x00\x00\x00\x01")  # a MessagePack timestamp
    for code in (9, 1):  # an unknown extension; a tuple that is not an array
        frame = msgspec.msgpack.encode(["CallResult", 1, ["Returned", msgspec.msgpack.Ext(code, b"\x01")], []])
        with pytest.raises(wire.BadFrame):
            wire.decode(wire.FROM_WORKER, frame)
    with pytest.raises(wire.BadFrame, match="datetime"):
        wire.decode(wire.FROM_WORKER, msgspec.msgpack.encode(["CallResult", 1, ["Returned", timestamp], []]))


def test_a_pickle_or_garbage_is_a_bad_frame_and_nothing_is_unpickled(tmp_path: Any) -> None:
    import pickle

    marker = tmp_path / "marker"

    class Hostile:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (exec, (f"open({str(marker)!r}, 'w').write('x')",))

    for frame in (pickle.dumps(Hostile()), b"\xc1", b"", msgspec.msgpack.encode(["CallResult", "x"])):
        with pytest.raises(wire.BadFrame):
            wire.decode(wire.FROM_WORKER, frame)
    assert not marker.exists()


def test_a_frame_over_the_limit_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    ours, theirs = Pipe()
    monkeypatch.setattr(wire, "MAX_FRAME", 64)
    try:
        theirs.send_bytes(msgspec.msgpack.encode(["Released"]) + b"x" * 100)
        with pytest.raises(wire.BadFrame, match="more than"):
            wire.receive(ours, wire.FROM_WORKER)
        with pytest.raises(wire.BadFrame, match="more than"):
            wire.encode(wire.CallResult(1, wire.Returned("y" * 100)))
    finally:
        ours.close()
        theirs.close()


def test_builtin_sdk_and_own_exceptions_are_rebuilt_with_their_state() -> None:
    key = decode_exception(encode_exception(KeyError("chat"), "'chat'"))
    assert type(key) is KeyError and str(key) == "'chat'"
    missing = decode_exception(encode_exception(FileNotFoundError(2, "gone"), "gone"))
    assert isinstance(missing, FileNotFoundError) and missing.errno == 2
    transfer = decode_exception(encode_exception(TransferCall("+4930123456789"), "t"))
    assert type(transfer) is TransferCall and transfer.number == "+4930123456789"
    failed = decode_exception(encode_exception(RunFailed("no", keep_output=True), "no"))
    assert type(failed) is RunFailed and failed.message == "no" and failed.keep_output is True


def test_a_class_the_sender_names_is_never_imported_nor_called() -> None:
    def encoded(module: str, qualname: str, **attrs: object) -> wire.EncodedException:
        return wire.EncodedException(module, qualname, qualname.rsplit(".", 1)[-1], "text", ("a",), attrs)

    assert "pytest_connic.never_imported" not in sys.modules
    for module, qualname in (("os", "system"), ("subprocess", "Popen"), ("pytest_connic.never_imported", "X"),
                             ("builtins", "exec"), ("builtins", "object"), ("tools.calc", "CalcError"),
                             ("pytest_connic.execution.isolation.exceptions", "RemoteUserError")):
        exc = decode_exception(encoded(module, qualname))
        assert isinstance(exc, RemoteUserError), (module, qualname)
        assert str(exc) == "text"
    assert "pytest_connic.never_imported" not in sys.modules
    # attributes that are not plain state are not set
    exc = decode_exception(encoded("builtins", "ValueError", __class__="x", _connic_traceback={"chain": 1}))
    assert type(exc) is ValueError and not hasattr(exc, "_connic_traceback")


def test_a_malformed_traceback_is_a_bad_frame() -> None:
    error = ["builtins", "ValueError", "ValueError", "v", [], {}, {"chain": [{"type": "ValueError"}]}]
    frame = msgspec.msgpack.encode(["CallResult", 1, ["Raised", error], []])
    with pytest.raises(wire.BadFrame):
        wire.decode(wire.FROM_WORKER, frame)


def test_a_tuple_in_the_context_that_came_back_unchanged_is_left_alone() -> None:
    from pytest_connic.execution.isolation.copyback import copy_back, snapshot

    context: dict[str, object] = {"point": (1, 2), "n": 1}
    data = to_data(context)
    sent = snapshot(("context",), (), {"context": data})
    theirs = crossed({"point": (1, 2), "n": 2})
    context["point"] = (3, 4)  # another call of the same turn changed it meanwhile
    copy_back({"context": theirs}, sent, (), {"context": context})
    assert context == {"point": (3, 4), "n": 2}
