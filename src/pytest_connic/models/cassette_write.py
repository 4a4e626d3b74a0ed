"""Writing cassettes: their data (turns, calls, sessions, the world), the YAML text a recording
writes, the check that no secret is left in it, and the whole-or-nothing write."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import yaml

from pytest_connic.models.cassette import (
    VERSION,
    Cassette,
    RecordedCall,
    RecordedToolCall,
    SessionStart,
    Turn,
)
from pytest_connic.models.world import world_to_data
from pytest_connic.secrets import Masker
from pytest_connic.yamlpos import KeyPath, format_path


def turn_to_data(turn: Turn) -> dict[str, object]:
    """A turn as the plain data written to a file (keys in the documented order)."""
    out: dict[str, object] = {}
    if turn.tool_calls:
        out["tool_calls"] = [_call_to_data(c) for c in turn.tool_calls]
    if turn.content is not None:
        out["content"] = turn.content
    if turn.input_tokens is not None or turn.output_tokens is not None:
        out["usage"] = {"input_tokens": turn.input_tokens or 0, "output_tokens": turn.output_tokens or 0}
    if turn.cost:
        out["cost"] = turn.cost
    if turn.model:
        out["model"] = turn.model
    if turn.request:
        out["request"] = turn.request
    return out


def _call_to_data(call: RecordedToolCall) -> dict[str, object]:
    out: dict[str, object] = {"name": call.name, "arguments": call.arguments}
    if call.id:
        out["id"] = call.id
    return out


def call_to_data(call: RecordedCall) -> dict[str, object]:
    """A recorded call as the plain data written to a file."""
    out: dict[str, object] = {"kind": call.kind, "name": call.name}
    if call.arguments is not None:
        out["arguments"] = call.arguments
    if call.error is not None:
        out["error"] = call.error
    else:
        out["result"] = call.result
    return out


def session_to_data(start: SessionStart) -> dict[str, object]:
    """A run's ``session`` section as the plain data written to a file."""
    out: dict[str, object] = {"agent": start.agent, "key": start.key}
    if start.cases:
        out["from"] = list(start.cases)
    out["history"] = [dict(m) for m in start.history]
    return out


def cassette_to_data(cassette: Cassette) -> dict[str, object]:
    """The whole cassette as plain data."""
    runs = []
    for run in cassette.runs:
        entry: dict[str, object] = {}
        if run.turns is not None:
            entry["turns"] = [turn_to_data(t) for t in run.turns.turns]
        if run.children:
            entry["children"] = {
                agent: [{"turns": [turn_to_data(t) for t in tape.turns]} for tape in tapes]
                for agent, tapes in run.children.items()
            }
        if run.calls:
            entry["calls"] = [call_to_data(c) for c in run.calls]
        if run.world is not None and world_to_data(run.world):
            entry["world"] = world_to_data(run.world)
        if run.session is not None:
            entry["session"] = session_to_data(run.session)
        runs.append(entry)
    if cassette.match:
        return {"version": VERSION, "match": [dict(r.data) for r in cassette.match], "runs": runs}
    return {"version": VERSION, "runs": runs}


class _Dumper(yaml.SafeDumper):
    """Block style; multi-line strings as literal blocks; lists indented under their key."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)

HEADER = (
    "# pytest-connic cassette (format: docs/models.md). Replayed by default; re-record with\n"
    "# --connic-record-mode=all. Safe to edit by hand.\n"
)


def dump_cassette_data(data: object) -> str:
    """YAML text for cassette data (readable: block style, keys in order)."""
    body = yaml.dump(dict(data) if isinstance(data, Mapping) else data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    return HEADER + body


def secret_field(data: object, masker: Masker, path: KeyPath = ()) -> str | None:
    """The key path (``runs[0].turns[1].content``) of the first value of cassette ``data`` that
    holds a secret in any form (a string containing one, a number or key equal to one), or None."""
    if isinstance(data, str):
        return format_path(path) if masker.find(data) else None
    if isinstance(data, Mapping):
        for key, value in data.items():
            if masker.find(str(key)):
                return format_path(path) + " (a key)" if path else "a top-level key"
            found = secret_field(value, masker, (*path, key))
            if found:
                return found
        return None
    if isinstance(data, list):
        for i, value in enumerate(data):
            found = secret_field(value, masker, (*path, i))
            if found:
                return found
        return None
    if data is not None and not isinstance(data, bool) and str(data) in masker.values:
        return format_path(path)
    return None


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file, so readers never see half a file; the
    file gets the mode the process's umask gives a new file (``mkstemp`` alone gives 0600)."""
    from pytest_connic.files import process_umask

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".yaml", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.chmod(tmp, 0o666 & ~process_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
