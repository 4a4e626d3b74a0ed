"""The history store, what changed, flakiness, the budget ledger and the HTML trends: pure modules."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_connic.errors import ConnicError
from pytest_connic.history.budget import Budget
from pytest_connic.history.compare import change
from pytest_connic.history.flaky import flakiness
from pytest_connic.history.store import CaseRow, HistoryError, HistoryStore, SessionRow
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
    with pytest.raises(HistoryError, match="cannot be written: file is not a database; it was left as it is"):
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
