"""``usertb``: a user exception's traceback as plain data (frames, source, locals, the chain)."""

from __future__ import annotations

from pathlib import Path

from pytest_connic.execution.isolation import wire
from pytest_connic.execution.isolation.exceptions import decode_exception, encode_exception
from pytest_connic.usertb import CAUSE, capture, for_record, traceback_of


def _raise_chain() -> None:
    token = "sk-secret-123"  # noqa: F841  (a local the masker must hide)
    try:
        {}["missing"]
    except KeyError as exc:
        raise ValueError("wrapped") from exc


def _caught() -> BaseException:
    try:
        _raise_chain()
    except ValueError as exc:
        return exc
    raise AssertionError("no exception")  # pragma: no cover


def test_the_chain_frames_source_and_locals_are_captured() -> None:
    data = capture(_caught())
    first, second = data["chain"]
    assert (first["type"], first["relation"]) == ("KeyError", None)
    assert (second["type"], second["text"], second["relation"]) == ("ValueError", "wrapped", CAUSE)
    inner = first["frames"][-1]
    assert inner["name"] == "_raise_chain" and inner["source"][-1].strip() == '{}["missing"]'
    assert inner["locals"]["token"] == "'sk-secret-123'"
    assert not inner["hidden"]


def test_the_record_form_is_masked_and_located() -> None:
    data = for_record(_caught(), Path(__file__).parent, lambda s: s.replace("sk-secret-123", "***"))
    assert data is not None
    assert "sk-secret-123" not in repr(data)
    assert data["where"] == f"test_usertb.py:{_raise_chain.__code__.co_firstlineno + 5}"  # the raise
    assert data["text"].startswith("Traceback (most recent call last):")
    assert "The above exception was the direct cause of the following exception:" in data["text"]


def test_the_traceback_crosses_the_wire_with_the_exception() -> None:
    exc = _caught()
    message = wire.ServiceRaised(1, encode_exception(exc, str(exc)))
    crossed = wire.decode(wire.TO_WORKER, wire.encode(message))
    assert isinstance(crossed, wire.ServiceRaised)
    decoded = decode_exception(crossed.error)
    assert type(decoded) is ValueError and str(decoded) == "wrapped"
    carried = traceback_of(decoded)
    assert carried is not None and [e["type"] for e in carried["chain"]] == ["KeyError", "ValueError"]
    assert capture(decoded) == carried  # re-raised by the machinery only: the worker's frames stand
