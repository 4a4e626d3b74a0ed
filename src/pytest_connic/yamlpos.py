"""Safe YAML loading that remembers where every value came from.

``load_with_positions`` returns the same data ``yaml.safe_load`` would, plus a
map from key paths (tuples of keys and indexes) to ``(line, column)``, both
1-based, so that validation errors can say ``tests/x.yaml:14:5``.

Bounded: alias expansion, nesting depth and document size are limited, so an
alias bomb or a pathological document is refused quickly with a clear error.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pytest_connic.errors import ConnicError

MAX_NODES = 200_000
MAX_DEPTH = 64
MAX_BYTES = 10 * 1024 * 1024

#: a key path into a document: mapping keys and sequence indexes, ("tests", 2, "name")
KeyPath = tuple[Hashable, ...]

_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"
_STR = "tag:yaml.org,2002:str"

#: libyaml's parser when PyYAML has it (the composer runs in C), else the pure-Python one
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_C_MAX_STRUCTURE = 5_000
#: text that libyaml reads differently from PyYAML (a leading BOM is fine)
_C_DIFFERS = re.compile(r"[\t\x85\u2028\u2029\ufeff]|!(?:\s|$)|[|>][-+0-9]*#")


class YamlError(ConnicError):
    """The document cannot be loaded. ``line``/``column`` are 1-based when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


@dataclass
class YamlPositions:
    """Where each key path starts: the value's position, and the key's for mapping entries."""

    values: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)
    keys: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)

    def of(self, path: KeyPath, *, key: bool = False) -> tuple[int, int]:
        """The position of ``path``, or of its nearest known ancestor."""
        table = self.keys if key else self.values
        probe = tuple(path)
        while probe:
            if probe in table:
                return table[probe]
            if probe in self.values:
                return self.values[probe]
            probe = probe[:-1]
        return self.values.get((), (1, 1))


class _Builder:
    def __init__(self, loader: yaml.SafeLoader) -> None:
        self.loader = loader
        self.positions = YamlPositions()
        self.count = 0
        # A plain string scalar is its own text (SafeConstructor.construct_yaml_str); taking it
        # directly skips the constructor's bookkeeping for most of a suite's values. Only while
        # no other constructor is registered for the tag, so the result stays safe_load's.
        self.plain_str = type(loader).yaml_constructors.get(_STR) is yaml.SafeLoader.construct_yaml_str

    def construct(self, node: yaml.Node) -> object:
        if self.plain_str and type(node) is yaml.ScalarNode and node.tag == _STR:
            return node.value
        return self.loader.construct_object(node, deep=True)

    def _bound(self, node: yaml.Node, depth: int) -> None:
        self.count += 1
        if self.count > MAX_NODES:
            raise YamlError(f"document too large: more than {MAX_NODES} values (after alias expansion)", *_mark(node))
        if depth > MAX_DEPTH:
            raise YamlError(f"document nested too deeply (more than {MAX_DEPTH} levels)", *_mark(node))

    def build(self, node: yaml.Node, path: KeyPath, depth: int) -> object:
        self._bound(node, depth)
        self.positions.values[path] = _mark(node)
        if isinstance(node, yaml.MappingNode) and node.tag == _MAP:
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:
            return [self.build(child, (*path, i), depth + 1) for i, child in enumerate(node.value)]
        if not isinstance(node, yaml.ScalarNode):
            # !!set, !!omap, !!pairs, or a tag that safe_load refuses: PyYAML constructs them
            # exactly as safe_load does, once the bounds have been applied to what it will build
            self._count(node, depth)
        return self.construct(node)

    def _count(self, node: yaml.Node, depth: int) -> None:
        for child in node.value:
            for sub in child if isinstance(child, tuple) else (child,):
                self._bound(sub, depth + 1)
                if isinstance(sub, yaml.MappingNode) and any(k.tag == _MERGE for k, _ in sub.value):
                    _check_merge_size(sub)
                if not isinstance(sub, yaml.ScalarNode):
                    self._count(sub, depth + 1)

    def _mapping(self, node: yaml.MappingNode, path: KeyPath, depth: int) -> dict[Hashable, object]:
        if any(key.tag == _MERGE for key, _ in node.value):
            _check_merge_size(node)
        self.loader.flatten_mapping(node)  # YAML merge keys (<<)
        result: dict[Hashable, object] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):  # safe_load refuses these too
                raise YamlError("unhashable mapping key (a mapping or list used as a key)", *_mark(key_node))
            key = self.construct(key_node)
            self.positions.keys[(*path, key)] = _mark(key_node)
            result[key] = self.build(value_node, (*path, key), depth + 1)
        return result


def _check_merge_size(node: yaml.MappingNode) -> None:
    """Refuse merge keys (``<<: [*a, *a]``, nested) that would expand past ``MAX_NODES``.

    PyYAML flattens merges by copying key/value pairs before any value is built, so doubling
    merges grow exponentially; this counts the pairs first, without copying.
    """
    sizes: dict[int, int] = {}

    def size(mapping: yaml.MappingNode, depth: int) -> int:
        if id(mapping) in sizes:
            return sizes[id(mapping)]
        if depth > MAX_DEPTH:
            raise YamlError(f"merge keys (<<) nested too deeply (more than {MAX_DEPTH} levels)", *_mark(mapping))
        sizes[id(mapping)] = MAX_NODES + 1  # a mapping that merges itself never ends
        total = 0
        for key, value in mapping.value:
            if key.tag != _MERGE:
                total += 1
                continue
            sources = value.value if isinstance(value, yaml.SequenceNode) else [value]
            total += sum(size(src, depth + 1) for src in sources if isinstance(src, yaml.MappingNode))
            if total > MAX_NODES:
                raise YamlError(f"document too large: merge keys (<<) expand to more than {MAX_NODES} values", *_mark(key))
        sizes[id(mapping)] = total
        return total

    size(node, 0)


#: scalar tags whose value the safe constructor always builds when the resolver gave them implicitly
_IMPLICIT = frozenset(f"tag:yaml.org,2002:{name}" for name in ("int", "float", "bool", "null"))
#: a size or height past every bound: a cycle, or a subtree deeper than the bound allows
_PAST = MAX_NODES + MAX_DEPTH + 2


class _Shapes:
    """The expanded size and height of each node of a composed graph, memoised by node: an alias
    is one node shared by every place that names it, so a bomb of 9 aliases on 9 levels (9**9
    values once built) is 81 nodes here.

    ``plain`` marks the subtrees that building cannot fail on but for the bounds: standard
    mappings with scalar keys and no merge keys, standard sequences, strings and implicitly
    resolved numbers, booleans and nulls."""

    def __init__(self, loader: yaml.SafeLoader) -> None:
        self.loader = loader
        self.known: dict[int, tuple[int, int, bool]] = {}

    def of(self, node: yaml.Node, depth: int = 0) -> tuple[int, int, bool]:
        """``(size, height, plain)``: the values ``_Builder.build`` would count below and with
        ``node``, and how many levels it would descend; ``_PAST`` where past every bound."""
        known = self.known.get(id(node))
        if known is not None:
            return known
        if depth > MAX_DEPTH:  # not memoised as a fact of the node: a deep place says nothing else
            return _PAST, _PAST, False
        self.known[id(node)] = (_PAST, _PAST, True)  # a node inside its own value: a cycle, endless
        if isinstance(node, yaml.ScalarNode):
            plain = node.tag == _STR or (
                node.tag in _IMPLICIT and self.loader.resolve(  # type: ignore[no-untyped-call]
                    yaml.ScalarNode, node.value, (True, False)) == node.tag)
            shape = (1, 0, plain)
        elif isinstance(node, yaml.MappingNode) and node.tag == _MAP:
            shape = self._children(
                [value for _, value in node.value], depth,
                all(type(key) is yaml.ScalarNode and key.tag != _MERGE and self.of(key, depth + 1)[2]
                    for key, _ in node.value))
        elif isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:
            shape = self._children(node.value, depth, True)
        else:
            shape = (_PAST, _PAST, False)
        self.known[id(node)] = shape
        return shape

    def _children(self, children: list[yaml.Node], depth: int, plain: bool) -> tuple[int, int, bool]:
        size, height = 1, 0
        for child in children:
            child_size, child_height, child_plain = self.of(child, depth + 1)
            size, height = min(size + child_size, _PAST), max(height, min(child_height + 1, _PAST))
            plain = plain and child_plain
        return size, height, plain


def _refuse_bombs(node: yaml.Node, loader: yaml.SafeLoader) -> None:
    """Refuse, without building it, a plain document (``_Shapes``) that expands past the bounds,
    with the error and the location building it would give: the first value, in the order the
    builder visits them, that is one too many or one level too deep. Subtrees that fit are
    counted whole instead of visited, so the refusal costs the graph's nodes, not its expansion.
    Anything else (a document within the bounds, or one building could fail on otherwise) is left
    to the builder."""
    shapes = _Shapes(loader)
    size, height, plain = shapes.of(node)
    if not plain or (size <= MAX_NODES and height <= MAX_DEPTH):
        return
    count = 0

    def visit(current: yaml.Node, depth: int) -> None:
        nonlocal count
        count += 1
        if count > MAX_NODES:
            raise YamlError(f"document too large: more than {MAX_NODES} values (after alias expansion)", *_mark(current))
        if depth > MAX_DEPTH:
            raise YamlError(f"document nested too deeply (more than {MAX_DEPTH} levels)", *_mark(current))
        if isinstance(current, yaml.ScalarNode):
            return
        for child in (value for _, value in current.value) if isinstance(current, yaml.MappingNode) else current.value:
            child_size, child_height, _ = shapes.of(child, depth + 1)
            if count + child_size <= MAX_NODES and depth + 1 + child_height <= MAX_DEPTH:
                count += child_size
            else:
                visit(child, depth + 1)

    visit(node, 0)


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _loader_for(text: str) -> yaml.SafeLoader:
    """The parser for ``text``: libyaml's when it reads ``text`` exactly as PyYAML's ``safe_load``
    (what Connic uses) does, else PyYAML's own.

    libyaml accepts tabs where PyYAML refuses them (``runs: 5<TAB>``) and a comment glued to a
    block scalar header (``>#``), reads a bare ``!`` tag as ``''`` instead of ``None``, and treats
    stray BOMs and Unicode line breaks differently (found by ``tests/test_loader_fuzz.py``); and its
    composer recurses in C once per nesting level, so a deep enough document crashes the process
    (SIGSEGV) where PyYAML raises ``RecursionError``. Every nesting level needs one of the
    characters counted in ``structure``; 5,000 levels fit in 2 MB of C stack.
    """
    structure = sum(text.count(c) for c in "[{-?:")
    body = text.removeprefix("\ufeff")
    if structure > _C_MAX_STRUCTURE or _C_DIFFERS.search(body):
        return yaml.SafeLoader(text)
    return _Loader(text)


def _reader_error(text: str, exc: yaml.reader.ReaderError) -> YamlError:
    """A character YAML does not allow; located by the character (libyaml reports byte offsets)."""
    index = text.find(chr(exc.character)) if isinstance(exc.character, int) else -1
    index = max(index, 0)
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    what = f"#x{exc.character:04x}" if isinstance(exc.character, int) else repr(exc.character)
    return YamlError(f"invalid YAML: unacceptable character {what}: {exc.reason}", line, column)


def load_with_positions(text: str) -> tuple[object, YamlPositions]:
    """Parse one YAML document safely; ``(None, ...)`` for an empty document."""
    size = len(text) if len(text) > MAX_BYTES else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        raise YamlError(f"file too large: {size} bytes (at most {MAX_BYTES})", 1, 1)
    loader = None
    try:
        loader = _loader_for(text)  # the pure-Python reader checks characters here already
        node = loader.get_single_node()
        if node is None:
            return None, YamlPositions()
        if "*" in text:  # aliases: a graph that may expand far past its text
            _refuse_bombs(node, loader)
        builder = _Builder(loader)
        data = builder.build(node, (), 0)
        return data, builder.positions
    except yaml.reader.ReaderError as exc:
        raise _reader_error(text, exc) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or str(exc)
        if "maximum nesting depth" in problem and mark is not None:  # PyYAML >= 6.0.4 has its own bound
            raise YamlError(
                f"document nested too deeply (more than {MAX_DEPTH} levels)", mark.line + 1, mark.column + 1
            ) from None
        if exc.context:
            problem = f"{problem} ({exc.context})"
        if mark is None:
            raise YamlError(f"invalid YAML: {problem}", 1, 1) from None
        raise YamlError(f"invalid YAML: {problem}", mark.line + 1, mark.column + 1) from None
    except yaml.YAMLError as exc:
        raise YamlError(f"invalid YAML: {exc}", 1, 1) from None
    except RecursionError:  # the pure-Python composer recurses once per level, before the builder's bound
        mark = getattr(loader, "get_mark", lambda: None)()
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        raise YamlError(f"document nested too deeply (more than {MAX_DEPTH} levels)", line, column) from None
    finally:
        if loader is not None:
            loader.dispose()


def format_path(path: KeyPath) -> str:
    """``('tests', 2, 'expected_tool_calls', 0)`` → ``tests[2].expected_tool_calls[0]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<top level>"


#: one parse per file: path -> ((mtime_ns, size), what parsing gave: the result or the exception)
_FILES: dict[str, tuple[tuple[int, int], tuple[object, YamlPositions] | Exception]] = {}
_FILES_LOCK = threading.Lock()


def parse_file(path: Path) -> tuple[object, YamlPositions]:
    """The YAML file at ``path`` (UTF-8, universal newlines, as Connic's ``open()`` reads it) parsed
    with positions, once for as long as its ``(mtime_ns, size)`` stays the same: every reader of a
    project file (the project index, the loader's locators, the agent-key check, the YAML guard,
    suite loading, the SDK's own load) shares one parse, so the data is shared too: read it, never
    change it. Raises what reading and parsing raise, the same each time: ``OSError`` (a FIFO or
    a device is never opened), ``UnicodeDecodeError``, ``YamlError`` (``file too large`` before
    anything is read)."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise OSError(f"{path}: not a regular file")
    key, stamp = os.fspath(path), (info.st_mtime_ns, info.st_size)
    with _FILES_LOCK:
        cached = _FILES.get(key)
    if cached is None or cached[0] != stamp:
        cached = (stamp, _parse(Path(path), info.st_size))
        with _FILES_LOCK:
            _FILES[key] = cached
    result = cached[1]
    if isinstance(result, BaseException):
        raise result.with_traceback(None)
    return result


def _parse(path: Path, size: int) -> tuple[object, YamlPositions] | Exception:
    """``(data, positions)``, or the exception reading or parsing ``path`` raised."""
    try:
        if size > MAX_BYTES:
            raise YamlError(f"file too large: {size} bytes (at most {MAX_BYTES})", 1, 1)
        text = path.read_bytes().decode("utf-8")
        return load_with_positions(text.replace("\r\n", "\n").replace("\r", "\n"))
    except (OSError, ValueError, YamlError) as exc:
        return exc


def forget_files() -> None:
    """Drop every cached parse (the session ends)."""
    with _FILES_LOCK:
        _FILES.clear()
