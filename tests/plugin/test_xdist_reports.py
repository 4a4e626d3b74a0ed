"""Every report is the same with ``-n 2`` as without: workers' outcomes are merged on the controller.

The equivalence session (``test_reports_are_identical_with_and_without_xdist``) holds what the
other test modules would otherwise each check in a nested xdist session of their own ("the same
under xdist"): one project that takes every report path (``helpers/equivalence.py``), run serially
and with ``-n 2``, every report compared. Both runs are in-process pytester sessions; under ``-n 2``
the controller is the in-process session and its two workers are processes, which is where the
transport is. ``--dist loadfile`` gives the largest suites to different workers, which the test
checks from the ``-v`` output, so a report that forgot a worker's cases could not pass. What is
particular to xdist keeps sessions of its own (docs/architecture.md, "Tests").
"""

from __future__ import annotations

import json
import re
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from junitparser import JUnitXml, Properties

from helpers.equivalence import (
    ADDING,
    CUT,
    ENVIRON,
    LOAD_WARNINGS,
    MULTIPLYING,
    RUN_WARNING,
    SECRETS,
    equivalence_options,
    write_equivalence,
)
from helpers.leaks import forms
from helpers.mixed import PROVIDER_DOWN, write_mixed
from helpers.project import ConnicProject

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?")
#: keys whose values differ from one run to the next (run ids are replaced wherever they occur)
VOLATILE = {"duration_ms", "median_latency_ms", "latency_ms", "timestamp"}
#: the output folders of the two sessions (``helpers.equivalence.equivalence_options``)
SERIAL, XDIST = "out-serial", "out-xdist"


def stable_text(text: str) -> str:
    """``text`` without run ids, timestamps, durations and the name of the session's output folder."""
    text = TIMESTAMP.sub("<ts>", UUID.sub("<id>", text.replace(XDIST, SERIAL)))
    text = re.sub(r'"duration_ms":\s*[\d.]+', '"duration_ms":<n>', text)
    return re.sub(r"\(\d+ms\)", "(<n>ms)", text)


def stable(value: Any) -> Any:
    """A JSON value without volatile fields; JSON held in strings (``metadata_json``) is opened."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    if isinstance(value, str):
        if value[:1] in "{[":
            try:
                return stable(json.loads(value))
            except ValueError:
                pass
        return stable_text(value)
    return value


def junit_content(path: Path) -> dict[str, Any]:
    """The testsuite counts and, per testcase, its results (tag, message, text) and properties."""
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    cases = {}
    for case in root.iter("testcase"):
        props = {p.get("name"): p.get("value", "") for p in case.iter("property")}
        props["run_ids"] = stable_text(props.get("run_ids", ""))
        props.pop("median_latency_ms", None)
        results = [(r.tag, stable_text(r.get("message", "")), stable_text(r.text or ""))
                   for r in case if r.tag in ("failure", "error", "skipped", "system-out", "system-err")]
        cases[f"{case.get('classname')}::{case.get('name')}"] = {"results": results, "properties": props}
    counts = {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")}
    return {"counts": counts, "cases": cases}


def junitparser_view(path: Path) -> list[tuple[Any, ...]]:
    """What junitparser, a real consumer, reads from the file."""
    rows = []
    for suite in JUnitXml.fromfile(str(path)):
        for case in suite:
            props = tuple((p.name, stable_text(p.value)) for group in case.iterchildren(Properties)
                          for p in group if p.name != "median_latency_ms")
            results = tuple((type(r).__name__, stable_text(r.message or "")) for r in case.result)
            rows.append((case.classname, case.name, results, props))
    return sorted(rows)


def results_rows(stdout: str) -> list[list[str]]:
    """The results table's rows without the latency column."""
    rows = []
    for line in stdout.split("= connic results =")[1].splitlines():
        if line.startswith("    │"):
            cells = [c.strip() for c in line.strip().strip("│").split("│")]
            rows.append(cells[:4] + cells[5:])
    return rows


def worker_of(stdout: str, nodeid: str) -> str:
    match = re.search(rf"^\[(gw\d)\] .*(PASSED|FAILED|ERROR) {re.escape(nodeid)}\s*$", stdout, re.MULTILINE)
    assert match, f"no xdist result line for {nodeid}"
    return match.group(1)


def html_parts(path: Path) -> tuple[str, Any]:
    """The page without its data and its header's run context (command, time), and the data (as
    ``without_run_warning`` has it); the history's latencies are times too."""
    html = re.sub(r'<dl class="context" id="context">.*?</dl>', "", path.read_text("utf-8"), flags=re.DOTALL)
    head, rest = html.split('<script type="application/json" id="connic-report">')
    data, tail = rest.split("</script>", 1)
    page = re.sub(r"(median latency over the last sessions:) \d+ ms", r"\1 <n> ms", head + tail)
    return stable_text(page), without_run_warning(json.loads(data))


def trace_files(directory: Path) -> dict[str, Any]:
    return {p.name: stable(json.loads(p.read_text("utf-8"))) for p in sorted(directory.iterdir())}


def report_json(directory: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((directory / "report.json").read_text("utf-8"))
    return data


def without_run_warning(report: dict[str, Any]) -> Any:
    """The report, stable, with the warning a run of ``calc`` meets taken off the cases: Connic warns
    once per process, on the first case of ``calc`` each process runs (one serially, one on each
    worker); that it is on some case is checked apart."""
    cases = [dict(c, warnings=[w for w in c.get("warnings", []) if RUN_WARNING not in w]) for c in report["cases"]]
    assert any(RUN_WARNING in w for c in report["cases"] for w in c.get("warnings", []))
    return stable(dict(report, cases=cases))


def history_rows(path: Path) -> list[dict[str, Any]]:
    """The cases of the history, without their latency (in what each run did too)."""
    with sqlite3.connect(path) as conn:
        conn.row_factory = sqlite3.Row
        rows = [{k: v for k, v in dict(r).items() if k not in ("latency_ms", "session_id")}
                for r in conn.execute("SELECT * FROM cases ORDER BY nodeid")]
    for row in rows:
        row["behaviour"] = stable(json.loads(row["behaviour"]))
    return rows


def section(stdout: str, name: str) -> str:
    """The lines of a ``--- name ---`` or ``=== name ===`` section, up to the next section."""
    after = re.split(rf"^[-=]+ {re.escape(name)} [-=]+$", stdout, flags=re.MULTILINE)[1]
    return stable_text(re.split(r"^[-=]{3,} .* [-=]{3,}$", after, flags=re.MULTILINE)[0])


def failure_reports(stdout: str) -> dict[str, str]:
    """Each failure and error report by its headline, without xdist's line naming the worker."""
    body = re.split(r"^=+ (?:ERRORS|FAILURES) =+$", stdout, maxsplit=1, flags=re.MULTILINE)[1]
    body = re.split(r"^=+ warnings summary =+$", body, maxsplit=1, flags=re.MULTILINE)[0]
    parts = re.split(r"^_{3,} (.+?) _{3,}$", body, flags=re.MULTILINE)[1:]
    reports = {}
    for head, text in zip(parts[::2], parts[1::2]):
        lines = [line for line in text.splitlines() if not re.match(r"\[gw\d\] \S+ -- Python ", line)]
        reports[head] = re.sub(r"^=+ ERRORS =+$", "", stable_text("\n".join(lines)), flags=re.MULTILINE).strip()
    return reports


def short_summary(stdout: str) -> list[str]:
    return sorted(stdout.split("short test summary info", 1)[1].splitlines()[1:-1])


def warning_blocks(stdout: str) -> dict[tuple[str, ...], list[str]]:
    """The warnings summary: each message (its lines) and, sorted, where pytest met it (a file and
    line, or a case). pytest groups identical messages and lists each worker's copy: a warning
    shown by two workers has its location twice."""
    summary = stdout.split("warnings summary", 1)[1].split("-- Docs:", 1)[0]
    blocks: dict[tuple[str, ...], list[str]] = {}
    for block in summary.strip("= \n").split("\n\n"):
        lines = block.splitlines()
        message = tuple(stable_text(line) for line in lines if line.startswith(" "))
        assert message not in blocks, message
        blocks[message] = sorted(line for line in lines if not line.startswith(" "))
    return blocks


def where_met(blocks: dict[tuple[str, ...], list[str]], text: str) -> list[str]:
    """The locations of the one warning whose message holds ``text``."""
    (found,) = [where for message, where in blocks.items() if any(text in line for line in message)]
    return found


def artifact_texts(directory: Path) -> dict[str, str]:
    """Every file of the session's output folder, as text (the history, SQLite, decoded leniently)."""
    return {str(p.relative_to(directory)): p.read_bytes().decode("utf-8", "replace")
            for p in sorted(directory.rglob("*")) if p.is_file()}


def artifact_sizes(directory: Path) -> dict[str, int]:
    return {str(p.relative_to(directory)): p.stat().st_size for p in directory.rglob("*") if p.is_file()}


def test_reports_are_identical_with_and_without_xdist(calc: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    """The equivalence session: the project of ``helpers/equivalence.py`` (every report path) run
    serially and with ``-n 2``; every report is the same once run ids, times and what depends on the
    worker are normalised, and what only xdist could get wrong is checked on its own: a warning met
    on both workers shown once, secrets that only the workers load masked everywhere, the huge output
    cut identically, the coverage merged from both workers, one history session, one comparison."""
    for name, value in ENVIRON.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("API_TOKEN", raising=False)
    write_equivalence(calc)
    plain = calc.run("-p", "no:xdist", *equivalence_options(SERIAL))
    distributed = calc.run("-n", "2", "--dist", "loadfile", "-v", *equivalence_options(XDIST))
    out = distributed.stdout.str()
    # the cases calling calc.add and calc.multiply ran on different workers, and both met the warning
    # only a run of calc meets
    assert any(worker_of(out, m) != worker_of(out, ADDING) for m in MULTIPLYING)
    assert plain.ret == distributed.ret == 1
    counts = {"passed": 9, "failed": 8, "errors": 1}
    plain.assert_outcomes(**counts, deselected=1, warnings=plain.parseoutcomes()["warnings"])
    distributed.assert_outcomes(**counts, warnings=distributed.parseoutcomes()["warnings"])  # xdist counts no deselected

    serial_dir, xdist_dir = calc.root / SERIAL, calc.root / XDIST
    plain_json, xdist_json = report_json(serial_dir), report_json(xdist_dir)
    assert [c["nodeid"] for c in xdist_json["cases"]] == [c["nodeid"] for c in plain_json["cases"]]
    assert len(xdist_json["cases"]) == 17 and "tests/calc.yaml::invalid" not in out  # the filter's, on both
    assert xdist_json["summary"] == {"cases": 17, "passed": 9, "failed": 6, "errors": 2}
    assert xdist_json["environment_id"] == "staging" and xdist_json["comparison"]["changed"]
    assert without_run_warning(xdist_json) == without_run_warning(plain_json)
    assert sum(len(c["runs_detail"]) for c in xdist_json["cases"]) == 26

    plain_junit, xdist_junit = junit_content(serial_dir / "junit.xml"), junit_content(xdist_dir / "junit.xml")
    assert len(xdist_junit["cases"]) == 18  # the cases and the Python test
    assert xdist_junit == plain_junit
    assert junitparser_view(xdist_dir / "junit.xml") == junitparser_view(serial_dir / "junit.xml")

    assert trace_files(xdist_dir / "traces") == trace_files(serial_dir / "traces")
    assert len(list((xdist_dir / "traces").iterdir())) == 26
    assert html_parts(xdist_dir / "report.html") == html_parts(serial_dir / "report.html")
    # the called tools of both workers, merged
    assert (xdist_dir / "coverage.json").read_text("utf-8") == (serial_dir / "coverage.json").read_text("utf-8")
    rows = {a["name"]: a for a in json.loads((xdist_dir / "coverage.json").read_text("utf-8"))["pytest_connic"]["agents"]}
    assert rows["calc"]["called_tools"] == ["calc.add", "calc.multiply"] and rows["calc"]["never_called"] == []
    # one history session, written by the controller; its cases as the serial session's
    assert history_rows(xdist_dir / "history.sqlite") == history_rows(serial_dir / "history.sqlite")
    assert len(history_rows(xdist_dir / "history.sqlite")) == 17
    with sqlite3.connect(xdist_dir / "history.sqlite") as conn:
        assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 1
    summary = stable_text((xdist_dir / "summary.md").read_text("utf-8"))
    assert summary == stable_text((serial_dir / "summary.md").read_text("utf-8"))
    assert "### Connic: 9/17 cases passed" in summary and "- output: " in summary

    # the terminal: what the controller writes is the serial session's
    assert results_rows(out) == results_rows(plain.stdout.str())
    assert len(results_rows(out)) == 1 + 17  # the header and one row per case
    for name in ("connic compare", "connic coverage"):
        assert section(out, name) == section(plain.stdout.str(), name), name
    assert out.count("- connic compare -") == 1  # computed once, by the controller
    assert failure_reports(out) == failure_reports(plain.stdout.str())
    assert len(failure_reports(out)) == 9
    assert short_summary(out) == short_summary(plain.stdout.str())
    # each warning once, where the serial session shows it: Connic's load warnings (every worker
    # loads the project), a case's own; the one a run of calc meets is met by each worker (once a
    # process: by the first case of calc it runs) and shown once, by the controller, at the first
    # case that met it: the only one whose location may differ
    blocks, serial_blocks = warning_blocks(out), warning_blocks(plain.stdout.str())
    assert blocks.keys() == serial_blocks.keys()
    assert {m: w for m, w in blocks.items() if not any(RUN_WARNING in line for line in m)} == {
        m: w for m, w in serial_blocks.items() if not any(RUN_WARNING in line for line in m)}
    for message in LOAD_WARNINGS:
        assert out.count(message) == 1 and len(where_met(blocks, message)) == 1, message
    assert out.count(RUN_WARNING) == 1 and len(where_met(blocks, RUN_WARNING)) == 1
    # located at the user's files and lines, never at the plugin's
    distributed.stdout.fnmatch_lines([
        ("*agents/desk.yaml:8: ConnicLoadWarning: agents/desk.yaml: tools entry 'api:crm.contacts_get' *"
         "--connic-api-spec crm=PATH, or apis/crm.yaml*"),
    ])
    for located in (f"agents/typos.yaml:6: UnknownAgentKeyWarning: {LOAD_WARNINGS[0]}",
                    f"agents/loose.yaml:6: ConnicLoadWarning: {LOAD_WARNINGS[3]}",
                    f"middleware/typos.py:2: ConnicLoadWarning: {LOAD_WARNINGS[5]}",
                    f"middleware/calc.py:1: ConnicLoadWarning: {RUN_WARNING}"):
        distributed.stdout.fnmatch_lines([f"  {located}*"])
    assert "pytest_connic" not in "".join(line for where in blocks.values() for line in where)
    distributed.stdout.no_fnmatch_line("*PydanticDeprecatedSince20*")  # the SDK's, under -W always
    for result in (plain, distributed):  # nor printed by the SDK as the coverage loads the agents
        result.stdout.no_fnmatch_line("*Warning: Could not load output schema*")

    # the huge output: cut once at the report limit in every artifact, checked whole
    for name, size in artifact_sizes(xdist_dir).items():
        assert size < 2 * 1024 * 1024, name  # a few copies of 64 KiB, never 8 MiB
    huge_traces = sorted((xdist_dir / "traces").glob("tests.huge__*"))
    assert len(huge_traces) == 2
    for text in (json.dumps(xdist_json, ensure_ascii=False), (xdist_dir / "report.html").read_text("utf-8"),
                 *(p.read_text("utf-8") for p in huge_traces)):
        assert CUT in text
        assert "cut]" not in text.replace(CUT, "")  # cut once, never a cut of a cut
    assert len(out) < 1024 * 1024

    # the secrets only the workers load (the env file) and the environment's: masked everywhere,
    # in every form; masked, not absent
    texts = artifact_texts(xdist_dir) | {"terminal": out + distributed.stderr.str()}
    assert [(name, form) for name, text in texts.items() for secret in SECRETS for form in forms(secret)
            if form in text] == []
    for name in ("terminal", "junit.xml", "report.json", "report.html"):
        assert "***" in texts[name], name
    assert "\\*\\*\\*" in texts["summary.md"]  # Markdown escapes the mask
    for name in ("terminal", "junit.xml", "report.json", "report.html"):  # the encoded forms, masked there
        assert "cb?token=***" in texts[name] and "Basic YWxpY2U6***" in texts[name], name
    assert {"token": "***", "name": "***"} in [r["input"] for c in xdist_json["cases"] for r in c["runs_detail"]]

    # -v: a worker cannot write to the terminal while its runs execute; the runs follow the result
    distributed.stdout.fnmatch_lines([
        "[[]gw?] [[]*] PASSED tests/calc.yaml::adds*",
        "  run 1/3 passed (*ms)",
        "  run 2/3 passed (*ms)",
        "  run 3/3 passed (*ms)",
    ])
    distributed.stdout.fnmatch_lines([
        "[[]gw?] [[]*] FAILED tests/calc.yaml::wrong sum*",
        "  run 1/4 failed (*ms): expected_result not satisfied: output.sum == 11 where output.sum = 10",
    ])


def test_infrastructure_error_exits_2_under_xdist(calc: ConnicProject) -> None:
    write_mixed(calc)
    calc.write("conftest.py", PROVIDER_DOWN)
    result = calc.run("-n", "2", "--dist", "loadfile", "-v", "--connic-json", "report.json")
    out = result.stdout.str()
    # the provider fails on a worker; the controller learns of it from the worker's output
    assert worker_of(out, "tests/calc.yaml::adds") in ("gw0", "gw1")
    assert result.ret == 2
    # -v under xdist: the result line, then the runs; the error's report is the serial one's
    result.stdout.fnmatch_lines(["[[]gw?] [[]*] ERROR tests/calc.yaml::adds *",
                                 *["  run ?/3 error (*ms): provider unavailable: HTTP 503 from api.example"] * 3])
    result.stdout.fnmatch_lines([
        "*ERROR at call of calc::adds*",
        "tests/calc.yaml:4: case 'adds' (calc) hit an infrastructure error",
        "    provider unavailable: HTTP 503 from api.example",
    ])
    data = json.loads((calc.root / "report.json").read_text("utf-8"))
    assert data["status"] == "error"
    assert [c["status"] for c in data["cases"] if c["test_name"] == "adds"] == ["error"]
