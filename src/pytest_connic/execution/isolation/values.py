"""What a value is on the wire: data, never code.

Everything that crosses between pytest's process and a worker (a call's arguments and result,
the arguments it copies back, a ``connic.tools`` request and its answer, an exception's args) is
first turned into its *data form* by the sending side (:func:`to_data`): ``None``, ``bool``,
``int``, ``float``, ``str``, ``bytes``, ``list``, ``dict``, and three values of the protocol's own,
carried as MessagePack extensions: a ``tuple``, an ``int`` past 64 bits, and a ``connic.ToolFile``
(rebuilt by the SDK's own constructor). Anything else is described, as Connic would hand it to
the model as JSON: an object with ``model_dump`` (pydantic) as its JSON dump, a set as its sorted
items, any other object as its ``repr`` (bounded, :data:`MAX_DESCRIPTION`). So the receiving side
only ever decodes data: no pickle, no class named by the sender is imported or called.

The receiving side checks what it decoded (:func:`checked`): nesting at most :data:`MAX_DEPTH`
deep, and only the types above (a MessagePack timestamp, say, is refused).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, cast

import msgspec

from pytest_connic.errors import ConnicError
from pytest_connic.jsonsafe import to_jsonable
from pytest_connic.project.sdk import ToolFile

#: how deep a value may nest (a deeper one is described by the sender, refused by the receiver)
MAX_DEPTH = 100
#: the longest description of a value that is not data
MAX_DESCRIPTION = 64 * 1024

#: the extension codes of the protocol's own values
EXT_TUPLE = 1
EXT_BIGINT = 2
EXT_TOOLFILE = 3
#: the most digits of an int the receiver rebuilds (Python's own limit for ``int(str)``)
_MAX_DIGITS = 4300
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1

_ENCODE = msgspec.msgpack.Encoder().encode


class NotData(ConnicError):
    """What arrived is not a value of the wire (too deep, or a type the wire does not carry)."""


def to_data(value: object) -> object:
    """``value``'s data form (see the module's docstring); never raises."""
    try:
        return _data(value, 0, set())
    except RecursionError:  # a value nested past the stack within MAX_DEPTH levels cannot be
        return _described(value)


def _data(value: object, depth: int, path: set[int]) -> object:
    kind = type(value)
    if kind is str:
        return _text(value)  # type: ignore[arg-type]
    if value is None or kind is bool or kind is float:
        return value
    if kind is int:
        return _int(value)  # type: ignore[arg-type]
    if depth >= MAX_DEPTH or id(value) in path:
        return "<too deep>" if depth >= MAX_DEPTH else "<cycle>"
    if kind is dict or kind is list or kind is tuple:
        return _container(value, depth, path)
    return _other(value, depth, path)


def _container(value: Any, depth: int, path: set[int]) -> object:
    path.add(id(value))
    try:
        if isinstance(value, Mapping):
            return {_key(k): _data(v, depth + 1, path) for k, v in value.items()}
        items = [_data(v, depth + 1, path) for v in value]
        if isinstance(value, tuple):
            return msgspec.msgpack.Ext(EXT_TUPLE, _ENCODE(items))
        return items
    finally:
        path.discard(id(value))


def _other(value: object, depth: int, path: set[int]) -> object:
    """Subclasses of the data types as their base type; ToolFile, bytes; the rest described."""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return _text(value[:])
    if isinstance(value, int):
        return _int(int(value))
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, ToolFile):
        fields = [value.mime_type, value.name, value.size_bytes, value.data, value.uri]
        return msgspec.msgpack.Ext(EXT_TOOLFILE, _ENCODE([_data(f, depth + 1, path) for f in fields]))
    if isinstance(value, (Mapping, list, tuple)):
        return _container(value, depth, path)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        with contextlib.suppress(Exception):  # a user object's model_dump: described below
            return _data(dump(mode="json"), depth, path)
    return _described(value)


def _described(value: object) -> object:
    """A value that is not data, as the model would read it: JSON-like where it has a form
    (a set), else its ``repr``; bounded."""
    data = to_jsonable(value)
    if isinstance(data, str) and len(data) > MAX_DESCRIPTION:
        return data[:MAX_DESCRIPTION] + f"... ({len(data) - MAX_DESCRIPTION} more characters)"
    try:
        _ENCODE(data)
    except Exception:  # noqa: BLE001  (a huge int inside a set: its text instead)
        return str(data)[:MAX_DESCRIPTION]
    return data


def text(value: str) -> str:
    """``value`` as a message carries it: a lone surrogate as its escape."""
    return _text(value)


def _text(value: str) -> str:
    """A string UTF-8 can carry (a lone surrogate becomes ``\\udxxx``, as reports write it)."""
    return value if value.isascii() else to_jsonable(value)


def _int(value: int) -> object:
    if _INT_MIN <= value <= _INT_MAX:
        return value
    try:
        return msgspec.msgpack.Ext(EXT_BIGINT, str(value).encode("ascii"))
    except ValueError:  # more digits than Python converts
        return f"<int of about {int(value.bit_length() * 0.30103) + 1} digits>"


def _key(key: object) -> object:
    """A mapping's key: a scalar stays (an int past 64 bits as its text), anything else its
    ``repr``, as a report shows it."""
    if isinstance(key, str):
        return _text(key[:])
    if key is None or isinstance(key, (bool, float)):
        return key
    if isinstance(key, int):
        if _INT_MIN <= key <= _INT_MAX:
            return int(key)
        big = _int(int(key))
        return big if isinstance(big, str) else str(int(key))
    keyed = cast("Mapping[str, object]", {key: None})
    return next(iter(to_jsonable(keyed)))  # its repr, as a report writes the key


# -- the receiving side -------------------------------------------------------------------------
#: the first bytes of a MessagePack array or map (one per level of nesting)
_CONTAINERS = bytes([*range(0x80, 0xA0), 0xDC, 0xDD, 0xDE, 0xDF])
_COUNTED = bytes(1 if b in _CONTAINERS else 0 for b in range(256))
#: the first bytes of a MessagePack timestamp (extension -1), the one extension decoded natively
_TIMESTAMPS = (b"\xd6\xff", b"\xd7\xff", b"\xc7")


def might_not_be_data(frame: bytes) -> bool:
    """Whether a decoded frame's values need :func:`checked`: only when the frame could nest
    ``MAX_DEPTH`` deep (it holds as many bytes that can open an array or a map) or could hold a
    timestamp; a frame with fewer cannot (a C scan of the bytes instead of a walk of the values)."""
    return frame.translate(_COUNTED).count(1) >= MAX_DEPTH or any(t in frame for t in _TIMESTAMPS)


def from_ext(value: msgspec.msgpack.Ext) -> object:
    """A value of the protocol's own (``to_data``'s extension) as the receiver reads it."""
    return ext_hook(value.code, memoryview(value.data))


def ext_hook(code: int, data: memoryview) -> object:
    """The protocol's own values (``msgspec``'s ``ext_hook``); any other extension is refused."""
    if code == EXT_TUPLE:
        items = msgspec.msgpack.decode(data, ext_hook=ext_hook)
        if not isinstance(items, list):
            raise NotData("a tuple that is not an array")
        return tuple(items)
    if code == EXT_BIGINT:
        digits = bytes(data)
        if not 0 < len(digits) <= _MAX_DIGITS or not digits.lstrip(b"-").isdigit():
            raise NotData("an int that is not digits")
        return int(digits)
    if code == EXT_TOOLFILE:
        fields = msgspec.msgpack.decode(data, ext_hook=ext_hook)
        if not isinstance(fields, list) or len(fields) != 5:
            raise NotData("a ToolFile that is not five fields")
        mime_type, name, size_bytes, content, uri = fields
        return ToolFile(mime_type=mime_type, name=name, size_bytes=size_bytes, data=content, uri=uri)
    raise NotData(f"an unknown extension ({code})")


_SCALARS = (str, int, float, bool, bytes, type(None), ToolFile)


def checked(value: object) -> object:
    """``value`` when it is data at most ``MAX_DEPTH`` deep, else ``NotData``."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, _SCALARS):
            continue
        if depth >= MAX_DEPTH:
            raise NotData(f"a value nested more than {MAX_DEPTH} deep")
        if isinstance(current, dict):
            for key in current:
                if not isinstance(key, (str, int, float, bool, type(None))):
                    raise NotData(f"a key of type {type(key).__name__}")
            stack.extend((v, depth + 1) for v in current.values())
        elif isinstance(current, (list, tuple)):
            stack.extend((v, depth + 1) for v in current)
        else:
            raise NotData(f"a value of type {type(current).__name__}")
    return value
