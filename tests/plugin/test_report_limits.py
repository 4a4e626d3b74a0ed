"""Bounded reports: a huge value is kept in reports once per place, cut at
``connic_report_value_limit`` with a marker saying how much was cut; the checks see all of it."""

from __future__ import annotations

import json

import pytest

from helpers.project import ConnicProject

SIZE = 8 * 1024 * 1024  # 8 MiB of tool output
TOOL = f'''
def big(payload: dict) -> dict:
    """A tool agent's body: a huge output whose end only the checks can see."""
    return {{"text": "x" * ({SIZE} - 3) + "end", "size": {SIZE}}}
'''
SUITE = f"""
agent: big
tests:
  - name: sees the whole value
    payload: go
    expected_result: 'output.text[{SIZE - 3}:] == "end" and output.size == {SIZE}'
  - name: fails on the whole value
    payload: go
    expected_result: 'output.text[{SIZE - 3}:] == "END"'
"""
ARTIFACTS = ("--connic-json", "report.json", "--connic-html", "report.html", "--connic-traces", "traces",
             "--junitxml", "junit.xml", "-o", "junit_logging=all")


@pytest.fixture
def big(project: ConnicProject) -> ConnicProject:
    project.tool("bigtool", TOOL)
    project.agent("big", type="tool", tool_name="bigtool.big")
    project.suite("big", SUITE)
    return project


def sizes(project: ConnicProject) -> dict[str, int]:
    out = {name: (project.root / name).stat().st_size for name in ("report.json", "report.html", "junit.xml")}
    out.update({p.name: p.stat().st_size for p in (project.root / "traces").iterdir()})
    return out


def test_a_huge_output_is_cut_in_every_report_and_checked_whole(big: ConnicProject) -> None:
    """Cut identically under ``-n 2``: the equivalence session (tests/plugin/test_xdist_reports.py)."""
    result = big.run(*ARTIFACTS)
    result.assert_outcomes(passed=1, failed=1)
    marker = f"… [truncated: {SIZE} characters, {SIZE - 65536} cut]"
    for name, size in sizes(big).items():
        assert size < 2 * 1024 * 1024, name  # a few copies of 64 KiB, never 8 MiB
    report = json.loads((big.root / "report.json").read_text("utf-8"))
    texts = [json.dumps(report, ensure_ascii=False), (big.root / "report.html").read_text("utf-8")]
    texts += [p.read_text("utf-8") for p in (big.root / "traces").iterdir()]
    for text in texts:
        assert marker in text
        assert "cut]" not in text.replace(marker, "")  # cut once, never a cut of a cut
    assert len(result.stdout.str()) < 1024 * 1024


def test_the_limit_is_an_ini_key(big: ConnicProject) -> None:
    big.pytester.makeini("[pytest]\nconnic_report_value_limit = 1000\n")
    result = big.run("--connic-json", "report.json", "--connic-traces", "traces")
    result.assert_outcomes(passed=1, failed=1)
    text = (big.root / "report.json").read_text("utf-8")
    assert f"… [truncated: {SIZE} characters, {SIZE - 1000} cut]" in text
    assert len(text) < 100_000


def test_a_bad_limit_names_its_source(big: ConnicProject) -> None:
    result = big.run("-o", "connic_report_value_limit=0")
    result.stderr.fnmatch_lines(["*invalid value '0' from ini connic_report_value_limit: must be at least 1*"])
