"""Turn whatever a run produced into JSON, with every secret masked.

Payloads, outputs and tool results are user data: they may hold bytes, sets, custom objects,
NaN, or even reference themselves. Reports must never fail on them, so each value becomes
plain JSON first (bytes as ``base64:<data>``, anything else as its ``repr``), and only then is
masked, so that a secret inside a ``repr`` is masked too.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Mapping
from typing import Any, Final, cast, overload

from pytest_connic.errors import ConnicError
from pytest_connic.secrets import Masker

#: a JSON scalar, a JSON value and a JSON object, as the plugin's reports, traces and records hold
#: them; parameters that only read one take ``Mapping[str, JsonValue]`` (covariant in its values)
JsonScalar = None | bool | int | float | str
JsonValue = JsonScalar | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject = dict[str, JsonValue]

#: prefix of a string that stands for bytes
BYTES_MARKER = "base64:"
_MAX_DEPTH = 64


@overload
def to_jsonable(value: str) -> str: ...
@overload
def to_jsonable(value: Mapping[str, object]) -> JsonObject: ...
@overload
def to_jsonable(value: object) -> JsonValue: ...


def to_jsonable(value: object) -> JsonValue:
    """A JSON-serialisable copy of ``value`` (insertion order of mappings kept)."""
    return _convert(value, frozenset(), 0)


@overload
def masked(value: str, masker: Masker) -> str: ...
@overload
def masked(value: Mapping[str, object], masker: Masker) -> JsonObject: ...
@overload
def masked(value: object, masker: Masker) -> JsonValue: ...


def masked(value: object, masker: Masker) -> JsonValue:
    """``value`` made JSON-serialisable, then with every secret replaced by ``***``; a string
    longer than ``masker.report_limit`` is cut there, with a marker saying how much was cut
    (reports stay bounded whatever a tool returned; the checks saw the whole value)."""
    data = to_jsonable(value)
    if masker.report_limit is None:
        return _mask(data, masker)
    return _bounded(data, masker)


def masked_again(value: Mapping[str, object], masker: Masker) -> JsonObject:
    """``value`` made JSON-serialisable and masked, without cutting long strings (values bounded
    already would otherwise be cut a second time)."""
    data = _mask(to_jsonable(value), masker)
    assert isinstance(data, dict)  # a mapping stays an object
    return data


def _mask(value: JsonValue, masker: Masker) -> JsonValue:
    """:meth:`Masker.data` over JSON, typed as JSON: it keeps a JSON value's shape (strings stay
    strings, objects objects, arrays arrays), which its ``object`` signature cannot say."""
    return cast(JsonValue, masker.data(value))


def _bounded(value: JsonValue, masker: Masker) -> JsonValue:
    if isinstance(value, str):
        return masker.report_text(value)
    if isinstance(value, dict):
        return {masker.report_text(k): _bounded(v, masker) for k, v in value.items()}
    if isinstance(value, list):
        return [_bounded(v, masker) for v in value]
    return value


def dumps(value: object, *, indent: int | None = None) -> str:
    """Compact or indented JSON text, non-ASCII kept readable."""
    separators = (",", ":") if indent is None else (",", ": ")
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, allow_nan=False)


#: what :func:`at_path` gives where a path leads nowhere (distinct from a stored ``None``)
MISSING: Final = object()


def at_path(value: object, path: str) -> object:
    """The value at a dot-notation ``path`` of JSON-like data (numeric segments index lists),
    or :data:`MISSING`: a session key, a concurrency key, a field of a stored document."""
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
    return value


def json_text(value: object, *, default: Callable[[object], object] | None = str, ensure_ascii: bool = False) -> str:
    """``json.dumps(value, ensure_ascii=False, default=default)``, or, for what JSON cannot hold
    (a cycle, an int past Python's digit limit, a tuple key, nesting past the stack), the JSON of
    :func:`to_jsonable`: user data on its way to a model or a middleware never raises."""
    try:
        return json.dumps(value, ensure_ascii=ensure_ascii, default=default)
    except Exception:  # noqa: BLE001 - also a user object whose __str__ (the default) raises
        return json.dumps(to_jsonable(value), ensure_ascii=ensure_ascii)


def trace_data(value: object) -> JsonValue:
    """``value`` as plain JSON data for a run's trace (a tool's params and result): what a JSON
    round trip gives (bytes as ``<n bytes>``, an object with ``model_dump()`` as its dump), and
    for what JSON cannot hold (a cycle, a huge int, deep nesting, an odd key) :func:`to_jsonable`.
    Never raises."""
    try:
        data: JsonValue = json.loads(json.dumps(value, default=_trace_default))
    except Exception:  # noqa: BLE001 - also a user object whose __str__ raises
        return to_jsonable(value)
    return data


def _trace_default(value: object) -> object:
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        try:
            return dump()
        except Exception as exc:  # noqa: BLE001 - a user object's broken model_dump: JSON cannot hold it either
            raise TypeError(f"{type(value).__name__}.model_dump() raised {type(exc).__name__}") from None
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def parse_json(text: object) -> Any:
    """The JSON value of ``text`` when it is a string (or UTF-8 bytes) holding valid JSON, else
    ``text`` itself."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            return text
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: JSON nested past Python's stack
        return text


class JsonBoundsError(ConnicError, ValueError):
    """JSON text that is not read: invalid, larger or deeper than its reader allows; the message
    says which, without a location (the caller names the file)."""


def load_bounded(text: str | bytes, *, max_depth: int, max_chars: int | None = None) -> Any:
    """The JSON value of ``text``, read with bounds: at most ``max_chars`` characters, nested at
    most ``max_depth`` levels, no ``NaN`` or ``Infinity`` (which JSON does not have);
    :class:`JsonBoundsError` otherwise. Never a ``RecursionError``, whatever the nesting."""
    if max_chars is not None and len(text) > max_chars:
        raise JsonBoundsError(f"more than {max_chars} characters")
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:  # the decoder's own bound (about the interpreter's recursion limit)
        raise JsonBoundsError(f"nested deeper than {max_depth} levels") from None
    except UnicodeDecodeError as exc:
        raise JsonBoundsError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:
        raise JsonBoundsError(f"invalid JSON: {exc}") from None
    if depth_exceeds(value, max_depth):
        raise JsonBoundsError(f"nested deeper than {max_depth} levels")
    return value


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def depth_exceeds(data: object, limit: int) -> bool:
    """Whether JSON ``data`` nests more than ``limit`` levels (walked without recursion)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return False


def _convert(value: object, path: frozenset[int], depth: int) -> JsonValue:
    if isinstance(value, str):
        return _text(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if _int_fits(value) else f"<int of about {int(value.bit_length() * 0.30103) + 1} digits>"
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return BYTES_MARKER + base64.b64encode(bytes(value)).decode("ascii")
    if depth >= _MAX_DEPTH:
        return "<too deep>"
    if id(value) in path:
        return "<cycle>"
    inner = path | {id(value)}
    if isinstance(value, Mapping):
        return {_key(k): _convert(v, inner, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_convert(v, inner, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [_convert(v, inner, depth + 1) for v in value]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    return _repr(value)


def _text(value: str) -> str:
    """``value`` as text UTF-8 can encode: a lone surrogate (from user data) becomes ``\\udxxx``,
    so that writing a report never fails."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _int_fits(value: int) -> bool:
    """Whether ``value`` converts to text (Python refuses ints past ``sys.get_int_max_str_digits``)."""
    if -(10**18) < value < 10**18:
        return True
    try:
        str(value)
    except ValueError:
        return False
    return True


def _key(key: object) -> str:
    if isinstance(key, str):
        return _text(key)
    if key is None or isinstance(key, (bool, float)) or (isinstance(key, int) and _int_fits(key)):
        return str(key)
    return _repr(key)


def _repr(value: object) -> str:
    try:
        return _text(repr(value))
    except Exception as exc:  # noqa: BLE001 - a broken __repr__ may raise anything; the report must not
        return f"<unrepresentable {type(value).__name__}: {type(exc).__name__}>"
