"""Cassette files, format version 1: load, validate, save, and where they live.

A cassette is a list of runs; each run lists the model turns of the case's own
agent (``turns``) and of every other agent it invoked (``children``, per agent
name, one entry per invocation). See docs/models.md for the format.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import json
import os
import re
import stat
import tempfile
import time
import unicodedata
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pytest_connic.models.base import CassetteError
from pytest_connic.models.fingerprint import REQUEST_KEYS, check_section
from pytest_connic.models.matching import MatchRule, MatchRuleError, parse_rule
from pytest_connic.models.world import WORLD_KEYS, World, world_from_data, world_to_data
from pytest_connic.secrets import Masker
from pytest_connic.yamlpos import KeyPath, YamlError, YamlPositions, format_path, load_with_positions

VERSION = 1
#: a file name longer than this (UTF-8 bytes, without ``.yaml``) is cut and gets a hash suffix
MAX_NAME_BYTES = 120

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
#: names Windows refuses as files (cassettes are committed and checked out everywhere)
_WINDOWS_RESERVED = {
    "CON",
    "PRN",
    "AUX",
    "NUL",
    *(f"COM{i}" for i in range(10)),
    *(f"LPT{i}" for i in range(10)),
}
_UNSAFE = re.compile(r'[\x00-\x1f\x7f/\\<>:"|?*]')
_HEX_PAIR = re.compile(r"[0-9A-Fa-f]{2}")


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


# -- where cassettes live ----------------------------------------------------


def legacy_safe_name(name: str) -> str:
    """The file name older versions gave a case (``/``, ``:``, ``?``, ... all became ``_``, so
    distinct names could share a file); kept to find cassettes written under it."""
    safe = _UNSAFE.sub("_", name).replace("..", "_")
    safe = re.sub(r"^\.", "_", safe)
    safe = re.sub(r"[. ]$", "_", safe) or "_"
    if safe.split(".")[0].upper() in _WINDOWS_RESERVED:
        safe = "_" + safe
    return _cut(safe, name)


def _cut(safe: str, name: str) -> str:
    if len(safe.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        suffix = "-" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        budget = MAX_NAME_BYTES - len(suffix)
        safe = safe.encode("utf-8", "surrogateescape")[:budget].decode("utf-8", "ignore") + suffix
    return safe


def _escape(char: str) -> str:
    return "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogateescape"))


def safe_name(name: str, *, escape_case: bool = False) -> str:
    """``name`` as one portable file name, by a reversible rule (docs/models.md, "Where
    cassettes live"): the characters no file system takes in a name (``/ \\ < > : " | ? *``,
    control characters) are percent-encoded (``a/b`` -> ``a%2Fb``), and so are a ``%`` that
    would read as an escape (followed by two hex digits), a leading dot, a trailing dot or
    space, the first letter of a Windows device name (``CON`` -> ``%43ON``), and every
    non-ASCII character of a name that is not in Unicode NFC (macOS would store it as its NFC
    or NFD twin); every other name is its own file name. ``escape_case``: capital letters (any
    character ``casefold`` changes) are encoded too (for names that differ only in case, which
    would share a file on macOS and Windows).
    A name longer than ``MAX_NAME_BYTES`` is cut and ends in a hash of the full name.
    :func:`name_of_file` reverses the rule (for names that were not cut)."""
    if not name:
        return "%00"  # only the connic fixture can have an empty name; the suite schema needs one
    out = []
    last = len(name) - 1
    # a name that is not NFC would share a file with its NFC twin on macOS: its non-ASCII is encoded
    unnormal = not unicodedata.is_normalized("NFC", name)
    for i, char in enumerate(name):
        if (
            _UNSAFE.match(char)
            or (char == "%" and _HEX_PAIR.fullmatch(name[i + 1 : i + 3]))
            or (i == 0 and char == ".")
            or (i == last and char in ". ")
            or (escape_case and char.casefold() != char)
            or (unnormal and not char.isascii())
        ):
            out.append(_escape(char))
        else:
            out.append(char)
    if name.split(".")[0].upper() in _WINDOWS_RESERVED and not out[0].startswith("%"):
        out[0] = _escape(out[0])
    return _cut("".join(out), name)


def name_of_file(stem: str) -> str:
    """The case name a cassette file name (without ``.yaml``) stands for: the inverse of
    :func:`safe_name` (a name that was cut gives back its cut form)."""
    return urllib.parse.unquote(stem, errors="strict") if "%" in stem else stem


def cassette_path(cassette_dir: Path, suite_rel: str, case_name: str, *, siblings: Iterable[str] = (),
                  suites_root: Path | None = None) -> Path:
    """``<cassette_dir>/<suite path under tests/, without .yaml>/<safe case name>.yaml``.

    ``suite_rel`` is the suite's path from the project root (``tests/sub/math.yaml``, as in
    node ids); a leading ``tests/`` is dropped. ``siblings``: the names of the other cases
    of the suite (a name that differs from one of them only in case has its capitals
    encoded); ``suites_root``: the project root, whose folders say which suites' folder names
    differ only in case (:func:`suite_folder`). The result always lies inside ``cassette_dir``.
    """
    parts = [p for p in re.split(r"[/\\]+", suite_rel) if p not in ("", ".")]
    folder = suite_folder(parts, suites_root)
    base = Path(os.path.abspath(cassette_dir))
    escape_case = any(s != case_name and _fold(s) == _fold(case_name) for s in siblings)
    path = base.joinpath(*folder, safe_name(case_name, escape_case=escape_case) + ".yaml")
    if os.path.commonpath([base, os.path.abspath(path)]) != str(base):
        raise CassetteError(f"cassette path for case {case_name!r} would leave {base}")
    return path


@functools.lru_cache(maxsize=4096)
def _fold(name: str) -> str:
    """What a case-insensitive, normalising file system compares (macOS, Windows)."""
    return unicodedata.normalize("NFC", name).casefold()


_SUITE_SUFFIX = re.compile(r"\.ya?ml$", re.IGNORECASE)


def _folder_key(entry: str, *, is_dir: bool) -> str | None:
    """What a project entry stands for in the cassette folder: a folder's name, a suite's name
    without a lower-case ``.yaml``/``.yml``, a suite with another case of the suffix whole (None:
    neither a folder nor a suite)."""
    if is_dir:
        return entry
    if entry.endswith((".yaml", ".yml")):
        return entry.rsplit(".", 1)[0]
    return entry if _SUITE_SUFFIX.search(entry) else None


def _collides(key: str, parent: Path | None) -> bool:
    """Whether another entry of ``parent`` stands for a name that differs from ``key`` only in
    case or Unicode normalisation (they would share a folder on macOS and Windows)."""
    if parent is None:
        return False
    try:
        seen = os.stat(parent)
    except OSError:
        return False
    # a folder changed within the last ticks of a coarse file-system clock can change again with the
    # same modification time: it is read afresh, and kept only once its state is settled
    recent = time.time_ns() - seen.st_mtime_ns < _SETTLED_NS
    read = _keys_by_fold.__wrapped__ if recent else _keys_by_fold
    keys = read(str(parent), seen.st_ino, seen.st_mtime_ns, seen.st_size).get(_fold(key), ())
    return any(k != key for k in keys)


#: how long ago a folder must have changed for its state to be kept: the modification time of a
#: file system ticks coarsely (a few milliseconds on Linux, 2 s on FAT)
_SETTLED_NS = 2_000_000_000


@functools.lru_cache(maxsize=256)
def _keys_by_fold(parent: str, inode: int, mtime_ns: int, size: int) -> dict[str, tuple[str, ...]]:
    """The folder keys of ``parent``'s entries, by their folded form: read once per state of the
    folder (its inode, modification time and size, the arguments), not once per case (every
    case's cassette path asks about its suite's folder; with 1,000 suites in ``tests/`` that was
    1,000 entries read per case)."""
    by_fold: dict[str, list[str]] = {}
    try:
        with os.scandir(parent) as entries:
            for entry in entries:
                key = _folder_key(entry.name, is_dir=entry.is_dir())
                if key is not None:
                    by_fold.setdefault(_fold(key), []).append(key)
    except OSError:
        return {}
    return {fold: tuple(keys) for fold, keys in by_fold.items()}


def suite_folder(parts: list[str], root: Path | None = None) -> list[str]:
    """The cassette folder of the suite at ``parts`` (its path from the project root; a leading
    ``tests`` is dropped): each part by :func:`safe_name`'s rule, the suite file without ``.yaml``.
    A part that differs only in case or normalisation from another entry of its folder under
    ``root`` (when given) has its capitals encoded, and a suite whose suffix is not lower case
    (``calc.YAML``) keeps it with its dot encoded (``calc%2EYAML``: not ``calc.yaml``'s folder nor
    ``calc.YAML.yaml``'s). So no two suites share a folder on any file system, and every part
    that needed no escaping keeps its name."""
    folder = []
    for i, part in enumerate(parts):
        if i == 0 and part == "tests":
            continue
        last = i == len(parts) - 1
        key = _folder_key(part, is_dir=not last) or part
        parent = root.joinpath(*parts[:i]) if root is not None else None
        name = safe_name(key, escape_case=_collides(key, parent))
        if last and key == part and _SUITE_SUFFIX.search(part):
            head, _, suffix = name.rpartition(".")
            name = f"{head}%2E{suffix}"
        folder.append(name)
    return folder


def legacy_cassette_path(path: Path) -> Path | None:
    """Where an older version kept the cassette now at ``path`` (None when it is the same file,
    or when the name was cut and cannot be read back)."""
    stem = path.name.removesuffix(".yaml")
    try:
        name = name_of_file(stem)
    except UnicodeDecodeError:
        return None
    if not name or stem not in (safe_name(name), safe_name(name, escape_case=True)):
        return None  # not a name safe_name gives (a cut name, a hand-made file)
    old = legacy_safe_name(name)
    return None if old == stem else path.with_name(old + ".yaml")


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


# -- saving ------------------------------------------------------------------


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
