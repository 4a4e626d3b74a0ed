"""The comparison as plain data (``compare/``): diffs of text, JSON and tool calls, decisions,
what counts as changed, sides from reports and from the history, and the refs that name them."""

from __future__ import annotations

import json
import shutil
import subprocess
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest

from pytest_connic.compare.cases import compare
from pytest_connic.compare.diff import key_diff, output_diff, tool_diff, word_diff
from pytest_connic.compare.render import fit, markdown, plain
from pytest_connic.compare.sides import CompareError, Side, case_from_report, resolve
from pytest_connic.history.store import CaseRow, HistoryStore, SessionRow


def test_a_word_diff_keeps_a_little_context_around_each_change() -> None:
    before = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen end"
    after = before.replace("end", "stop")
    ops = word_diff(before, after)
    assert ops[0] == ["…", ""] and ops[-2:] == [["-", "end"], ["+", "stop"]]
    assert ops[1][0] == "=" and ops[1][1].startswith("nine ")  # 8 words of context before the change


def test_json_outputs_differ_key_by_key() -> None:
    assert key_diff({"a": {"b": 1, "c": [1, 2]}}, {"a": {"b": 2, "c": [1]}, "d": None}) == [
        {"path": "a.b", "before": 1, "after": 2}, {"path": "a.c[1]", "before": 2}, {"path": "d", "after": None}]
    assert output_diff('{"sum": 10}', {"sum": 10}) is None  # the same JSON, as text or as a value
    assert output_diff("ten", '{"sum": 10}') == {"kind": "text", "words": [["-", "ten"], ["+", '{"sum": 10}']]}


def test_tool_calls_differ_call_by_call() -> None:
    def call(name: str, args: str, result: str | None = None, approval: str | None = None) -> dict[str, Any]:
        return {"name": name, "args": args, "result": result, "error": None, "approval": approval, "aborted": False}

    before = [call("lookup", '{"id":1}', '{"ok":true}'), call("refund", '{"amount":5}', approval="approved")]
    after = [call("lookup", '{"id":1}', '{"ok":true}'), call("refund", '{"amount":5}', approval="rejected")]
    assert tool_diff(before, after) == [["=", 'lookup({"id":1}) → {"ok":true}'],
                                        ["-", 'refund({"amount":5}) [approval: approved]'],
                                        ["+", 'refund({"amount":5}) [approval: rejected]']]
    assert tool_diff(before, before) == []


def entry(output: str, *, guardrail: str = "passed", approval: str = "approve", tokens: int = 10,
          status: str = "passed", nodeid: str = "tests/t.yaml::c") -> dict[str, Any]:
    """A case of a --connic-json report with one run."""
    run = {"status": "completed", "passed": status == "passed", "output": output, "tool_calls": [],
           "guardrails": [{"direction": "input", "name": "no_pii", "type": "pii", "status": guardrail}],
           "approvals": [{"tool": "refund", "decision": approval}], "tokens": {"input": tokens, "output": 1},
           "cost": 0.0, "duration_ms": 5.0}
    return {"nodeid": nodeid, "agent_name": "a", "test_name": nodeid.rpartition("::")[2], "status": status,
            "successes": int(status == "passed"), "agent_run_ids": ["r1"], "pass_rate": float(status == "passed"),
            "tokens": {"input": tokens, "output": 1}, "cost": 0.0, "median_latency_ms": 5.0, "runs_detail": [run]}


def side(label: str, *entries: dict[str, Any]) -> Side:
    return Side(label, {e["nodeid"]: case_from_report(e) for e in entries})


def test_decisions_verdicts_and_the_cases_of_one_side_only() -> None:
    section = compare(
        side("now", entry("hi", guardrail="blocked", approval="reject", status="failed"),
             entry("same", nodeid="tests/t.yaml::same"), entry("x", nodeid="tests/t.yaml::new")),
        side("then", entry("hi"), entry("same", nodeid="tests/t.yaml::same"), entry("x", nodeid="tests/t.yaml::old")))
    (changed,) = section["changed"]
    assert changed["verdict"] == {"before": "passed", "after": "failed"} and changed["output"] is None
    assert changed["decisions"] == [{"what": "approval refund", "before": "approve", "after": "reject"},
                                    {"what": "guardrail input no_pii", "before": "passed", "after": "blocked"}]
    assert section["unchanged"] == 1
    assert [c["nodeid"] for c in section["only_subject"]] == ["tests/t.yaml::new"]
    assert [c["nodeid"] for c in section["only_reference"]] == ["tests/t.yaml::old"]
    text = "\n".join(plain(section, 80))
    assert "    guardrail input no_pii: passed → blocked" in text and "    verdict: passed → failed" in text
    assert "  only in the subject: a::new (passed)" in text
    assert "approval refund: approve → reject" in markdown(section)


def test_latency_alone_is_no_change_tokens_are() -> None:
    slow = entry("hi")
    slow["median_latency_ms"] = 500.0
    assert compare(side("now", slow), side("then", entry("hi")))["unchanged"] == 1
    assert compare(side("now", entry("hi", tokens=12)), side("then", entry("hi")))["changed"][0]["tokens"] == [11, 13]


def test_lines_fit_the_width_and_a_long_word_is_cut() -> None:
    lines = fit(4, [("output: ", ""), ("x" * 100, "green")], 40)
    assert [sum(len(t) for t, _ in line) for line in lines] == [40, 40, 40, 10]
    assert "".join(t for line in lines for t, _ in line).replace(" ", "") == "output:" + "x" * 100


def test_refs_name_sessions_commits_and_reports(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"],
                   cwd=tmp_path, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True,
                          check=True).stdout.strip()
    store = HistoryStore(tmp_path / "h.sqlite")
    row = CaseRow("tests/t.yaml::c", "passed", 1, 1, 1, 1.0, 0.2, 1.0, 10, 1, 0.0, 5.0, None, None)
    for commit in (head, None, None):
        store.append(SessionRow("2026-12-02T10:00:00+00:00", commit, "pytest", ""), [row])
    assert resolve("last", store.path, tmp_path).label.startswith("session 3 of ")
    assert resolve("-3", store.path, tmp_path).label.startswith("session 1 of ")
    assert resolve("2", store.path, tmp_path).label.startswith("session 2 of ")
    assert resolve("HEAD", store.path, tmp_path).label == f"session 1 of 2026-12-02T10:00:00+00:00 at commit {head[:12]}"
    (tmp_path / "r.json").write_text(json.dumps({"cases": [entry("hi")]}), "utf-8")
    assert resolve("r.json", store.path, tmp_path).label == "report r.json"
    (tmp_path / "bad.json").write_text("{", "utf-8")
    for ref, message in (("-4", "'-4': no such session: the history * holds 3 session(s)"), ("9", "'9': no session 9 in the history *"),
                         ("nightly", "'nightly': neither a report file, a session (last, -N, a number) nor a git *"),
                         ("gone.json", "gone.json: no such report file (in *)"),
                         ("bad.json", "*bad.json: not a --connic-json report: invalid JSON: *")):
        with pytest.raises(CompareError) as caught:
            resolve(ref, store.path, tmp_path)
        assert fnmatch(str(caught.value), message), str(caught.value)


# ---------------------------------------------------------------- hostile inputs (issues 39 and 43)

@pytest.mark.parametrize("ref", ["-99999999999999999999", f"-{2**63}", f"-{2**63 - 1}", str(2**63), "0", "-0",
                                 "99999999999999999999999999999"])
def test_a_session_number_out_of_range_is_no_such_session(tmp_path: Path, ref: str) -> None:
    store = HistoryStore(tmp_path / "h.sqlite")
    store.append(SessionRow("2026-12-02T10:00:00+00:00", None, "pytest", ""), [])
    with pytest.raises(CompareError, match=f"'{ref}': no (such )?session"):
        resolve(ref, store.path, tmp_path)


@pytest.mark.parametrize(("text", "message"), [
    ("[" * 200_000 + "]" * 200_000, "not a --connic-json report: nested deeper than 200 levels"),
    ('{"cases": [{"nodeid": "t::c", "line": 1e400}]}', "cases[[]0]: not a case of a --connic-json report (OverflowError: *"),
    ('{"cases": [{"nodeid": "t::c", "wilson_95": ["a", "b"]}]}', "cases[[]0]: not a case of a --connic-json report (ValueError: *"),
    ('{"cases": [{"nodeid": "t::c", "cost": NaN}]}', "not a --connic-json report: invalid JSON: NaN is not a JSON number*"),
])
def test_a_report_that_cannot_be_compared_is_an_error_naming_it(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "bad.json").write_text(text, "utf-8")
    with pytest.raises(CompareError) as caught:
        resolve("bad.json", None, tmp_path)
    assert fnmatch(str(caught.value), f"{tmp_path / 'bad.json'}: {message}"), str(caught.value)


def test_a_fifo_as_a_report_is_refused_without_blocking(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "pipe.json")
    with pytest.raises(CompareError, match=r"pipe.json: the report is a named pipe \(FIFO\); only a regular file is read"):
        resolve("pipe.json", None, tmp_path)


@pytest.mark.timeout(120)
def test_a_long_word_is_cut_in_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_connic.compare import render

    calls = {"wcwidth": 0, "display_width": 0}
    for name in calls:
        real = getattr(render, name)

        def counted(text: str, real: Any = real, name: str = name) -> int:
            calls[name] += len(text)  # the characters measured
            return int(real(text))

        monkeypatch.setattr(render, name, counted)
    word = "x" * 60_000
    lines = fit(4, [("output: ", ""), (word, "green")], 80)
    assert "".join(t for line in lines for t, _ in line).replace(" ", "") == "output:" + word
    assert max(sum(len(t) for t, _ in line) for line in lines) == 80
    assert calls["wcwidth"] + calls["display_width"] <= 3 * len(word)  # linear: each character measured a few times


@pytest.mark.timeout(120)  # without the bound, difflib matches these for hours
def test_the_word_diff_matches_word_by_word_only_while_it_is_cheap(monkeypatch: pytest.MonkeyPatch) -> None:
    import difflib

    from pytest_connic.compare import diff

    sizes: list[int] = []

    class Counted(difflib.SequenceMatcher):  # type: ignore[type-arg]
        def __init__(self, junk: None, a: Any, b: Any, autojunk: bool) -> None:
            sizes.append(len(a) * len(b))
            super().__init__(junk, a, b, autojunk)

    monkeypatch.setattr(diff.difflib, "SequenceMatcher", Counted)
    before = " ".join(["a"] * 30_000)
    after = "start " + " ".join(["a", "b"] * 15_000) + " end"
    ops = word_diff(before, after)
    assert all(size <= diff.MAX_PAIRS for size in sizes)
    assert [op for op, _ in ops] == ["-", "+"]  # too many pairs: one change
    assert word_diff("x " + "a" * 60_000, "y " + "b" * 60_000)[0] == ["-", "x"]  # two long words: a small diff
    assert word_diff("one two three", "one four three") == [["=", "one "], ["-", "two"], ["+", "four"], ["=", " three"]]


# ---------------------------------------------------------------- the Markdown summary as GitHub renders it (issue 42)

def rendered(text: str) -> str:
    """The Markdown as GitHub renders it (CommonMark with tables and strikethrough), as HTML."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(text)


def visible(page: str) -> str:
    """The text a reader sees of ``page`` (entities decoded, tags dropped)."""
    from html.parser import HTMLParser

    seen: list[str] = []
    parser = HTMLParser(convert_charrefs=True)
    parser.handle_data = seen.append  # type: ignore[method-assign]
    parser.feed(page)
    return "".join(seen)


NAMES = ["don't break", 'say "hi" & <b>bye</b>', "a | b", "x_y*z `q` [l](u) ~s~ #1 \\n"]


def test_the_summary_renders_every_name_as_itself_and_the_tool_diff_as_one_list() -> None:
    from pytest_connic.compare.render import results_markdown

    def call(name: str) -> dict[str, Any]:
        return {"name": name, "args": '{"a":1}', "result": '"&amp;"', "error": None, "approval": None, "aborted": False}

    before, after = entry("it's <same>"), entry("it's <new> & \"more\"")
    before["runs_detail"][0]["tool_calls"] = [{"name": "keep", "params": {"a": 1}, "result": "&amp;", "has_result": True},
                                              {"name": "gone", "params": {"a": 1}, "result": "&amp;", "has_result": True}]
    after["runs_detail"][0]["tool_calls"] = [{"name": "keep", "params": {"a": 1}, "result": "&amp;", "has_result": True},
                                             {"name": "new", "params": {"a": 1}, "result": "&amp;", "has_result": True}]
    for case, name in ((before, NAMES[0]), (after, NAMES[0])):
        case["test_name"] = name
    section = compare(side("now", after), side("then", before))
    page = rendered(results_markdown([(f"a::{n}", "failed", "0/1", f"because {n}") for n in NAMES]) + markdown(section))
    text = visible(page)
    for name in NAMES:
        assert f"a::{name}" in text and f"because {name}" in text
    for entity in ("&#x27;", "&quot;", "&amp;amp;", "&lt;", "&gt;"):
        assert entity not in text, entity
    assert 'it\'s <samenew> & "more"' in text and "→ &amp;" in text  # the result itself holds "&amp;"
    (tools,) = [block for block in page.split("<li>tool calls:")[1:]]
    lists = tools.split("</ul>")[0]
    assert lists.count("<ul>") == 1 and lists.count("<li>") == 3  # one list: kept, gone, new
    assert "<li>- <del>gone(" in lists and "<li>+ <ins>new(" in lists and "<li>= keep(" in lists


def test_a_passing_sessions_summary_has_its_table_folded_when_long() -> None:
    from pytest_connic.compare.render import MARKDOWN_OPEN_ROWS, results_markdown

    short = rendered(results_markdown([("a::one", "passed", "1/1", "")])).replace("\n", "")
    assert "<h3>Connic: 1/1 cases passed</h3>" in short and "<td>PASSED</td><td>a::one</td><td>1/1</td>" in short
    many = [(f"a::c{n}", "passed", "1/1", "") for n in range(MARKDOWN_OPEN_ROWS + 1)] + [("a::bad", "failed", "0/1", "no")]
    page = rendered(results_markdown(many)).replace("\n", "")
    assert page.index("<td>a::bad</td>") < page.index("<details>")  # what did not pass, open, first
    assert f"<summary>{MARKDOWN_OPEN_ROWS + 1} passed case(s)</summary>" in page
    assert page.split("<details>")[1].count("<tr>") == MARKDOWN_OPEN_ROWS + 2  # its rows and their header
