"""The history store, what changed, flakiness, the budget ledger and the HTML trends: pure modules."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from helpers.history import kill_a_writer
from pytest_connic.compare.sides import resolve
from pytest_connic.errors import ConnicError
from pytest_connic.history.budget import Budget
from pytest_connic.history.compare import change
from pytest_connic.history.flaky import flakiness
from pytest_connic.history.store import CaseRow, HistoryError, HistoryStore, SessionRow, StoredSession
from pytest_connic.history.view import history_html, sparkline

ROW = CaseRow("tests/a.yaml::x", "passed", 9, 10, 10, 0.9, 0.6, 0.98, 100, 20, 0.01, 12.5, "c1", "a1")


def session(n: int, selection: str = "") -> SessionRow:
    return SessionRow(f"2026-01-0{n}T00:00:00+00:00", f"commit{n}", "pytest", selection)


def test_sessions_are_appended_and_read_back_oldest_first(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "deep" / "h.sqlite")
    assert store.sessions() == []  # no file yet: no history, and no file created by reading
    assert not (tmp_path / "deep" / "h.sqlite").exists()
    for n in (1, 2, 3):
        store.append(session(n, "sel" if n != 2 else "other"), [replace(ROW, successes=n)])
    mine = store.sessions("sel")
    assert [s.session.git_commit for s in mine] == ["commit1", "commit3"]
    assert mine[-1].cases[ROW.nodeid] == replace(ROW, successes=3)
    assert [s.session.id for s in store.sessions(None, commit="commit2")] == [2]


def test_a_file_that_is_not_a_history_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "app.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    before = path.read_bytes()
    with pytest.raises(HistoryError, match="not a pytest-connic history"):
        HistoryStore(path).append(session(1), [ROW])
    with pytest.raises(HistoryError, match="not a pytest-connic history"):
        HistoryStore(path).sessions()
    assert path.read_bytes() == before
    assert issubclass(HistoryError, ConnicError)


def test_a_corrupt_file_is_an_error_and_stays_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    path.write_bytes(b"garbage" * 100)
    with pytest.raises(HistoryError, match=r"not a pytest-connic history \(not a SQLite database\); it was left as it is"):
        HistoryStore(path).append(session(1), [ROW])
    assert path.read_bytes() == b"garbage" * 100


def test_change_newly_failing_passing_and_rate_moved() -> None:
    failed = replace(ROW, verdict="failed", pass_rate=0.2)
    assert change(failed, ROW).kind == "newly-failing"  # type: ignore[union-attr]
    assert change(ROW, failed).kind == "newly-passing"  # type: ignore[union-attr]
    moved = change(replace(ROW, pass_rate=1.0, rate_low=0.7, rate_high=1.0), ROW)
    assert moved is not None and moved.text == "pass rate moved 90% → 100% (outside 60%–98%)"
    assert change(replace(ROW, pass_rate=0.7), ROW) is None  # inside last time's interval
    assert change(ROW, None) is None
    assert change(replace(ROW, verdict="skipped"), failed) is None  # no verdict, no change


def test_flaky_needs_two_flips_with_the_same_cassette_and_config() -> None:
    p, f = ROW, replace(ROW, verdict="failed")
    assert flakiness([p, f], window=10) is None  # one flip is a change
    found = flakiness([p, f, p], window=10)
    assert found is not None and (found.flips, found.sessions) == (2, 3)
    assert flakiness([p, f, p], window=2) is None  # only the last two sessions count
    assert flakiness([p, f, replace(p, cassette_digest="c2")], window=10) is None
    assert flakiness([p, f, replace(p, config_digest="a2")], window=10) is None
    assert flakiness([p, replace(p, verdict="error"), p], window=10) is None  # an error is no verdict


def test_the_budget_ledger_is_shared_and_atomic(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    bound = Budget(path, tokens=1000)
    assert not bound.spent()

    def charge() -> None:
        other = Budget(path, tokens=1000)  # another process's view of the same ledger
        for _ in range(25):
            other.charge(5, 0.001)

    threads = [threading.Thread(target=charge) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spend = bound.spend()
    assert (spend.tokens, spend.runs) == (500, 100) and spend.cost == pytest.approx(0.1)
    assert not bound.spent()
    bound.charge(500, 0)
    assert bound.spent()
    assert Budget(path, cost=0.1).spent()
    assert bound.describe(bound.spend()) == "budget: spent 1,000 of 1,000 tokens over 101 run(s)"


def test_trend_charts_are_inline_svg_and_escape_every_string() -> None:
    svg = sparkline([1.0, None, 0.5], label="<b>", high=1.0)
    assert svg.startswith("<svg") and "&lt;b&gt;" in svg and "<b>" not in svg
    section = {"path": "h", "compared_with": None, "cases": {"tests/x.yaml::<script>": {
        "change": {"kind": "newly-failing", "text": "<i>"}, "flaky": None,
        "trend": [{"pass_rate": 1.0, "latency_ms": 3.0}]}}}
    page = history_html(section)
    assert "<script>" not in page and "&lt;script&gt;" in page and page.count("<svg") == 2
    assert history_html({"cases": {}}) == "" == history_html(None)


# ---------------------------------------------------------------- files that are not a history (issue 43)

def test_a_history_is_made_only_where_no_file_is_and_whole(tmp_path: Path) -> None:
    empty = tmp_path / "conftest.py"
    empty.write_bytes(b"")  # an empty file SQLite would take for a new database
    link = tmp_path / "h.sqlite"
    link.symlink_to(empty)
    for path in (empty, link):
        with pytest.raises(HistoryError, match=r"not a pytest-connic history \(an empty file\); it was left as it is"):
            HistoryStore(path).append(session(1), [ROW])
        with pytest.raises(HistoryError, match="an empty file"):
            HistoryStore(path).sessions()
    assert empty.read_bytes() == b""
    fresh = HistoryStore(tmp_path / "new" / "h.sqlite")
    fresh.append(session(1), [ROW])
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["h.sqlite"]  # no temporary file left
    with sqlite3.connect(fresh.path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 3
    conn.close()


def test_a_newer_history_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite")
    store.append(session(1), [ROW])
    with sqlite3.connect(store.path) as conn:
        conn.execute("ALTER TABLE cases ADD COLUMN later TEXT")
        conn.execute("PRAGMA user_version = 4")
    conn.close()
    before = store.path.read_bytes()
    message = r"written by a newer pytest-connic \(schema 4; this version knows schema 3 and older\)"
    with pytest.raises(HistoryError, match=message):
        store.append(session(2), [ROW])
    with pytest.raises(HistoryError, match=message):
        store.sessions()
    assert store.path.read_bytes() == before


def test_a_history_left_mid_transaction_is_rolled_back_and_read(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite")
    store.append(session(1), [ROW])
    kill_a_writer(store.path)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):  # what a read-only reader meets
        sqlite3.connect(f"{store.path.as_uri()}?mode=ro", uri=True).execute("SELECT count(*) FROM sessions")
    assert [s.session.git_commit for s in store.sessions()] == ["commit1"]  # rolled back, then read
    assert not Path(f"{store.path}-journal").exists()
    store.append(session(2), [ROW])
    assert store.count() == 2


def test_a_full_disk_is_an_error_and_the_file_stays_as_it_was(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    store = HistoryStore(tmp_path / "h.sqlite")
    store.append(session(1), [ROW])
    before = store.path.read_bytes()
    opened = HistoryStore._open

    def full(self: HistoryStore, real: Path, *, write: bool) -> sqlite3.Connection:
        conn = opened(self, real, write=write)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "disk is full" when it grows
        return conn

    monkeypatch.setattr(HistoryStore, "_open", full)
    with pytest.raises(HistoryError, match="cannot be written: database or disk is full; it was left as it is"):
        store.append(session(2), [replace(ROW, nodeid=f"tests/a.yaml::{n}" + "x" * 500) for n in range(50)])
    assert store.path.read_bytes() == before


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(("column", "value", "problem"), [
    ("behaviour", DEEP, "column behaviour holds nested deeper than 80 levels"),
    ("behaviour", '{"runs": [{"tools": ["add"]}]}', "column behaviour: runs[0].tools[0] is a string, not an object"),
    ("behaviour", '{"runs": "all", "agent": "a"}', "column behaviour: (behaviour).runs is a string"),
    ("behaviour", '{"runs": [{"tokens": {"input": "many"}}]}', "column behaviour: runs[0].tokens.input is a string"),
    ("behaviour", "NaN", "column behaviour holds invalid JSON: NaN is not a JSON number"),
    ("config_parts", DEEP, "column config_parts holds nested deeper than 80 levels"),
    ("config_parts", '{"tools/x.py": [1]}', "column config_parts: ['tools/x.py'] is an array, not a string"),
    ("config_parts", "[]", "column config_parts: (config_parts) is an array, not an object"),
])
def test_damaged_rows_are_skipped_with_one_line_naming_the_session(tmp_path: Path, column: str, value: str,
                                                                    problem: str) -> None:
    store = HistoryStore(tmp_path / "h.sqlite")
    store.append(session(1), [ROW, replace(ROW, nodeid="tests/a.yaml::y")])
    with sqlite3.connect(store.path) as conn:
        conn.execute(f"UPDATE cases SET {column} = ? WHERE nodeid = ?", (value, ROW.nodeid))
    conn.close()
    (found,) = store.sessions()
    assert list(found.cases) == ["tests/a.yaml::y"]  # the sound row is read, the damaged one skipped
    assert store.skipped == [f"session 1: case {ROW.nodeid!r}: {problem}"]
    assert store.skipped_text() == (f"history {store.path}: 1 damaged row(s) skipped (session 1: case "
                                    f"{ROW.nodeid!r}: {problem}); they were left as they are")
    store.append(session(2), [ROW])  # and the next session is stored
    assert [len(s.cases) for s in store.sessions()] == [1, 1] and store.skipped_text() is not None


def test_only_the_sessions_asked_for_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = HistoryStore(tmp_path / "h.sqlite")
    for n in range(1, 10):
        store.append(session(n), [ROW])
    read: list[int] = []
    cases = HistoryStore._cases

    def counted(self: HistoryStore, sid: int, rows: object) -> dict[str, CaseRow]:
        read.append(sid)
        return cases(self, sid, rows)  # type: ignore[arg-type]

    monkeypatch.setattr(HistoryStore, "_cases", counted)
    assert resolve("-7", store.path, tmp_path).label.startswith("session 3 of ")
    assert read == [3]  # the 7th last: its cases and nobody else's
    assert store.count() == 9


def test_an_error_before_a_pass_is_a_change_and_a_new_cassette_is_named() -> None:
    from pytest_connic.history.view import build_view, terminal_lines

    error = replace(ROW, verdict="error", pass_rate=None, rate_low=None, rate_high=None)
    assert change(ROW, error) == change(ROW, error) is not None
    assert change(ROW, error).text == "newly passing (an error last time)"  # type: ignore[union-attr]
    assert change(error, ROW).kind == "newly-failing"  # type: ignore[union-attr]
    before = StoredSession(replace(session(1), id=1), {ROW.nodeid: error})
    view = build_view("h.sqlite", {ROW.nodeid: replace(ROW, cassette_digest="c2")}, [before], before, window=10)
    lines = terminal_lines(view)
    assert lines[0].startswith("  history: 1 case(s) changed since session 1 of ")
    assert lines[1] == "  tests/a.yaml::x: newly passing (an error last time); changed: cassette re-recorded"
    assert view.section()["cases"][ROW.nodeid]["cassette_changed"] is True  # type: ignore[index]
