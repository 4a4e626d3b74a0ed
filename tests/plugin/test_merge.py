"""Merging shards' reports (docs/ci.md "Merging shards"): two pytest-split shards, merged with
``python -m pytest_connic merge``, give the reports of a single run, case by case."""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from helpers.project import ConnicProject
from pytest_connic.__main__ import pytest_command

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

pytest.importorskip("pytest_split")

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
STAMP = re.compile(r"\d{4}-\d\d-\d\dT[0-9:.+]+")
#: what differs between two runs of the same cases: run ids, clocks and durations
TIMING = re.compile(r"\(\d+ms\)|\"duration_ms\":\s*[0-9.]+|duration_ms=[0-9.]+")


def _norm(text: str) -> str:
    return TIMING.sub("<t>", STAMP.sub("<ts>", UUID.sub("<id>", text)))


def _suites(calc: ConnicProject) -> None:
    for s in range(3):
        calc.suite(
            f"echo_{s}",
            "agent: echo\ntests:\n"
            + "".join(
                f"  - name: 'case {c} :: [{s}]'\n    payload: '{{\"n\": {c}}}'\n    runs: 2\n"
                f"    expected_result: output.got.n == {c if (s + c) % 4 else -1}\n"
                for c in range(4)
            )
            + ("  - name: invalid\n    runs: 1\n" if s == 1 else ""),
        )


#: keys whose values are clocks and durations
TIMING_KEYS = frozenset({"duration_ms", "median_latency_ms", "timestamp"})


def _case_view(value: Any) -> Any:
    """A case entry without run ids, clocks and durations (span metadata included)."""
    if isinstance(value, dict):
        return {k: _case_view(json.loads(v) if k == "metadata_json" else v)
                for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [_case_view(v) for v in value]
    return _norm(value) if isinstance(value, str) else value


def _junit(path: Any) -> tuple[dict[str, str], list[tuple[Any, ...]]]:
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    counts = {k: suite.get(k, "") for k in ("tests", "failures", "errors", "skipped")}
    cases = []
    for case in suite.iter("testcase"):
        props = tuple((p.get("name"), _norm(p.get("value", ""))) for p in case.iter("property")
                      if p.get("name") != "median_latency_ms")
        children = tuple((c.tag, _norm(c.get("message", "")), _norm(c.text or ""))
                         for c in case if c.tag != "properties")
        cases.append((case.get("classname"), case.get("name"), props, children))
    return counts, cases


def test_two_shards_merged_equal_a_single_run(calc: ConnicProject) -> None:
    _suites(calc)
    reports = ("--connic-json={}.json", "--connic-html={}.html", "--junitxml={}.xml",
               "--connic-coverage-json={}-coverage.json")
    full = calc.run(*(r.format("full") for r in reports), "tests")
    shards = [calc.run("--splits=2", f"--group={g}", f"--connic-json=shard-{g}.json", "tests")
              for g in (1, 2)]
    assert full.ret == 1 and all(s.ret == 1 for s in shards)
    command = pytest_command(["merge", "shard-*.json", "--json", "all.json", "--html", "all.html",
                              "--junitxml", "all.xml", "--coverage-json", "all-coverage.json"])
    assert command[:3] == [sys.executable, "-m", "pytest"]
    merged = calc.pytester.run(sys.executable, "-m", "pytest_connic", "merge", "shard-*.json", "--json",
                               "all.json", "--html", "all.html", "--junitxml", "all.xml", "--coverage-json",
                               "all-coverage.json")
    assert merged.ret == full.ret
    merged.stdout.fnmatch_lines(["connic: merging 13 cases of 2 shard report(s); no case runs",
                                 "*3 failed, 9 passed, 1 error*"])

    def load(name: str) -> Any:
        return json.loads((calc.root / name).read_text("utf-8"))

    single, combined = load("full.json"), load("all.json")
    parts = [load(f"shard-{g}.json") for g in (1, 2)]
    assert all(p["cases"] for p in parts), "both shards ran cases"
    # the merge itself loses nothing: every case exactly as its shard wrote it, in a single run's order
    assert sorted(json.dumps(c) for p in parts for c in p["cases"]) == sorted(json.dumps(c) for c in combined["cases"])
    # and it is the single run, case by case, up to run ids and timings
    assert [c["nodeid"] for c in combined["cases"]] == [c["nodeid"] for c in single["cases"]]
    for one, other in zip(single["cases"], combined["cases"]):
        assert _case_view(one) == _case_view(other), one["nodeid"]
    assert {k: v for k, v in combined.items() if k != "cases"} == {k: v for k, v in single.items() if k != "cases"}

    single_counts, single_cases = _junit(calc.root / "full.xml")
    merged_counts, merged_cases = _junit(calc.root / "all.xml")
    assert merged_cases == single_cases
    assert merged_counts == single_counts == {"tests": "13", "failures": "3", "errors": "1", "skipped": "0"}

    assert load("all-coverage.json") == load("full-coverage.json")

    def summary(name: str) -> str:
        found = re.search(r'<p class="summary" id="summary">(.*?)</p>', (calc.root / name).read_text("utf-8"))
        assert found is not None
        return found.group(1)

    assert summary("all.html") == summary("full.html")
    assert "case 0 :: [1]" in (calc.root / "all.html").read_text("utf-8")


@pytest.mark.usefixtures("wide_terminal")
def test_merge_says_what_it_cannot_merge(calc: ConnicProject) -> None:
    _suites(calc)
    calc.run("--connic-json=one.json", "tests/echo_0.yaml")
    missing = calc.run("--connic-merge", "nope-*.json")
    missing.stderr.fnmatch_lines(["ERROR: --connic-merge nope-*.json: no file matches; nothing was merged*"])
    both = calc.run("--connic-merge", "one.json", "--connic-merge", "./one.json", "--connic-json=x.json")
    assert both.ret == 1  # the same file named twice is read once
    calc.write("two.json", (calc.root / "one.json").read_text("utf-8"))
    twice = calc.run("--connic-merge", "one.json", "--connic-merge", "two.json")
    twice.stderr.fnmatch_lines([("ERROR: *two.json: case tests/echo_0.yaml::case 0 %3A%3A %5B0%5D is also in"
                                " *one.json: shards must not overlap*")])
    workers = calc.run("--connic-merge", "one.json", "-n", "2")
    workers.stderr.fnmatch_lines(["ERROR: --connic-merge runs no case, so it takes no workers: run it with -n 0"])
    calc.write("bad.json", "[1, 2]")
    bad = calc.run("--connic-merge", "bad.json")
    bad.stderr.fnmatch_lines(['ERROR: *bad.json: not a --connic-json report (no "cases" list)*'])
    data = json.loads((calc.root / "one.json").read_text("utf-8"))
    data["ab"] = {"variant": "x"}
    calc.write("ab.json", json.dumps(data))
    noted = calc.run("--connic-merge", "ab.json")
    noted.stdout.fnmatch_lines(["connic: *ab.json: not merged: ab (only the cases are)"])
    other_env = dict(data, environment_id="staging")
    del other_env["ab"]
    other_env["cases"] = []
    calc.write("env.json", json.dumps(other_env))
    envs = calc.run("--connic-merge", "one.json", "--connic-merge", "env.json")
    envs.stderr.fnmatch_lines([("ERROR: the shards ran in different environments (--connic-env): None (*one.json),"
                               " 'staging' (*env.json)*")])


def test_a_merge_writes_the_history_a_single_run_would(calc: ConnicProject) -> None:
    import sqlite3

    _suites(calc)
    calc.run("--connic-history=single.sqlite", "tests")
    for g in (1, 2):
        calc.run("--splits=2", f"--group={g}", f"--connic-json=shard-{g}.json",
                            f"--connic-history=shard-{g}.sqlite", "tests")
    merged = calc.run("--connic-merge", "shard-*.json", "--connic-history", "merged.sqlite")
    assert merged.ret == 1

    def cases(name: str) -> list[tuple[Any, ...]]:
        with sqlite3.connect(calc.root / name) as conn:
            return list(conn.execute(
                "SELECT nodeid, verdict, successes, executed, runs, cassette_digest, config_digest FROM cases "
                "ORDER BY nodeid"))

    assert len(cases("merged.sqlite")) == 13
    assert cases("merged.sqlite") == cases("single.sqlite")
