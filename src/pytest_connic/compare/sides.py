"""The two things compared ("sides"): a session of the history or a ``--connic-json`` report,
each read into the same shape, :class:`Side`."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_connic.errors import ConnicError
from pytest_connic.files import IrregularFileError, read_bounded
from pytest_connic.history.behaviour import case_behaviour, parse_behaviour
from pytest_connic.history.store import CaseRow, HistoryError, HistoryStore, StoredSession
from pytest_connic.jsonsafe import JsonBoundsError, load_bounded


class CompareError(ConnicError):
    """A side cannot be found or read; the message says which and why."""


@dataclass(frozen=True)
class CaseSide:
    """One case as one side saw it."""

    nodeid: str
    name: str  #: ``agent::case name`` (the node id when unknown)
    verdict: str
    successes: int
    executed: int
    pass_rate: float | None
    interval: tuple[float, float] | None
    input_tokens: int
    output_tokens: int
    cost: float
    latency_ms: float | None
    behaviour: dict[str, object] | None  #: ``history/behaviour.py``; None: not kept (an older history)
    config_parts: str | None = None
    cassette_digest: str | None = None


@dataclass
class Side:
    label: str  #: ``session 12 of 2026-12-02T10:00:00+00:00 at commit 4f2a9c1e0b7d``, ``report main.json``
    cases: dict[str, CaseSide] = field(default_factory=dict)
    #: what reading it skipped (damaged rows of the history), one warning each
    notes: list[str] = field(default_factory=list)


def case_from_row(row: CaseRow) -> CaseSide:
    behaviour = parse_behaviour(row.behaviour)
    name = f"{behaviour['agent']}::{behaviour['name']}" if behaviour and behaviour.get("agent") else row.nodeid
    interval = (row.rate_low, row.rate_high) if row.rate_low is not None and row.rate_high is not None else None
    return CaseSide(row.nodeid, name, row.verdict, row.successes, row.executed, row.pass_rate, interval,
                    row.input_tokens, row.output_tokens, row.cost, row.latency_ms, behaviour,
                    row.config_parts, row.cassette_digest)


def session_label(stored: StoredSession) -> str:
    s = stored.session
    return f"session {s.id} of {s.started}" + (f" at commit {s.git_commit[:12]}" if s.git_commit else "")


def from_session(stored: StoredSession) -> Side:
    return Side(session_label(stored), {nodeid: case_from_row(row) for nodeid, row in stored.cases.items()})


def from_rows(label: str, rows: Mapping[str, CaseRow]) -> Side:
    """The current session (not stored yet) as a side."""
    return Side(label, {nodeid: case_from_row(row) for nodeid, row in rows.items()})


def _number(value: object, default: float = 0.0) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def case_from_report(entry: Mapping[str, object]) -> CaseSide:
    """One case of a ``--connic-json`` report."""
    nodeid = str(entry.get("nodeid") or f"{entry.get('agent_name')}::{entry.get('test_name')}")
    detail = entry.get("runs_detail")
    runs: list[Mapping[str, object]] = [r for r in detail if isinstance(r, Mapping)] if isinstance(detail, list) else []
    behaviour = case_behaviour(agent=str(entry.get("agent_name") or ""), name=str(entry.get("test_name") or ""),
                               suite=str(entry.get("suite") or ""), line=int(_number(entry.get("line"))), runs=runs)
    wilson = entry.get("wilson_95")
    interval = (float(wilson[0]), float(wilson[1])) if isinstance(wilson, list) and len(wilson) == 2 else None
    found = entry.get("tokens")
    tokens: Mapping[str, object] = found if isinstance(found, Mapping) else {}
    executed = entry.get("agent_run_ids")
    rate = entry.get("pass_rate")
    latency = entry.get("median_latency_ms")
    return CaseSide(
        nodeid, f"{entry.get('agent_name')}::{entry.get('test_name')}",
        str(entry.get("status") or ("passed" if entry.get("passed") else "failed")),
        int(_number(entry.get("successes"))), len(executed) if isinstance(executed, list) else 0,
        float(rate) if isinstance(rate, (int, float)) else None, interval,
        int(_number(tokens.get("input"))), int(_number(tokens.get("output"))), _number(entry.get("cost")),
        float(latency) if isinstance(latency, (int, float)) else None, behaviour)


#: the largest report file compared, and the deepest nesting read (a real report is far below both)
MAX_REPORT_BYTES = 256 << 20
MAX_REPORT_DEPTH = 200


def read_report(path: Path) -> dict[str, object]:
    """A ``--connic-json`` report file's data: a regular file of at most ``MAX_REPORT_BYTES``,
    JSON nested at most ``MAX_REPORT_DEPTH`` deep, an object with a ``cases`` list."""
    try:
        data = load_bounded(read_bounded(path, "report", MAX_REPORT_BYTES), max_depth=MAX_REPORT_DEPTH)
    except IrregularFileError as exc:
        raise CompareError(str(exc)) from None
    except OSError as exc:
        raise CompareError(f"{path}: cannot read the report: {exc.strerror or exc}") from None
    except JsonBoundsError as exc:
        raise CompareError(f"{path}: not a --connic-json report: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise CompareError(f"{path}: not a --connic-json report: no 'cases' list")
    return data


def from_report(path: Path) -> Side:
    """A ``--connic-json`` report file."""
    entries = read_report(path)["cases"]
    assert isinstance(entries, list)  # read_report checked it
    cases = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue
        try:
            cases.append(case_from_report(entry))
        except (TypeError, ValueError, OverflowError) as exc:
            raise CompareError(f"{path}: cases[{index}]: not a case of a --connic-json report "
                               f"({type(exc).__name__}: {exc})") from None
    return Side(f"report {path}", {c.nodeid: c for c in cases})


_SESSION_REF = re.compile(r"last|-\d+|\d+")
#: the largest session number SQLite can hold (a signed 64-bit integer)
MAX_SESSION = 2**63 - 1


def resolve(ref: str, history: Path | None, root: Path, *, git_root: Path | None = None) -> Side:
    """The side ``ref`` names: a report file (relative to ``root``), or a session of ``history``:
    ``last``, ``-N`` (the N-th last), a session number, or a git commit or branch that git
    resolves in ``git_root`` (default ``root``): its last session."""
    path = root / ref if not Path(ref).is_absolute() else Path(ref)
    if path.exists() and not path.is_dir() and not (path.is_file() and _is_history(path)):  # a FIFO: refused
        side = from_report(path)
        side.label = f"report {ref}"  # as the user named it
        return side
    if ref.endswith(".json"):
        raise CompareError(f"{ref}: no such report file (in {root})")
    if history is None:
        raise CompareError(f"{ref!r}: no history file to find that session in (name one: --history PATH, in "
                           "pytest --connic-history PATH; or name a --connic-json report file)")
    store = HistoryStore(history)
    try:
        side = _from_history(ref, store, git_root or root)
    except HistoryError as exc:
        raise CompareError(str(exc)) from None
    skipped = store.skipped_text()
    if skipped is not None:
        side.notes.append(skipped)
    return side


def _from_history(ref: str, store: HistoryStore, root: Path) -> Side:
    if not store.path.exists():
        raise CompareError(f"{ref!r}: the history {store.path} does not exist (no session was kept there)")
    if _SESSION_REF.fullmatch(ref):
        return _numbered(ref, store)
    commit = git_commit(root, ref)
    if commit is None:
        raise CompareError(f"{ref!r}: neither a report file, a session (last, -N, a number) nor a git commit "
                           f"or branch that git resolves in {root}")
    found = store.sessions(limit=1, commit=commit)
    if not found:
        raise CompareError(f"{ref!r}: no session at commit {commit[:12]} in the history {store.path}")
    return from_session(found[-1])


def _numbered(ref: str, store: HistoryStore) -> Side:
    """``last``, ``-N`` or a session number: that one session read, checked against SQLite's
    range before it reaches SQL (out of range is no such session)."""
    number = 1 if ref == "last" else int(ref.lstrip("-")) if len(ref.lstrip("-")) <= 19 else MAX_SESSION + 1
    if ref == "last" or ref.startswith("-"):
        found = store.sessions(limit=1, offset=number - 1) if 1 <= number <= MAX_SESSION else []
        if not found:
            raise CompareError(f"{ref!r}: no such session: the history {store.path} holds {store.count()} session(s)")
        return from_session(found[0])
    found = store.sessions(session_id=number, limit=1) if 1 <= number <= MAX_SESSION else []
    if not found:
        raise CompareError(f"{ref!r}: no session {ref} in the history {store.path}")
    return from_session(found[-1])


def git_commit(root: Path, ref: str) -> str | None:
    """The commit git resolves ``ref`` to in ``root``, or None."""
    try:
        done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=root,
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _is_history(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def find_history(start: Path) -> Path | None:
    """``.pytest_cache/connic/history.sqlite`` in ``start`` or the nearest folder above it."""
    for folder in (start, *start.parents):
        candidate = folder / ".pytest_cache" / "connic" / "history.sqlite"
        if candidate.is_file():
            return candidate
    return None
