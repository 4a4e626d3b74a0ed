"""Every report is the same with ``-n 2`` as without: workers' outcomes are merged on the controller.

Both runs are in-process pytester sessions; under ``-n 2`` the controller is the in-process session
and its two workers are processes, which is where the transport is.
``--dist loadfile`` gives the first two suites to different workers, which the tests check from
the ``-v`` output, so a report that forgot a worker's cases could not pass.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from junitparser import JUnitXml, Properties

from helpers.mixed import PROVIDER_DOWN, write_mixed
from helpers.project import ConnicProject

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?")
#: keys whose values differ from one run to the next (run ids are replaced wherever they occur)
VOLATILE = {"duration_ms", "median_latency_ms", "timestamp"}
OUTPUTS = ("--connic-json", "report.json", "--junitxml", "junit.xml", "--connic-html", "report.html",
           "--connic-traces", "traces")


def stable_text(text: str) -> str:
    """``text`` without run ids, timestamps and durations."""
    text = TIMESTAMP.sub("<ts>", UUID.sub("<id>", text))
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
                   for r in case if r.tag in ("failure", "error", "skipped")]
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
    """The page without its data and its header's run context (command, time), and the data."""
    html = re.sub(r'<dl class="context" id="context">.*?</dl>', "", path.read_text("utf-8"), flags=re.DOTALL)
    head, rest = html.split('<script type="application/json" id="connic-report">')
    data, tail = rest.split("</script>", 1)
    return head + tail, stable(json.loads(data))


def trace_files(directory: Path) -> dict[str, Any]:
    return {p.name: stable(json.loads(p.read_text("utf-8"))) for p in sorted(directory.iterdir())}


def _outputs(directory: Path) -> list[str]:
    return [str(directory / v) if not v.startswith("--") else v for v in OUTPUTS]


def test_reports_are_identical_with_and_without_xdist(calc: ConnicProject) -> None:
    write_mixed(calc)
    plain_dir, xdist_dir = calc.root / "plain", calc.root / "xdist"
    plain = calc.run("-p", "no:xdist", *_outputs(plain_dir))
    distributed = calc.run("-n", "2", "--dist", "loadfile", "-v", *_outputs(xdist_dir))
    out = distributed.stdout.str()
    assert worker_of(out, "tests/b_multiply.yaml::multiplies") != worker_of(out, "tests/calc.yaml::adds")
    assert plain.ret == distributed.ret == 1
    plain.assert_outcomes(passed=3, failed=2, errors=1)
    distributed.assert_outcomes(passed=3, failed=2, errors=1)

    plain_json = json.loads((plain_dir / "report.json").read_text("utf-8"))
    xdist_json = json.loads((xdist_dir / "report.json").read_text("utf-8"))
    assert [c["nodeid"] for c in xdist_json["cases"]] == [c["nodeid"] for c in plain_json["cases"]]
    assert len(xdist_json["cases"]) == 6 and xdist_json["summary"]["errors"] == 2
    assert stable(xdist_json) == stable(plain_json)
    assert sum(len(c["runs_detail"]) for c in xdist_json["cases"]) == 9

    plain_junit, xdist_junit = junit_content(plain_dir / "junit.xml"), junit_content(xdist_dir / "junit.xml")
    assert len(xdist_junit["cases"]) == 6
    assert xdist_junit == plain_junit
    assert junitparser_view(xdist_dir / "junit.xml") == junitparser_view(plain_dir / "junit.xml")

    assert trace_files(xdist_dir / "traces") == trace_files(plain_dir / "traces")
    assert len(list((xdist_dir / "traces").iterdir())) == 9
    assert html_parts(xdist_dir / "report.html") == html_parts(plain_dir / "report.html")
    assert results_rows(out) == results_rows(plain.stdout.str())
    assert len(results_rows(out)) == 1 + 6  # the header and one row per case

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
    data = json.loads((calc.root / "report.json").read_text("utf-8"))
    assert data["status"] == "error"
    assert [c["status"] for c in data["cases"] if c["test_name"] == "adds"] == ["error"]
