"""The history store: one SQLite file, one row per session and one per case of a session.

A history that cannot be read or written (a read-only cache, a file another process holds
locked, a corrupt file, a file that is not a pytest-connic history) raises ``HistoryError``; the
file is never deleted, replaced or rewritten to "repair" it. A session is written in one
transaction, so a failed write leaves the file as it was.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import closing
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from pytest_connic.errors import ConnicError
from pytest_connic.files import IrregularFileError, file_kind, process_umask, refuse_irregular
from pytest_connic.history.behaviour import column_problem

#: ``PRAGMA application_id`` of a pytest-connic history ("CNIC")
APPLICATION_ID = 0x434E4943
#: 2: ``cases.config_parts``; 3: ``cases.behaviour`` (each added to an older file when a session
#: is written: :data:`ADDED_COLUMNS`; an older file is read with NULL for them)
SCHEMA_VERSION = 3
#: the columns a later version added to ``cases``: added to an older file by the next write
ADDED_COLUMNS = ("config_parts", "behaviour")
#: how long a write waits for another process's lock, in seconds
LOCK_TIMEOUT_S = 2.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started TEXT NOT NULL,
    git_commit TEXT,
    command TEXT NOT NULL,
    selection TEXT NOT NULL,
    tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS cases (
    session_id INTEGER NOT NULL REFERENCES sessions(id),
    nodeid TEXT NOT NULL,
    verdict TEXT NOT NULL,
    successes INTEGER NOT NULL,
    executed INTEGER NOT NULL,
    runs INTEGER NOT NULL,
    pass_rate REAL,
    rate_low REAL,
    rate_high REAL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost REAL NOT NULL,
    latency_ms REAL,
    cassette_digest TEXT,
    config_digest TEXT,
    config_parts TEXT,
    behaviour TEXT,
    PRIMARY KEY (session_id, nodeid)
);
CREATE INDEX IF NOT EXISTS cases_by_node ON cases (nodeid, session_id);
"""


class HistoryError(ConnicError):
    """The history file cannot be read or written; the message says which file and why."""


@dataclass(frozen=True)
class CaseRow:
    """One case of one session, as stored."""

    nodeid: str
    verdict: str  #: passed | failed | error | interrupted | skipped
    successes: int
    executed: int  #: runs that started
    runs: int
    pass_rate: float | None
    rate_low: float | None  #: the 95 % Wilson interval of ``pass_rate``
    rate_high: float | None
    input_tokens: int
    output_tokens: int
    cost: float
    latency_ms: float | None  #: median over the executed runs
    cassette_digest: str | None
    config_digest: str | None
    #: JSON ``{part: digest}`` of what ``config_digest`` covers (None in a version-1 row)
    config_parts: str | None = None
    #: JSON of what the case did (``history/behaviour.py``; None in an older row)
    behaviour: str | None = None


@dataclass(frozen=True)
class SessionRow:
    """One session: when, at which commit, from which command, which selection of cases."""

    started: str  #: ISO 8601, UTC
    git_commit: str | None
    command: str
    selection: str  #: what selected the cases (arguments, ``-k``, ``-m``): sessions compare within one
    tokens: int = 0
    cost: float = 0.0
    id: int | None = None


@dataclass(frozen=True)
class StoredSession:
    session: SessionRow
    cases: dict[str, CaseRow]


_CASE_COLUMNS = tuple(f.name for f in fields(CaseRow))


#: the values a column of a row may hold, by the field's annotation (``int | None``, ...)
_KINDS: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (int, float)}
#: columns that hold a rate (0 to 1); every other number is a count, an amount or a duration (>= 0)
_RATES = frozenset({"pass_rate", "rate_low", "rate_high"})
_VERDICTS = frozenset({"passed", "failed", "error", "interrupted", "skipped", "xfailed"})


def row_problem(row: CaseRow | SessionRow) -> str | None:
    """What is wrong with a row read back (a column of the wrong type or out of its range, as a
    hand-edited or damaged file has), in words; None for a sound row."""
    where = f"case {row.nodeid!r}" if isinstance(row, CaseRow) else f"session {row.id}"
    for f in fields(row):
        value = getattr(row, f.name)
        annotation = str(f.type).split("#")[0].strip()
        kinds = [k for part in annotation.split("|") for k in _KINDS.get(part.strip(), ())]
        if value is None and "None" in annotation:
            continue
        if not kinds:
            continue  # a field of a kind this check does not know: the reader of it checks it
        if isinstance(value, bool) or not isinstance(value, tuple(kinds)):
            return f"{where}: column {f.name} holds {value!r}, not {' or '.join(annotation.split(' | '))}"
        if isinstance(value, (int, float)):
            if not (value >= 0 and value != float("inf")):  # NaN too
                return f"{where}: column {f.name} holds {value!r}, out of range (a number >= 0)"
            if f.name in _RATES and value > 1:
                return f"{where}: column {f.name} holds {value!r}, out of range (a rate from 0 to 1)"
    if isinstance(row, CaseRow) and row.verdict not in _VERDICTS:
        return f"{where}: column verdict holds {row.verdict!r}, not one of {', '.join(sorted(_VERDICTS))}"
    if isinstance(row, CaseRow):  # the JSON columns: bounded in size and depth, of the types kept
        for column in ("config_parts", "behaviour"):
            text = getattr(row, column)
            problem = column_problem(column, text) if text is not None else None
            if problem is not None:
                return f"{where}: {problem}"
    return None


def _storable(value: object) -> object:
    """A column's value as SQLite can store it: text UTF-8 cannot hold (a lone surrogate in a case
    name) as its ``\\udcff`` escape."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


class HistoryStore:
    """The history at ``path``: read the past, append one session.

    A file is created only where none exists (whole: written beside it, then linked into place),
    and an existing file is opened only when it is a pytest-connic history of this version or an
    older one. A file left mid-transaction (a writer killed before its commit left a hot journal)
    is rolled back by SQLite on one read-write open, then read. Rows that do not hold what a
    history holds are skipped, each said once in :attr:`skipped`.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        #: the rows its reads skipped (damaged), each once: ``session 3: case '...': column ...``
        self.skipped: list[str] = []

    def _connect(self, *, write: bool) -> sqlite3.Connection:
        real = Path(os.path.realpath(self.path))  # a link the user named is followed, never replaced
        try:
            refuse_irregular(real, "history")  # sqlite3 would wait forever on a FIFO
            if write and not real.exists():
                self._create(real)
            self._check_file(real)
            conn = self._open(real, write=write)
        except IrregularFileError as exc:
            raise HistoryError(f"history {exc}; it was left as it is") from None
        except (sqlite3.Error, OSError) as exc:
            raise self._error("cannot be " + ("written" if write else "read"), exc) from None
        return conn

    def _open(self, real: Path, *, write: bool) -> sqlite3.Connection:
        """A connection to the checked file; read-only unless ``write``. A hot journal (a writer
        that never committed) is rolled back first: a read-only connection cannot do it."""
        for attempt in (1, 2):
            if write:
                conn = sqlite3.connect(real, timeout=LOCK_TIMEOUT_S, isolation_level=None)
            else:
                conn = sqlite3.connect(f"{real.as_uri()}?mode=ro", uri=True, timeout=LOCK_TIMEOUT_S,
                                       isolation_level=None)
            try:
                self._check(conn)
                return conn
            except sqlite3.OperationalError as exc:
                conn.close()
                if write or attempt == 2 or not _needs_rollback(exc):
                    raise
                _roll_back(real)
            except BaseException:
                conn.close()
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _create(self, real: Path) -> None:
        """A new, empty history at ``real``: made beside it and linked into place, so no reader
        ever sees a half-made file, and a file another session made meanwhile is kept."""
        import tempfile

        real.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{real.name[:40]}.", suffix=".new", dir=real.parent)
        os.close(fd)
        try:
            with closing(sqlite3.connect(tmp, isolation_level=None)) as conn:
                conn.execute("BEGIN IMMEDIATE")
                for statement in filter(str.strip, _SCHEMA.split(";")):
                    conn.execute(statement)
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            os.chmod(tmp, 0o666 & ~process_umask())
            try:
                os.link(tmp, real)
            except FileExistsError:
                pass  # another session created it first: that one is the history
            except OSError:  # a file system without hard links
                if not os.path.lexists(real):
                    os.replace(tmp, real)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def _check_file(self, real: Path) -> None:
        """Refuse an existing file that is not a SQLite database (an empty file, a conftest.py,
        text), read without blocking: SQLite would take an empty file for a new database."""
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        try:
            kind = file_kind(os.fstat(fd).st_mode)
            if kind is not None:
                raise IrregularFileError(f"{self.path}: the history is {kind}; only a regular file is read")
            head = os.read(fd, len(_MAGIC))
        finally:
            os.close(fd)
        if head != _MAGIC:
            why = "an empty file" if not head else "not a SQLite database"
            raise HistoryError(f"history {self.path}: not a pytest-connic history ({why}); it was left as it is")

    def _check(self, conn: sqlite3.Connection) -> None:
        """Refuse a SQLite file that holds something else, or a history of a newer version (never
        write into either)."""
        app = conn.execute("PRAGMA application_id").fetchone()[0]
        if app != APPLICATION_ID:
            raise HistoryError(f"history {self.path}: not a pytest-connic history (another SQLite database); "
                               "it was left as it is")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise HistoryError(f"history {self.path}: written by a newer pytest-connic (schema {version}; this "
                               f"version knows schema {SCHEMA_VERSION} and older); it was left as it is: upgrade "
                               "pytest-connic, or give this version its own file (--connic-history)")

    def _error(self, what: str, exc: BaseException) -> HistoryError:
        if isinstance(exc, HistoryError):
            return exc
        return HistoryError(f"history {self.path} {what}: {exc}; it was left as it is")

    def count(self) -> int:
        """How many sessions the history holds (0 when the file does not exist yet)."""
        if not self.path.exists():
            return 0
        try:
            with closing(self._connect(write=False)) as conn:
                if not _has_sessions(conn):
                    return 0
                return int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
        except (sqlite3.Error, OSError) as exc:
            raise self._error("cannot be read", exc) from None

    def sessions(self, selection: str | None = None, *, limit: int = 50, offset: int = 0,
                 commit: str | None = None, session_id: int | None = None) -> list[StoredSession]:
        """The most recent sessions (oldest first), of ``selection``, at ``commit`` and with the id
        ``session_id`` when given, after skipping the ``offset`` most recent; ``[]`` when the file
        does not exist yet. Only the sessions returned are read, whatever the history's size."""
        if not self.path.exists():
            return []
        where: list[str] = []
        args: list[str | int] = []
        for column, value in (("selection", selection), ("git_commit", commit), ("id", session_id)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        sql = ("SELECT id, started, git_commit, command, selection, tokens, cost FROM sessions"
               + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id DESC LIMIT ? OFFSET ?")
        try:
            with closing(self._connect(write=False)) as conn:
                if not _has_sessions(conn):
                    return []
                columns = _case_columns(conn)
                found = []
                for sid, started, git_commit, command, sel, tokens, cost in conn.execute(sql, [*args, limit, offset]):
                    session = SessionRow(started, git_commit, command, sel, tokens, cost, id=sid)
                    problem = row_problem(session)
                    if problem is not None:
                        self._skip(f"{problem} (the session and its cases)")
                        continue
                    rows = conn.execute(f"SELECT {columns} FROM cases WHERE session_id = ?", (sid,))
                    found.append(StoredSession(session, self._cases(sid, rows)))
        except HistoryError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise self._error("cannot be read", exc) from None
        return list(reversed(found))

    def _cases(self, sid: int, rows: Iterable[tuple[object, ...]]) -> dict[str, CaseRow]:
        cases = {}
        for values in rows:
            row = CaseRow(*values)  # type: ignore[arg-type]  # checked next
            problem = row_problem(row)
            if problem is not None:
                self._skip(f"session {sid}: {problem}")
                continue
            cases[row.nodeid] = row
        return cases

    def _skip(self, problem: str) -> None:
        if problem not in self.skipped:  # two reads of one store meet the same row
            self.skipped.append(problem)

    def skipped_text(self) -> str | None:
        """The rows the reads skipped, as one warning naming the file (None: none skipped)."""
        if not self.skipped:
            return None
        more = f", and {len(self.skipped) - 1} more" if len(self.skipped) > 1 else ""
        return (f"history {self.path}: {len(self.skipped)} damaged row(s) skipped ({self.skipped[0]}{more}); "
                "they were left as they are")

    def append(self, session: SessionRow, cases: Iterable[CaseRow]) -> int:
        """Store one session and its cases in one transaction; returns the session's id."""
        rows: Sequence[CaseRow] = sorted(cases, key=lambda c: c.nodeid)
        try:
            with closing(self._connect(write=True)) as conn:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for statement in filter(str.strip, _SCHEMA.split(";")):
                        conn.execute(statement)
                    stored = _stored_columns(conn)
                    for column in ADDED_COLUMNS:  # an older file: migrated in the same transaction
                        if column not in stored:
                            conn.execute(f"ALTER TABLE cases ADD COLUMN {column} TEXT")
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")  # newer files are refused
                    cur = conn.execute(
                        "INSERT INTO sessions (started, git_commit, command, selection, tokens, cost) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        tuple(map(_storable, (session.started, session.git_commit, session.command,
                                              session.selection, session.tokens, session.cost))))
                    sid = int(cur.lastrowid or 0)
                    marks = ", ".join("?" * (len(_CASE_COLUMNS) + 1))
                    conn.executemany(f"INSERT INTO cases (session_id, {', '.join(_CASE_COLUMNS)}) VALUES ({marks})",
                                     [(sid, *map(_storable, astuple(row))) for row in rows])
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
        except HistoryError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise self._error("cannot be written", exc) from None
        return sid


#: the first bytes of every SQLite 3 database file
_MAGIC = b"SQLite format 3\x00"
#: SQLITE_READONLY_ROLLBACK: a read-only connection met a hot journal it may not roll back
_READONLY_ROLLBACK = 776


def _needs_rollback(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11 and later
    return code == _READONLY_ROLLBACK if code is not None else "readonly database" in str(exc)


def _roll_back(real: Path) -> None:
    """Let SQLite roll back the hot journal a killed writer left: one read on a read-write
    connection (never creating the file)."""
    with closing(sqlite3.connect(f"{real.as_uri()}?mode=rw", uri=True, timeout=LOCK_TIMEOUT_S,
                                 isolation_level=None)) as conn:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()


def _has_sessions(conn: sqlite3.Connection) -> bool:
    return bool(conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'sessions'").fetchone()[0])


def _stored_columns(conn: sqlite3.Connection) -> set[str]:
    return {row[1] for row in conn.execute("PRAGMA table_info(cases)")}


def _case_columns(conn: sqlite3.Connection) -> str:
    """The SELECT list of ``CaseRow``'s fields; NULL for a column an older file lacks."""
    stored = _stored_columns(conn)
    return ", ".join(c if c in stored else "NULL" for c in _CASE_COLUMNS)
