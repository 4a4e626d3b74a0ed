"""Reports through real pytest runs: terminal, --connic-json, JUnit XML, HTML, traces, exit codes."""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml, Properties

from helpers.chromium import Visible, run_chromium
from helpers.mixed import MIXED_IDS, PROVIDER_DOWN, write_mixed
from helpers.project import ConnicProject

PROPERTY_NAMES = [
    "runs", "successes", "success_threshold", "pass_rate", "wilson_low", "wilson_high", "median_latency_ms",
    "input_tokens", "output_tokens", "cost", "run_ids", "skipped_runs", "recorded_runs", "replay",
]
CONNIC_CASE_KEYS = [
    "agent_name", "test_name", "passed", "successes", "runs", "success_threshold", "failure_reason",
    "agent_run_ids", "agent_run_passed",
]

def junit_cases(path: Path) -> dict[str, ET.Element]:
    root = ET.parse(path).getroot()
    return {f"{c.get('classname')}::{c.get('name')}": c for c in root.iter("testcase")}


def properties(case: ET.Element) -> list[tuple[str, str]]:
    return [(p.get("name", ""), p.get("value", "")) for p in case.iter("property")]


# -- terminal -------------------------------------------------------------------------------------


def test_terminal_table_failure_details_and_summary_line(calc: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # wide enough for every column (80 hides the extras)
    monkeypatch.delenv("CI", raising=False)
    write_mixed(calc)
    result = calc.run()
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "*= connic results =*",
        "*│ Result * │ Test * │ Runs │ Threshold │ Median latency │ Tokens *│",
        "*│  PASS * │ calc::multiplies * │ 1/1  │ 100%      │ *ms * │ 50 in / 5 out *│",
        "*│  PASS * │ calc::adds * │ 3/3  │ 100%      │ *ms * │ 300 in / 27 out *│",
        "*│  FAIL * │ calc::wrong sum * │ 0/4  │ 100%      │ *ms * │ 400 in / 36 out *│",
        "*│  ERROR  │ calc::missing fixture *│ 0/3  │ 100%      │ — * │ — *│",
        "*│  ERROR  │ calc::invalid * │ 0/3  │ 100%      │ — * │ — *│",
        "*│  PASS * │ echo::echoes * │ 1/1  │ 100%      │ *ms * │ 0 in / 0 out *│",
        "  → Failure details: in the failure report of each case above",
        "    ✗ calc::wrong sum (tests/calc.yaml:9)",
        "    ✗ calc::missing fixture (tests/calc.yaml:13)",
        "    ✗ calc::invalid (tests/calc.yaml:16)",  # the case starts at line 16, its mistake is on 18
        "3/6 cases passed.",
        "*short test summary info*",
    ])
    # the failure report of a case: the one-line summary, then at most three failed runs
    text = result.stdout.str()
    report = text.split("_ calc::wrong sum _")[1].split("_ calc::missing fixture _")[0]
    assert report.lstrip("_ \n").startswith(
        "tests/calc.yaml:9: case 'wrong sum' (calc) failed\n    0/4 runs passed, threshold 100% needs 4: "
        "expected_result not satisfied: output.sum == 11 where output.sum = 10\n")
    assert report.count("output.sum == 11") == 1  # said once, not again in each run and its trace
    assert report.count("        Failed:  as above") == 3
    result.stdout.fnmatch_lines([
        "FAILED tests/calc.yaml::wrong sum - expected_result not satisfied: output.sum*"])
    assert len(re.findall(r"^      Run \S+$", report, re.MULTILINE)) == 3
    assert "      … and 1 more failed run(s) not shown" in report
    assert "          ✓ add(a=4, b=6) → {\"sum\":10}" in report
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


@pytest.mark.usefixtures("wide_terminal")
def test_tb_no_puts_the_failed_runs_in_the_summary(calc: ConnicProject) -> None:
    write_mixed(calc)
    result = calc.run("--tb=no", "-q")
    # up to pytest's own short summary (which, on CI, repeats each failure's whole message)
    summary = result.stdout.str().split("= connic results =")[1].split("short test summary info")[0]
    assert "  → Failure details:" in summary
    assert len(re.findall(r"^      Run \S+$", summary, re.MULTILINE)) == 3
    assert "      … and 1 more failed run(s) not shown" in summary
    assert "    ✗ calc::missing fixture: missing fixture: tests/files/nope.txt does not exist" in summary
    assert summary.count("tests/files/nope.txt does not exist") == 1  # no "Setup error:" repeating it


def test_verbose_shows_each_run_as_it_finishes(calc: ConnicProject) -> None:
    write_mixed(calc)
    result = calc.run("-v", "--connic-concurrency", "1", "-k", "adds or wrong")
    result.stdout.fnmatch_lines([
        "tests/calc.yaml::adds ",
        "  run 1/3 passed (*ms)",
        "  run 2/3 passed (*ms)",
        "  run 3/3 passed (*ms)",
        "PASSED*",
        "tests/calc.yaml::wrong sum ",
        "  run 1/4 failed (*ms): expected_result not satisfied: output.sum == 11 where output.sum = 10",
        "  run 2/4 failed*",
        "  run 3/4 failed*",
        "  run 4/4 failed*",
        "FAILED*",
    ])
    quiet = calc.run("-k", "adds or wrong")
    quiet.stdout.no_fnmatch_line("  run */*")


# -- --connic-json ----------------------------------------------------------------------------------


def test_json_report_has_connics_shape_traces_and_wilson(calc: ConnicProject) -> None:
    write_mixed(calc)
    result = calc.run("--connic-json", "out/report.json")
    data = json.loads((calc.root / "out/report.json").read_text("utf-8"))
    assert list(data)[:5] == ["status", "test_run_id", "deployment_id", "environment_id", "cases"]
    assert data["status"] == "failed" and result.ret == 1
    assert data["summary"] == {"cases": 6, "passed": 3, "failed": 1, "errors": 2}
    cases = {c["nodeid"]: c for c in data["cases"]}
    assert list(cases) == MIXED_IDS
    adds = cases["tests/calc.yaml::adds"]
    assert list(adds)[: len(CONNIC_CASE_KEYS)] == CONNIC_CASE_KEYS
    assert adds["passed"] is True and adds["successes"] == 3 and adds["agent_run_passed"] == [True] * 3
    assert adds["wilson_95"] == [0.438503, 1.0]
    assert (adds["recorded_runs"], adds["replayed_runs"], adds["replay_note"]) == (3, 3, None)
    assert adds["tokens"] == {"input": 300, "output": 27}
    run = adds["runs_detail"][0]
    assert [c["ref"] for c in run["tool_calls"]] == ["calc.add"]
    assert any(s["name"] == "tool_call" and json.loads(s["metadata_json"])["tool_name"] == "add"
               for s in run["traces"])
    wrong = cases["tests/calc.yaml::wrong sum"]
    assert wrong["status"] == "failed" and wrong["failed_runs"]["total_failed"] == 4
    assert len(wrong["failed_runs"]["shown"]) == 3
    assert wrong["failed_runs"]["shown"][0]["output"] == '{"sum": 10}'
    assert wrong["failure_reason"] == "expected_result not satisfied: output.sum == 11 where output.sum = 10"
    invalid = cases["tests/calc.yaml::invalid"]
    assert invalid["status"] == "error" and invalid["agent_run_ids"] == []
    assert invalid["setup_error"].startswith("tests/calc.yaml:18:22: tests[3].expected_result")
    missing = cases["tests/calc.yaml::missing fixture"]
    assert missing["status"] == "error" and "tests/files/nope.txt does not exist" in missing["setup_error"]


# -- JUnit XML ------------------------------------------------------------------------------------


def test_junit_xml_one_testcase_per_case_with_properties(calc: ConnicProject) -> None:
    write_mixed(calc)
    # the properties come with the families whose schema has them in a testcase (docs/ci.md)
    calc.run("--junitxml", "junit.xml", "--connic-json", "report.json", "-o", "junit_family=xunit1")
    report = json.loads((calc.root / "report.json").read_text("utf-8"))
    run_ids = {c["test_name"]: ",".join(c["agent_run_ids"]) for c in report["cases"]}
    cases = junit_cases(calc.root / "junit.xml")
    assert sorted(cases) == sorted(i.replace("tests/", "tests.") for i in MIXED_IDS)
    for key, case in cases.items():
        assert [n for n, _ in properties(case)] == PROPERTY_NAMES, key
    adds = dict(properties(cases["tests.calc.yaml::adds"]))
    cost = next(c["cost"] for c in report["cases"] if c["test_name"] == "adds")  # LiteLLM's price, if installed
    assert float(adds["cost"]) == pytest.approx(cost, abs=1e-8)
    assert adds | {"median_latency_ms": "x", "cost": "x"} == {
        "runs": "3", "successes": "3", "success_threshold": "100", "pass_rate": "1", "wilson_low": "0.438503",
        "wilson_high": "1", "median_latency_ms": "x", "input_tokens": "300", "output_tokens": "27", "cost": "x",
        "run_ids": run_ids["adds"], "skipped_runs": "0", "recorded_runs": "3", "replay": ""}
    assert dict(properties(cases["tests.calc.yaml::invalid"]))["pass_rate"] == ""
    failure = cases["tests.calc.yaml::wrong sum"].find("failure")
    assert failure is not None
    # the message is the one-line reason; the element's text the whole report
    assert failure.get("message", "") == "expected_result not satisfied: output.sum == 11 where output.sum = 10"
    assert (failure.text or "").startswith("tests/calc.yaml:9: case 'wrong sum' (calc) failed\n    0/4 runs passed")
    missing = cases["tests.calc.yaml::missing fixture"].find("failure")
    assert missing is not None
    assert missing.get("message", "") == "missing fixture: tests/files/nope.txt does not exist"
    error = cases["tests.calc.yaml::invalid"].find("error")
    assert error is not None and "tests/calc.yaml:18:22: tests[3].expected_result" in error.get("message", "")

    # junitparser, a real consumer of the file
    xml = JUnitXml.fromfile(str(calc.root / "junit.xml"))
    seen = {}
    for suite in xml:
        assert (suite.tests, suite.failures, suite.errors) == (6, 2, 1)
        for case in suite:
            props = [(p.name, p.value) for group in case.iterchildren(Properties) for p in group]
            seen[case.name] = ([type(r).__name__ for r in case.result], props)
    assert seen["wrong sum"][0] == ["Failure"] and seen["invalid"][0] == ["Error"]
    assert seen["adds"][0] == [] and seen["adds"][1] == properties(cases["tests.calc.yaml::adds"])
    assert all(isinstance(r, (Failure, Error)) for s in xml for c in s for r in c.result)


SCHEMA = Path(__file__).resolve().parent / "data" / "junit-10.xsd"


def test_the_default_junit_file_validates_against_pytests_schema(calc: ConnicProject) -> None:
    """pytest's default ``junit_family`` is ``xunit2``, whose schema (``junit-10.xsd``, as pytest's
    own tests validate it) has no ``<properties>`` in a ``<testcase>``: by default the cases carry
    none, and the file validates (a passing and a failing case; pytest writes an error as
    ``<error>``, which this schema spells ``<errors>``, so none is here)."""
    xmlschema = pytest.importorskip("xmlschema")
    calc.suite("echo", """
        tests:
          - name: passes
            payload: '{"x": 1}'
            expected_result: output.got.x == 1
          - name: fails
            payload: '{"x": 1}'
            expected_result: output.got.x == 2
    """)
    result = calc.run("--junitxml", "junit.xml")
    result.assert_outcomes(passed=1, failed=1)
    cases = junit_cases(calc.root / "junit.xml")
    assert len(cases) == 2 and all(properties(case) == [] for case in cases.values())
    errors = [str(e) for e in xmlschema.XMLSchema(str(SCHEMA)).iter_errors(str(calc.root / "junit.xml"))]
    assert errors == []


@pytest.mark.parametrize(("family", "ini", "expected"), [
    (None, None, False), ("xunit2", None, False), ("xunit1", None, True), ("legacy", None, True),
    ("xunit2", "true", True), ("xunit1", "false", False),
])
def test_junit_properties_follow_the_family_unless_the_ini_key_says(
        pytester: pytest.Pytester, family: str | None, ini: str | None, expected: bool) -> None:
    from pytest_connic.plugin.options import Settings

    args = [*(("-o", f"junit_family={family}") if family else ()),
            *(("-o", f"connic_junit_properties={ini}") if ini else ())]
    settings = Settings.from_config(pytester.parseconfig(*args))
    assert settings.junit_properties is expected
    assert settings.source("junit_properties") == ("ini connic_junit_properties" if ini else "default")


def test_bad_junit_properties_value_is_a_usage_error(calc: ConnicProject) -> None:
    write_mixed(calc)
    calc.pytester.makeini("[pytest]\nconnic_junit_properties = maybe\n")
    result = calc.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*invalid value 'maybe' from ini connic_junit_properties: expected true or false*"])


# -- traces, exit codes -----------------------------------------------------------------------------


def test_traces_dir_has_one_file_per_run(calc: ConnicProject) -> None:
    write_mixed(calc)
    calc.run("--connic-traces", "traces")
    names = sorted(p.name for p in (calc.root / "traces").iterdir())
    assert names == [
        "tests.b_multiply__multiplies__run0.json",
        *(f"tests.calc__adds__run{i}.json" for i in range(3)),
        *(f"tests.calc__wrong_sum__run{i}.json" for i in range(4)),
        "tests.echo__echoes__run0.json",
    ]
    doc = json.loads((calc.root / "traces/tests.calc__adds__run1.json").read_text("utf-8"))
    assert doc["nodeid"] == "tests/calc.yaml::adds" and doc["run"]["index"] == 1
    assert [s["name"] for s in doc["traces"]].count("tool_call") == 1


def test_infrastructure_error_exits_2_and_marks_the_report(calc: ConnicProject) -> None:
    write_mixed(calc)
    calc.write("conftest.py", PROVIDER_DOWN)
    result = calc.run("--connic-json", "report.json")
    assert result.ret == 2
    result.stdout.fnmatch_lines([
        "*tests/calc.yaml:4: case 'adds' (calc) hit an infrastructure error", "    provider unavailable: HTTP 503*"])
    data = json.loads((calc.root / "report.json").read_text("utf-8"))
    assert data["status"] == "error"
    adds = next(c for c in data["cases"] if c["test_name"] == "adds")
    assert adds["status"] == "error" and adds["infrastructure_error"].startswith("provider unavailable")


def test_failures_without_infrastructure_errors_exit_1(calc: ConnicProject) -> None:
    write_mixed(calc)
    (calc.root / "cassettes/calc/adds.yaml").unlink()  # the suite author's to fix: exit 1, not 2
    result = calc.run("-k", "adds or multiplies")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["tests/calc.yaml:4: case 'adds' (calc) failed",
                                 "*: no cassette for this case: expected cassettes/calc/adds.yaml;*"])  # relative to the project
    assert calc.run("-k", "multiplies or echoes").ret == 0


# -- HTML, in a real browser ----------------------------------------------------------------------


def test_html_report_of_a_real_run_in_chromium(chromium: str, calc: ConnicProject, tmp_path: Path) -> None:
    write_mixed(calc)
    calc.run("--connic-html", "report/index.html", "--connic-json", "report.json")
    page = calc.root / "report/index.html"
    html = page.read_text("utf-8")
    embedded = html.split('<script type="application/json" id="connic-report">')[1].split("</script>")[0]
    assert json.loads(embedded) == json.loads((calc.root / "report.json").read_text("utf-8"))

    dom = run_chromium(chromium, tmp_path, page.as_uri(), "--dump-dom")
    assert 'data-ready="true"' in dom, "the report script did not finish"
    parsed = Visible()
    parsed.feed(dom)
    text = parsed.visible_text()
    for name in ("calc::adds", "calc::wrong sum", "calc::invalid", "calc::missing fixture", "echo::echoes"):
        assert name in text
    assert {"PASS", "FAIL", "ERROR"} <= set(parsed.badges)
    assert "expected_result not satisfied: output.sum == 11 where output.sum = 10" in text
    assert "tests/files/nope.txt does not exist" in text
    assert "6 of 6 cases shown" in dom

    failing = Visible()
    failing.feed(run_chromium(chromium, tmp_path, page.as_uri() + "#failing", "--dump-dom"))
    assert "calc::wrong sum" in failing.visible_text()
    assert "calc::adds" not in failing.visible_text() and "echo::echoes" not in failing.visible_text()


# ========== no secret in any report (folded from test_hardening_secrets.py) =================================
# Scan everything: the values of a ``--connic-env`` file and a provider key, echoed by a tool into
# its output, its error, a tool parameter and the run context, appear in no file the session writes
# (JSON, HTML, JUnit, traces, recorded cassettes) and not in its terminal output, with ``-n 2``.

pytestmark = pytest.mark.timeout(240)

TOKEN = "s3cr3t-env-token-4f9a1c"
PLAIN = "plain-env-value-7b2e"  # not secret-looking by name: masked because it is in the env file
PROVIDER_KEY = "sk-provider-key-0d8e5b3a"
SECRETS = (TOKEN, PLAIN, PROVIDER_KEY)

TOOLS = '''
import os


def leak(value: str, context) -> dict:
    """Echo the secrets everywhere it can.

    Args:
        value: whatever the model passed
    """
    token = os.environ["API_TOKEN"]
    context["token"] = token
    context["nested"] = {"plain": os.environ["PLAIN_NAME"], "key": os.environ["OPENAI_API_KEY"]}
    return {"echo": token, "param": value, "plain": os.environ["PLAIN_NAME"], "key": os.environ["OPENAI_API_KEY"]}


def fail(value: str) -> dict:
    """Raise with the secret in the message.

    Args:
        value: whatever the model passed
    """
    raise ValueError(f"bad token {os.environ['API_TOKEN']} / {value}")
'''

#: while recording, the "provider" asks for the tools with the secret as a parameter and answers
#: with the secrets in its final output
CONFTEST = '''
import os

import pytest_connic.models.live as live
from pytest_connic import ModelResponse, ToolCallRequest


class Provider:
    def __init__(self, **_):
        pass

    async def complete(self, request):
        token, tools = os.environ["API_TOKEN"], [m for m in request.messages if m["role"] == "tool"]
        if not tools:
            return ModelResponse(tool_calls=[ToolCallRequest("1", "leak", {"value": token}),
                                             ToolCallRequest("2", "fail", {"value": os.environ["PLAIN_NAME"]})],
                                 input_tokens=3, output_tokens=2)
        return ModelResponse(content=f"done {token} {os.environ['OPENAI_API_KEY']} {tools[0]['content']}")


# in the xdist workers only, processes of their own: never in the test's process, which runs the
# controller in-process (and may itself be an xdist worker of the outer run)
if os.getpid() != int(os.environ["CONNIC_TEST_PROCESS"]):
    live.LiteLLMModel = Provider
'''

SUITE = """
tests:
  - name: leaks and fails
    payload: hello
    runs: 2
    expected_result: output == "anything else"
    expected_tool_calls:
      - leak: params.value == "not the token"
  - name: leaks and passes
    payload: hello
    expected_tool_calls: [leak]
"""


def written_texts(root: Path, before: set[Path]) -> dict[str, str]:
    """Every file the session wrote or changed (as text, bytes decoded leniently)."""
    return {p.relative_to(root).as_posix(): p.read_bytes().decode("utf-8", "replace")
            for p in root.rglob("*") if p.is_file() and p not in before}


def test_no_secret_reaches_any_file_or_the_terminal(project: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xdist")
    monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
    monkeypatch.setenv("CONNIC_TEST_PROCESS", str(os.getpid()))
    project.tool("leaky", TOOLS)
    project.agent("leaky", tools=["leaky.leak", "leaky.fail"])
    project.suite("leaky", SUITE)
    project.write("conftest.py", CONFTEST)
    project.write(".env.staging", f'API_TOKEN="{TOKEN}"\nPLAIN_NAME={PLAIN}\n')
    sources = {p for p in project.root.rglob("*") if p.is_file()}
    reports = ("--connic-json", "out/report.json", "--connic-html", "out/report.html", "--junitxml",
               "out/junit.xml", "--connic-traces", "out/traces", "--connic-env", "staging", "-n", "2", "-v")

    for mode in ("once", "none"):  # record the cassettes, then replay them
        # the controller in this process (the workers record and replay): the project's conftest
        # replaces the plugin's LiteLLM model class in the workers only, which are processes of their own
        result = project.run("-p", "no:timeout", "--connic-record-mode", mode, *reports)
        result.assert_outcomes(passed=1, failed=1)
        texts = written_texts(project.root, sources)
        texts["<terminal>"] = result.stdout.str() + result.stderr.str()
        assert {"out/report.json", "out/report.html", "out/junit.xml", "cassettes/leaky/leaks and fails.yaml",
                "cassettes/leaky/leaks and passes.yaml"} <= set(texts)
        assert len([t for t in texts if t.startswith("out/traces/")]) == 3
        for name, text in texts.items():
            for secret in SECRETS:
                assert secret not in text, f"{secret} in {name} ({mode})"
        # the values were there to leak: masked, not absent
        for name in ("out/report.json", "out/junit.xml", "<terminal>", "cassettes/leaky/leaks and fails.yaml"):
            assert "***" in texts[name], name
        assert "bad token ***" in texts["<terminal>"]  # the tool's error, in the failure report
        assert "bad token *** / ***" in texts["out/report.json"]
        assert '"token":"***"' in texts["out/report.json"].replace(" ", "")


def test_a_cases_warnings_are_in_its_json_entry(calc: ConnicProject) -> None:
    write_mixed(calc)  # hand-written cassettes: pytest warns, at each case, that they carry no digests
    calc.run("-p", "no:randomly", "--connic-json", "report.json")
    cases = {c["test_name"]: c for c in json.loads((calc.root / "report.json").read_text("utf-8"))["cases"]}
    (warning,) = cases["adds"]["warnings"]
    assert "carry no `request` digests" in warning and "cassettes/calc/adds.yaml" in warning
    assert "warnings" not in cases["invalid"]  # no warning, no key
