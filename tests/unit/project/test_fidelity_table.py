"""docs/fidelity.md has a row for every field of the SDK's agent configuration, and no other.

The fields are enumerated from the SDK's pydantic models (``AgentConfig`` through the SDK
boundary, its nested models found from the annotations), so a new SDK release that adds a
setting fails here until someone decides, in the table, what pytest-connic does with it.
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from pytest_connic.project.agentkeys import models_in
from pytest_connic.project.sdk import AgentConfig

FIDELITY = Path(__file__).resolve().parents[3] / "docs" / "fidelity.md"
TABLE_HEADING = "## The table"
#: the first word of the "Today" column
STATUSES = ("honoured (hook)", "honoured", "warned", "refused", "n/a", "**dropped**", "**differs**")
TODO = ("**dropped**", "**differs**")
_FIELD_CELL = re.compile(r"`([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)`")
_BEHAVIOUR_CELL = re.compile(r"runtime: \S")


# -- the SDK's fields ------------------------------------------------------------------------------


def _is_free_dict(annotation: object) -> bool:
    """A dict whose values are not models (a guardrail rule's ``config``, MCP ``headers``)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_is_free_dict(arg) for arg in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _is_free_dict(typing.get_args(annotation)[0])
    return origin is dict and not models_in(annotation)


def sdk_fields(model: type[BaseModel] = AgentConfig, prefix: str = "",
               seen: tuple[type[BaseModel], ...] = ()) -> dict[str, bool]:
    """Every field's dotted path (list items and dict values transparent) -> whether it is a
    free-form dict, whose keys may have rows of their own."""
    fields: dict[str, bool] = {}
    for name, info in model.model_fields.items():
        path = prefix + name
        fields[path] = _is_free_dict(info.annotation)
        for nested in models_in(info.annotation):
            if nested not in seen:  # a model that contains itself would recurse forever
                fields.update(sdk_fields(nested, path + ".", (*seen, nested)))
    return fields


# -- the table -------------------------------------------------------------------------------------


def _cells(line: str) -> list[str]:
    """The cells of a table row; a ``|`` inside backticks (none today) would split wrongly, so
    rows are written without one."""
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def table_rows(text: str) -> list[tuple[int, list[str]]]:
    """(line number, cells) of every body row of the table under ``## The table``."""
    lines = text.splitlines()
    start = lines.index(TABLE_HEADING)
    rows: list[tuple[int, list[str]]] = []
    header_seen = False
    for number, line in enumerate(lines[start + 1:], start + 2):
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            if rows or header_seen:
                break  # the table ended
            continue
        cells = _cells(line)
        if not header_seen:
            header_seen = True
            continue
        if all(set(cell) <= set("-: ") for cell in cells):
            continue  # the separator
        rows.append((number, cells))
    return rows


def documented_fields(rows: list[tuple[int, list[str]]]) -> dict[str, int]:
    """The dotted path of every field row -> its line."""
    found: dict[str, int] = {}
    for number, cells in rows:
        match = _FIELD_CELL.fullmatch(cells[0])
        if match:
            found[match.group(1)] = number
    return found


@pytest.fixture(scope="module")
def rows() -> list[tuple[int, list[str]]]:
    return table_rows(FIDELITY.read_text("utf-8"))


def test_the_walk_reaches_nested_models() -> None:
    fields = sdk_fields()
    for path in ("retry_options.attempts", "session.key", "mcp_servers.oauth.connect_tool",
                 "database.collections.prevent_write", "approval.inputs.sensitive",
                 "voice_config.turn_detection.silence_ms", "guardrails.output.config"):
        assert path in fields
    assert fields["guardrails.input.config"] is True
    assert fields["retry_options"] is False


def test_every_sdk_field_has_a_row(rows: list[tuple[int, list[str]]]) -> None:
    missing = sorted(set(sdk_fields()) - set(documented_fields(rows)))
    assert not missing, (
        f"agent settings of the SDK with no row in docs/fidelity.md: {', '.join(missing)}; "
        "add a row for each: what Connic does, what pytest-connic does (honour it, or refuse or "
        "warn out loud), where, and the decision"
    )


def test_every_field_row_names_an_sdk_field(rows: list[tuple[int, list[str]]]) -> None:
    fields = sdk_fields()
    free = [path for path, is_free in fields.items() if is_free]
    unknown = [
        f"docs/fidelity.md:{line}: {path}"
        for path, line in documented_fields(rows).items()
        if path not in fields and not any(path.startswith(parent + ".") for parent in free)
    ]
    assert not unknown, "rows for fields the SDK does not have:\n" + "\n".join(unknown)


def test_every_row_is_well_formed(rows: list[tuple[int, list[str]]]) -> None:
    problems = []
    seen: dict[str, int] = {}
    for line, cells in rows:
        where = f"docs/fidelity.md:{line}"
        if len(cells) != 5:
            problems.append(f"{where}: {len(cells)} cells, expected 5")
            continue
        first, connic, today = cells[0], cells[1], cells[2]
        if not (_FIELD_CELL.fullmatch(first) or _BEHAVIOUR_CELL.match(first)):
            problems.append(f"{where}: the first cell {first!r} is neither `a.field.path` nor 'runtime: ...'")
        if first in seen:
            problems.append(f"{where}: {first} already has a row (line {seen[first]})")
        seen[first] = line
        if not connic:
            problems.append(f"{where}: what Connic does is empty")
        if not today.startswith(STATUSES):
            problems.append(f"{where}: today's status {today[:30]!r} does not start with one of {STATUSES}")
    assert not problems, "\n".join(problems)


def test_the_index_links_the_table() -> None:
    index = (FIDELITY.parent / "index.md").read_text("utf-8")
    assert "(fidelity.md)" in index


def test_no_setting_is_dropped_silently(rows: list[tuple[int, list[str]]]) -> None:
    todo = [cells[0] for _line, cells in rows if len(cells) > 2 and cells[2].startswith(TODO)]
    assert not todo, f"{len(todo)} settings to honour or refuse out loud: {', '.join(todo)}"
