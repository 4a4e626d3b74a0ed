"""Cassette files, format version 1: the data and loading it with located errors (where they
live: ``cassette_paths.py``; writing them: ``cassette_write.py``).

A cassette is a list of runs; each run lists the model turns of the case's own
agent (``turns``) and of every other agent it invoked (``children``, per agent
name, one entry per invocation). See docs/models.md for the format.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_connic.models.base import CassetteError
from pytest_connic.models.fingerprint import REQUEST_KEYS, check_section
from pytest_connic.models.matching import MatchRule, MatchRuleError, parse_rule
from pytest_connic.models.world import WORLD_KEYS, World, world_from_data
from pytest_connic.yamlpos import KeyPath, YamlError, YamlPositions, format_path, load_with_positions

VERSION = 1

_RUN_KEYS = ("turns", "children", "calls", "world", "session")
_SESSION_KEYS = ("agent", "key", "from", "history")
_EXTERNAL_KEYS = ("kind", "name", "arguments", "result", "error")
#: what a run's ``calls`` record: answers from outside the model (docs/models.md, "Calls")
CALL_KINDS = {
    "mcp_tools": "the tool list of an MCP server (name: the server)",
    "mcp": "a call of an MCP tool (name: server/tool)",
    "api": "an HTTP call of an api: tool (name: spec.operation)",
    "guardrail": "the judgement of a model-based guardrail (name: its type)",
    "web": "a web tool's result (name: the tool, e.g. web_search)",
}
_TURN_KEYS = ("content", "tool_calls", "usage", "cost", "model", "request")
_CALL_KEYS = ("name", "arguments", "id")
_USAGE_KEYS = ("input_tokens", "output_tokens")
_TOP_KEYS = ("version", "match", "runs")


@dataclass
class RecordedToolCall:
    """A tool call of a cassette turn. ``arguments`` is a string when the model sent malformed JSON."""

    name: str
    arguments: dict[str, object] | str = field(default_factory=dict)
    id: str | None = None


@dataclass
class Turn:
    """One model turn: tool calls, or a final answer, or both."""

    content: str | None = None
    tool_calls: list[RecordedToolCall] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    #: the model that answered, when it was not the agent's model (the fallback)
    model: str | None = None
    #: the digests of the request that produced this turn (recorded cassettes)
    request: dict[str, object] | None = None
    #: the key path of this turn in its file (``runs[0].turns[1]``), for messages
    where: str = ""


@dataclass
class Tape:
    """The turns of one agent invocation."""

    turns: list[Turn] = field(default_factory=list)
    where: str = ""


@dataclass
class RecordedCall:
    """An answer from outside the model (a run's ``calls``): an MCP server's tool list or a tool's
    result, an ``api:`` tool's HTTP response, a hosted guardrail's judgement, a web tool's result.

    ``arguments`` None (left out of a hand-written entry) matches a call with any arguments;
    ``error`` instead of ``result`` replays the call's failure."""

    kind: str
    name: str
    arguments: object = None
    result: object = None
    error: str | None = None
    where: str = ""


@dataclass
class SessionStart:
    """A run's ``session`` section: the session history the run started with (docs/models.md,
    "Sessions"), so that a case of an agent with ``session:`` replays without the cases before it."""

    agent: str | None  #: the agent whose session it is (None: the first that asks)
    key: str | None  #: the session key's value (None: ``session: true``)
    history: list[dict[str, object]] = field(default_factory=list)
    #: the cases whose runs made the history, oldest first
    cases: list[str] = field(default_factory=list)
    where: str = ""


@dataclass
class CassetteRun:
    """One run: the case's own agent (``turns``; None when left out), its children, the
    answers of everything else it called (``calls``), and the session history it started with."""

    turns: Tape | None = None
    children: dict[str, list[Tape]] = field(default_factory=dict)
    calls: list[RecordedCall] = field(default_factory=list)
    #: what the run's user code saw of the world (``world:``; None: not recorded, replay as today)
    world: World | None = None
    session: SessionStart | None = None


@dataclass
class Cassette:
    """A whole cassette file."""

    runs: list[CassetteRun] = field(default_factory=list)
    path: Path | None = None
    #: the cassette's matching rules (``match:``, docs/models.md "Matching rules")
    match: list[MatchRule] = field(default_factory=list)


def turns_of(cassette: Cassette) -> list[Turn]:
    """Every turn of a cassette: each run's own, then its children's."""
    out: list[Turn] = []
    for run in cassette.runs:
        if run.turns is not None:
            out += run.turns.turns
        for tapes in run.children.values():
            for tape in tapes:
                out += tape.turns
    return out


def undigested_note(cassette: Cassette, path: Path | str) -> str | None:
    """The once-per-cassette notice for turns without a ``request`` (a hand-written cassette):
    replay cannot notice that a prompt or a tool changed since they were written. None when every
    turn has its digests."""
    turns = turns_of(cassette)
    missing = sum(1 for turn in turns if turn.request is None)
    if not missing:
        return None
    which = "its turns carry" if missing == len(turns) else f"{missing} of its {len(turns)} turns carry"
    return (f"{path}: {which} no `request` digests (a hand-written cassette), so replay cannot notice a "
            "changed prompt, message or tool; `pytest --connic-record-mode=digests` adds them from a "
            "replay without changing the turns (docs/models.md, \"What a recorded request keeps\")")


# -- loading -----------------------------------------------------------------


class _Checker:
    """Validates the loaded data and turns it into a ``Cassette``; errors carry ``path:line:col``."""

    def __init__(self, path: Path | str, positions: YamlPositions) -> None:
        self.path = path
        self.shown = str(path)
        self.positions = positions

    def fail(self, key_path: KeyPath, message: str, *, key: bool = False) -> CassetteError:
        line, column = self.positions.of(key_path, key=key)
        return CassetteError(f"{self.path}:{line}:{column}: {format_path(key_path)}: {message}")

    def mapping(self, value: object, kp: KeyPath, known: tuple[str, ...]) -> dict[str, object]:
        if not isinstance(value, Mapping):
            raise self.fail(kp, f"expected a mapping with {', '.join(known)}, found {_kind(value)}")
        for name in value:
            if isinstance(name, str) and name.startswith("x-"):
                continue
            if name not in known:
                close = difflib.get_close_matches(str(name), known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
                raise self.fail((*kp, name), f"unknown key {name!r}{hint}", key=True)
        return dict(value)

    def sequence(self, value: object, kp: KeyPath, what: str) -> list[object]:
        if not isinstance(value, list):
            raise self.fail(kp, f"expected a list of {what}, found {_kind(value)}")
        return value

    def cassette(self, data: object) -> Cassette:
        top = self.mapping(data, (), _TOP_KEYS)
        version = top.get("version", VERSION)
        if version != VERSION:
            raise self.fail(("version",), f"unsupported cassette version {version!r} (this version reads 1)")
        if "runs" not in top:
            raise self.fail((), "missing key 'runs' (a list of runs, each with 'turns')")
        runs = self.sequence(top["runs"], ("runs",), "runs")
        if not runs:
            raise self.fail(("runs",), "expected at least one run")
        return Cassette(runs=[self.run(r, ("runs", i)) for i, r in enumerate(runs)], match=self.rules(top))

    def rules(self, top: Mapping[str, object]) -> list[MatchRule]:
        """The ``match:`` block: each rule checked (a bad regular expression or path is located)."""
        entries = self.sequence(top.get("match") or [], ("match",), "matching rules")
        rules = []
        for i, entry in enumerate(entries):
            try:
                rule = parse_rule(entry, format_path(("match", i)))
                line, column = self.positions.of(("match", i))
                rules.append(dataclasses.replace(rule, origin=f"{self.shown}:{line}:{column}: {rule.origin}"))
            except MatchRuleError as exc:
                key = str(exc).split(":", 1)[0].rsplit(".", 1)[-1]
                kp = ("match", i, key) if isinstance(entry, Mapping) and key in entry else ("match", i)
                raise self.fail(kp, str(exc).split(": ", 1)[1]) from None
        return rules

    def run(self, value: object, kp: KeyPath) -> CassetteRun:
        raw = self.mapping({} if value is None else value, kp, _RUN_KEYS)
        run = CassetteRun()
        if raw.get("turns") is not None:
            run.turns = self.tape(raw["turns"], (*kp, "turns"))
        children = raw.get("children") or {}
        if not isinstance(children, Mapping):
            raise self.fail((*kp, "children"), f"expected a mapping of agent names, found {_kind(children)}")
        for agent, entries in children.items():
            ckp = (*kp, "children", agent)
            items = self.sequence(entries, ckp, "invocations (each with 'turns')")
            run.children[str(agent)] = [self.invocation(e, (*ckp, i)) for i, e in enumerate(items)]
        calls = self.sequence(raw.get("calls") or [], (*kp, "calls"), "calls (each with 'kind' and 'name')")
        run.calls = [self.external(c, (*kp, "calls", i)) for i, c in enumerate(calls)]
        if raw.get("world") is not None:
            wkp = (*kp, "world")
            section = self.mapping(raw["world"], wkp, WORLD_KEYS)
            run.world = world_from_data(section, lambda key, msg: self.fail((*wkp, key) if key else wkp, msg))
        if raw.get("session") is not None:
            run.session = self.session(raw["session"], (*kp, "session"))
        return run

    def session(self, value: object, kp: KeyPath) -> SessionStart:
        raw = self.mapping(value, kp, _SESSION_KEYS)
        history = self.sequence(raw.get("history") or [], (*kp, "history"), "messages (each with 'role')")
        messages: list[dict[str, object]] = []
        for i, message in enumerate(history):
            if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
                raise self.fail((*kp, "history", i), f"expected a message with a 'role', found {_kind(message)}")
            messages.append(dict(message))
        cases = self.sequence(raw.get("from") or [], (*kp, "from"), "case names")
        key = raw.get("key")
        return SessionStart(self.text(raw.get("agent"), (*kp, "agent")),
                            None if key is None else key if isinstance(key, str) else json.dumps(key),
                            messages, [str(c) for c in cases], format_path(kp))

    def external(self, value: object, kp: KeyPath) -> RecordedCall:
        raw = self.mapping(value, kp, _EXTERNAL_KEYS)
        kind = raw.get("kind")
        if kind not in CALL_KINDS:
            known = ", ".join(CALL_KINDS)
            close = difflib.get_close_matches(str(kind), list(CALL_KINDS), n=1) if isinstance(kind, str) else []
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise self.fail((*kp, "kind"), f"expected one of {known}, found {kind!r}{hint}")
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise self.fail((*kp, "name"), f"expected what was called (a name), found {_kind(name)}")
        if "result" in raw and raw.get("error") is not None:
            raise self.fail((*kp, "error"), "a call has 'result' or 'error', not both")
        error = self.text(raw.get("error"), (*kp, "error"))
        return RecordedCall(kind, name, raw.get("arguments"), raw.get("result"), error, format_path(kp))

    def invocation(self, value: object, kp: KeyPath) -> Tape:
        raw = self.mapping(value, kp, ("turns",))
        return self.tape(raw.get("turns") or [], (*kp, "turns"))

    def tape(self, value: object, kp: KeyPath) -> Tape:
        items = self.sequence(value, kp, "turns")
        return Tape([self.turn(t, (*kp, i)) for i, t in enumerate(items)], format_path(kp))

    def turn(self, value: object, kp: KeyPath) -> Turn:
        raw = self.mapping(value, kp, _TURN_KEYS)
        turn = Turn(where=format_path(kp))
        if raw.get("content") is not None:
            content = raw["content"]
            # a hand-written mapping or list is sent as the JSON the model would have written
            turn.content = content if isinstance(content, str) else json.dumps(content)
        calls = self.sequence(raw.get("tool_calls") or [], (*kp, "tool_calls"), "tool calls")
        turn.tool_calls = [self.tool_call(c, (*kp, "tool_calls", i)) for i, c in enumerate(calls)]
        if turn.content is None and not turn.tool_calls:
            raise self.fail(kp, "a turn needs 'content' (the answer) or 'tool_calls'")
        self.usage(raw.get("usage"), (*kp, "usage"), turn)
        turn.cost = self.number(raw.get("cost"), (*kp, "cost"))
        turn.model = self.text(raw.get("model"), (*kp, "model"))
        if raw.get("request") is not None:
            rkp = (*kp, "request")
            turn.request = self.mapping(raw["request"], rkp, REQUEST_KEYS)
            check_section(turn.request, lambda key, msg: self.fail((*rkp, key), msg))
        return turn

    def tool_call(self, value: object, kp: KeyPath) -> RecordedToolCall:
        raw = self.mapping(value, kp, _CALL_KEYS)
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise self.fail((*kp, "name"), f"expected a tool name, found {_kind(name)}")
        arguments = raw.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, (Mapping, str)):
            raise self.fail((*kp, "arguments"), f"expected a mapping of arguments, found {_kind(arguments)}")
        call_id = self.text(raw.get("id"), (*kp, "id"))
        return RecordedToolCall(
            name, dict(arguments) if isinstance(arguments, Mapping) else arguments, call_id
        )

    def usage(self, value: object, kp: KeyPath, turn: Turn) -> None:
        if value is None:
            return
        raw = self.mapping(value, kp, _USAGE_KEYS)
        for name in _USAGE_KEYS:
            count = raw.get(name)
            if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 0):
                raise self.fail((*kp, name), f"expected a token count (an integer >= 0), found {count!r}")
            setattr(turn, name, count)

    def number(self, value: object, kp: KeyPath) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise self.fail(kp, f"expected a number >= 0, found {value!r}")
        return float(value)

    def text(self, value: object, kp: KeyPath) -> str | None:
        if value is None or isinstance(value, str):
            return value
        raise self.fail(kp, f"expected a string, found {_kind(value)}")




def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def parse_cassette(text: str, path: Path | str = "<cassette>", *, shown: str | None = None) -> Cassette:
    """Validate cassette YAML text; errors are ``CassetteError("path:line:col: key.path: ...")``;
    ``shown``: the path as the matching rules' origins name it (relative to the project)."""
    try:
        data, positions = load_with_positions(text)
    except YamlError as exc:
        where = f"{path}:{exc.line}:{exc.column}" if exc.line else str(path)
        raise CassetteError(f"{where}: {exc.message}") from None
    if data is None:
        raise CassetteError(f"{path}:1:1: the cassette is empty; it needs 'version: 1' and 'runs'")
    checker = _Checker(path, positions)
    checker.shown = shown or str(path)
    cassette = checker.cassette(data)
    cassette.path = Path(path)
    return cassette


#: the largest cassette read (ini ``connic_cassette_size_limit``): a cassette is hand-edited
#: YAML, a few KiB; anything near this is a mistake (a log, a link to ``/dev/zero``)
DEFAULT_SIZE_LIMIT = 10 * 1024 * 1024


def load_cassette(path: Path, *, root: Path | None = None, size_limit: int = DEFAULT_SIZE_LIMIT) -> Cassette:
    """Read and validate the cassette at ``path`` (``FileNotFoundError`` when there is none).

    Only a regular file of at most ``size_limit`` bytes is read; a symbolic link must lead to
    one inside ``root`` (the project), a dangling link, a named pipe, a device, a directory
    are refused with a ``CassetteError`` that says which (none of them is ever opened).
    Messages name the cassette relative to ``root`` when it is inside it."""
    try:
        data = read_regular_file(path, root=root, size_limit=size_limit, what="cassette",
                                 setting="connic_cassette_size_limit", error=CassetteError)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CassetteError(f"{path}: not UTF-8 text ({exc.reason})") from None
        return parse_cassette(text, path, shown=relative_path(path, root))
    except CassetteError as exc:
        message = str(exc)
        shown = relative_path(path, root)
        if shown is None or not message.startswith(str(path)):
            raise
        raise CassetteError(shown + message[len(str(path)):]) from None


def relative_path(path: Path, root: Path | None) -> str | None:
    """``path`` relative to ``root`` (posix separators), None when it is not inside it."""
    if root is None:
        return None
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        return None


def read_regular_file(path: Path, *, root: Path | None, size_limit: int, what: str, setting: str,
                      error: type[Exception]) -> bytes:
    """The bytes of the regular file at ``path``, checked before it is opened (see
    :func:`load_cassette`); ``FileNotFoundError`` when nothing is there."""
    info = os.lstat(path)  # FileNotFoundError: no file (and no link) at all
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(path)
        try:
            info = os.stat(path)
        except FileNotFoundError:
            raise error(f"{path}: the {what} is a dangling symbolic link (to {target}, which does not "
                        "exist)") from None
        except OSError as exc:
            raise error(f"{path}: the {what} is a symbolic link (to {target}) that cannot be followed: "
                        f"{exc.strerror}") from None
    if root is not None:
        real, project = os.path.realpath(path), os.path.realpath(root)
        if os.path.commonpath([project, real]) != project:
            raise error(f"{path}: the {what} leads out of the project (to {real}); a {what} must be a file "
                        f"inside {project}")
    _check_kind(path, info, what, error)
    if info.st_size > size_limit:
        raise error(f"{path}: the {what} is {info.st_size} bytes, more than the limit of {size_limit} "
                    f"bytes (ini {setting})")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        _check_kind(path, os.fstat(fd), what, error)  # what was opened is what was checked
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, size_limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > size_limit:
                raise error(f"{path}: the {what} is more than the limit of {size_limit} bytes (ini {setting})")
    finally:
        os.close(fd)
    return b"".join(chunks)


def _check_kind(path: Path, info: os.stat_result, what: str, error: type[Exception]) -> None:
    mode = info.st_mode
    if stat.S_ISREG(mode):
        return
    if stat.S_ISFIFO(mode):
        kind = "a named pipe (FIFO)"
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "a device"
    elif stat.S_ISDIR(mode):
        kind = "a directory"
    elif stat.S_ISSOCK(mode):
        kind = "a socket"
    else:
        kind = "not a regular file"
    raise error(f"{path}: the {what} is {kind}; only a regular file is read")
