"""``--connic-record-mode=digests``: write refreshed ``request`` digests into a cassette's own text.

The file is edited in ruamel.yaml's round-trip mode (imported only here, when a file is written):
only the ``request`` mapping of each refreshed turn is replaced or added; everything else keeps
what ruamel keeps — comments, key order, quoting, flow or block style of collections, ``x-``
keys, a hand-written ``content:`` mapping. Not kept: the indentation (re-flowed to two spaces,
sequences indented under their key, as recorded cassettes are written) and blank-line or
comment placement inside a replaced ``request``.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING

from pytest_connic.models.base import CassetteError
from pytest_connic.models.cassette import Cassette, Turn

if TYPE_CHECKING:
    from ruamel.yaml.comments import CommentedMap


def refresh_digests(text: str, cassette: Cassette, refreshed: Mapping[int, Mapping[str, object]], shown: str) -> str:
    """``text`` (the cassette ``cassette`` was read from) with ``request`` set to ``refreshed[id(turn)]``
    for every turn that has an entry there."""
    from ruamel.yaml import YAML  # a dependency of digests mode only: the import costs ~50 ms

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a long line of the user's
    yaml.indent(mapping=2, sequence=4, offset=2)
    data = yaml.load(text)
    for turn, node in _pairs(cassette, data, shown):
        fingerprint = refreshed.get(id(turn))
        if fingerprint is not None:
            if not isinstance(node, MutableMapping):
                raise CassetteError(f"{shown}: the cassette changed while it was replayed; its digests were not "
                                    f"written (a turn is {type(node).__name__}, not a mapping)")
            node["request"] = _block(fingerprint)
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


#: the parts of a ``request`` section written on one line (digests, kinds)
_FLOW = ("messages", "tools", "volatile", "echoed")


def _block(fingerprint: Mapping[str, object]) -> CommentedMap:
    """The section as ruamel data: block style, its digests and kinds in flow style (one line),
    its ``text`` in block style with multi-line texts as literal blocks."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    out = CommentedMap()
    for key, value in fingerprint.items():
        if key in _FLOW and isinstance(value, (list, dict)):
            flow = CommentedSeq(value) if isinstance(value, list) else CommentedMap(value)
            flow.fa.set_flow_style()
            out[key] = flow
        else:
            out[key] = _nested(value)
    return out


def _nested(value: object) -> object:
    """Block-style ruamel data for ``value``; a text of several lines as a literal block."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.scalarstring import LiteralScalarString

    if isinstance(value, Mapping):
        return CommentedMap((k, _nested(v)) for k, v in value.items())
    if isinstance(value, list):
        return CommentedSeq(_nested(v) for v in value)
    if isinstance(value, str) and "\n" in value and not any(c in value for c in "\r\t\x85\u2028\u2029"):
        return LiteralScalarString(value)
    return value


def _pairs(cassette: Cassette, data: object, shown: str) -> Iterator[tuple[Turn, object]]:
    """Each turn of ``cassette`` with the mapping it was read from in ``data`` (same structure)."""
    try:
        for run, raw in zip(cassette.runs, _items(_at(data, "runs"))):
            raw = raw or {}
            if run.turns is not None:
                yield from zip(run.turns.turns, _items(_at(raw, "turns")))
            for agent, tapes in run.children.items():
                for tape, entry in zip(tapes, _items(_at(_at(raw, "children"), agent))):
                    yield from zip(tape.turns, _items(_at(entry, "turns")))
    except (KeyError, TypeError, IndexError) as exc:  # the file changed while the case ran
        raise CassetteError(f"{shown}: the cassette changed while it was replayed; its digests were not "
                            f"written ({type(exc).__name__}: {exc})") from None


def _at(value: object, key: str) -> object:
    if not isinstance(value, Mapping):
        raise TypeError(f"'{type(value).__name__}' object is not subscriptable")
    return value[key]


def _items(value: object) -> Iterable[object]:
    if not isinstance(value, Iterable):
        raise TypeError(f"'{type(value).__name__}' object is not iterable")
    return value
