"""Safe YAML loading that remembers where every value came from.

``load_with_positions`` returns the same data ``yaml.safe_load`` would, plus a
map from key paths (tuples of keys and indexes) to ``(line, column)``, both
1-based, so that validation errors can say ``tests/x.yaml:14:5``.

Bounded: alias expansion, nesting depth and document size are limited, so an
alias bomb or a pathological document is refused quickly with a clear error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

MAX_NODES = 200_000
MAX_DEPTH = 64
MAX_BYTES = 10 * 1024 * 1024

Path = tuple[Any, ...]


class YamlError(Exception):
    """The document cannot be loaded. ``line``/``column`` are 1-based when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


@dataclass
class Positions:
    """Where each key path starts: the value's position, and the key's for mapping entries."""

    values: dict[Path, tuple[int, int]] = field(default_factory=dict)
    keys: dict[Path, tuple[int, int]] = field(default_factory=dict)

    def of(self, path: Path, *, key: bool = False) -> tuple[int, int]:
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
        self.positions = Positions()
        self.count = 0

    def build(self, node: yaml.Node, path: Path, depth: int) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise YamlError(
                f"document too large: more than {MAX_NODES} values (after alias expansion)",
                node.start_mark.line + 1,
                node.start_mark.column + 1,
            )
        if depth > MAX_DEPTH:
            raise YamlError(
                f"document nested too deeply (more than {MAX_DEPTH} levels)",
                node.start_mark.line + 1,
                node.start_mark.column + 1,
            )
        self.positions.values[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(child, (*path, i), depth + 1) for i, child in enumerate(node.value)]
        return self.loader.construct_object(node, deep=True)

    def _mapping(self, node: yaml.MappingNode, path: Path, depth: int) -> dict[Any, Any]:
        self.loader.flatten_mapping(node)  # YAML merge keys (<<)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.loader.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise YamlError(
                    "unhashable mapping key", key_node.start_mark.line + 1, key_node.start_mark.column + 1
                ) from None
            self.positions.keys[(*path, key)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            result[key] = self.build(value_node, (*path, key), depth + 1)
        return result


def load_with_positions(text: str) -> tuple[Any, Positions]:
    """Parse one YAML document safely; ``(None, ...)`` for an empty document."""
    if len(text) > MAX_BYTES:
        raise YamlError(f"file too large: {len(text)} bytes (at most {MAX_BYTES})")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, Positions()
        builder = _Builder(loader)
        data = builder.build(node, (), 0)
        return data, builder.positions
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or str(exc)
        if exc.context:
            problem = f"{problem} ({exc.context})"
        if mark is None:
            raise YamlError(f"invalid YAML: {problem}") from None
        raise YamlError(f"invalid YAML: {problem}", mark.line + 1, mark.column + 1) from None
    except yaml.YAMLError as exc:
        raise YamlError(f"invalid YAML: {exc}") from None
    except RecursionError:
        raise YamlError(f"document nested too deeply (more than {MAX_DEPTH} levels)") from None
    finally:
        loader.dispose()


def format_path(path: Path) -> str:
    """``('tests', 2, 'expected_tool_calls', 0)`` → ``tests[2].expected_tool_calls[0]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<top level>"
