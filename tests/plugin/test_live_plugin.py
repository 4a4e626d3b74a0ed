"""Live providers through the plugin: pytest runs of small Connic projects against a fake
OpenAI-compatible provider on 127.0.0.1 (real HTTP through LiteLLM): secrets, infrastructure
errors and exit codes, Connic-hosted model aliases, concurrent runs."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.fake_provider import Reply, error, text, tool_call
from helpers.network import local_provider_env, serving, warm_up_litellm
from helpers.project import ConnicProject

if importlib.util.find_spec("litellm") is None:
    pytest.skip("the [live] extra (litellm) is not installed", allow_module_level=True)

KEY = "sk-test-DONOTLEAK-1234567890"
FAST_RETRIES = {"attempts": 2, "initial_delay": 0, "max_delay": 1}
ADDS = """
tests:
  - name: adds
    payload: "4 + 6?"
    expected_result: output.sum == 10
"""


@pytest.fixture(scope="session", autouse=True)
def litellm_imported() -> None:
    """Import LiteLLM (and what it imports lazily on its first call) in this process before any
    in-process pytest run does: its import loads the importlib_metadata backport, which deletes
    the stdlib's distribution finder; pytester's restore of ``sys.meta_path`` after an inner run
    would then leave later inner runs without plugins. It also keeps seconds out of timed runs."""
    warm_up_litellm()


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key, and a base URL where nothing listens: a test that forgets to serve stays local."""
    local_provider_env(monkeypatch, KEY)


def junit_cases(path: Path) -> dict[str, ET.Element]:
    return {case.get("name", ""): case for case in ET.parse(path).getroot().iter("testcase")}


# -- secrets -------------------------------------------------------------------

VAULT_TOOLS = '''
import os


def reveal() -> dict:
    """Reveal the provider key: a tool that puts a secret into the conversation."""
    return {"key": os.environ["OPENAI_API_KEY"]}
'''

VAULT_SUITE = f"""
tests:
  - name: leaks
    payload: "my key is {KEY}, keep it safe"
    expected_tool_calls:
      - vault.reveal
    expected_result: output.echo == "nothing"
"""


def echo_the_tool_result(body: dict[str, Any]) -> Reply:
    """The fake model: call ``reveal``, then answer with what it returned (the key)."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return text(json.dumps({"echo": last["content"]}))
    return tool_call("reveal")


def test_no_secret_reaches_a_cassette_or_a_report(project: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    project.tool("vault", VAULT_TOOLS)
    project.agent("vault", tools=["vault.reveal"], retry_options=FAST_RETRIES)
    project.suite("vault", VAULT_SUITE)
    with serving(monkeypatch, echo_the_tool_result) as fp:
        result = project.run(
            "--connic-record-mode", "once", "--connic-json", "out/report.json", "--connic-html", "out/report.html",
            "--connic-traces", "out/traces", "--junitxml", "out/junit.xml",
        )
    result.assert_outcomes(failed=1)
    # the key was really used and really leaked into the conversation: the scan below means something
    assert fp.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY in json.dumps(fp.requests[1].body["messages"])

    written = [p for d in ("cassettes", "out") for p in (project.root / d).rglob("*") if p.is_file()]
    names = {p.name for p in written}
    assert {"leaks.yaml", "report.json", "report.html", "junit.xml"} <= names
    assert any(p.parent.name == "traces" for p in written)
    for path in written:
        assert KEY not in path.read_text("utf-8", errors="replace"), f"the key leaked into {path}"
    assert KEY not in result.stdout.str() + result.stderr.str()
    # masked, not merely absent: the tool result and the answer are there with the key replaced
    answer = yaml.safe_load((project.root / "cassettes" / "vault" / "leaks.yaml").read_text("utf-8"))
    assert json.loads(json.loads(answer["runs"][0]["turns"][1]["content"])["echo"]) == {"key": "***"}
    assert "my key is ***, keep it safe" in (project.root / "out" / "report.json").read_text("utf-8")


# -- infrastructure errors and exit codes --------------------------------------


@pytest.mark.parametrize("provider", ["closed port", "HTTP 500"])
def test_a_provider_that_is_down_is_an_error_and_exit_code_2(
    calc: ConnicProject, monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    calc.agent("calc", tools=["calc.add"], retry_options=FAST_RETRIES)
    calc.suite("calc", ADDS)
    if provider == "closed port":
        result = calc.run("--connic-live", "--junitxml", "junit.xml")
        # nothing listens there: no retry can help, so none is made (1 attempt, not retry_options' 2)
        message = ("*Connection error. (Cannot connect to host 127.0.0.1:*Connect call failed*) (after 1 attempt(s); "
                   "not retried: the connection was refused (nothing listens at that address))")
    else:
        with serving(monkeypatch, [error(500, "upstream exploded")] * 3) as fp:
            result = calc.run("--connic-live", "--junitxml", "junit.xml")
        assert len(fp.requests) == 2  # retry_options.attempts
        message = "*upstream exploded*(after 2 attempt(s))"
    assert result.ret == 2
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at call of calc::adds*",
            "tests/calc.yaml:2: case 'adds' (calc) hit an infrastructure error",
            f"    openai/gpt-4o-mini: {message}",
        ]
    )
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    case = junit_cases(calc.root / "junit.xml")["adds"]
    assert case.find("failure") is None
    error_element = case.find("error")
    # the message is the one-line reason: the provider's error
    assert error_element is not None and error_element.get("message", "").startswith("openai/gpt-4o-mini: litellm.")


def test_a_live_case_failing_its_assertions_is_a_failure_and_exit_code_1(
    calc: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    calc.suite("calc", ADDS)
    with serving(monkeypatch, ['{"sum": 11}']):
        result = calc.run("--connic-live", "--junitxml", "junit.xml")
    assert result.ret == 1
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*case 'adds' (calc) failed", "*output.sum == 10 where output.sum = 11*"])
    case = junit_cases(calc.root / "junit.xml")["adds"]
    assert case.find("failure") is not None and case.find("error") is None


RAISING_MODEL = '''
from pytest_connic.models.base import ProviderError


def pytest_connic_make_model(config, agent, model, case, run_index):
    def down(request):
        raise ProviderError("the gateway said 503 Service Unavailable")

    return down if case["name"] == "down" else None
'''


def test_an_infrastructure_error_is_an_error(calc: ConnicProject) -> None:
    """Under xdist (the result line, then the run lines; exit code 2):
    tests/plugin/test_xdist_reports.py's ``test_infrastructure_error_exits_2_under_xdist``."""
    calc.write("conftest.py", RAISING_MODEL)
    calc.replies("calc", "adds", '{"sum": 10}')
    calc.suite("calc", ADDS + "  - name: down\n    payload: x\n    runs: 2\n")
    result = calc.run("-v", "-p", "no:xdist")
    assert result.ret == 2
    result.assert_outcomes(passed=1, errors=1)
    # -v: the per-run lines, then the result word
    runs = ["  run ?/2 error (*ms): the gateway said 503 Service Unavailable"] * 2
    result.stdout.fnmatch_lines(["tests/calc.yaml::down ", *runs, "ERROR *"])
    result.stdout.fnmatch_lines([
        "*ERROR at call of calc::down*",
        "tests/calc.yaml:5: case 'down' (calc) hit an infrastructure error",
        "    the gateway said 503 Service Unavailable",
    ])


def test_setup_only_runs_no_case(calc: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    calc.suite("calc", ADDS)
    with serving(monkeypatch, ['{"sum": 10}']) as fp:
        result = calc.run("--connic-live", "--setup-only")
    assert result.ret == 0
    assert fp.requests == []


# -- Connic-hosted models ------------------------------------------------------

ALIAS = "connic/gpt-5.6-terra=openai/gpt-4o-mini"


@pytest.mark.parametrize("source", ["option", "ini"])
def test_a_model_alias_maps_a_connic_model(
    calc: ConnicProject, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    calc.agent("calc", tools=["calc.add"], model="connic/gpt-5.6-terra", retry_options=FAST_RETRIES)
    calc.suite("calc", ADDS)
    args = ["--connic-live"]
    if source == "option":
        args += ["--connic-model-alias", ALIAS]
    else:
        calc.write("pytest.ini", f"[pytest]\nconnic_model_aliases =\n    {ALIAS}\n")
    with serving(monkeypatch, ['{"sum": 10}']) as fp:
        result = calc.run(*args)
    result.assert_outcomes(passed=1)
    assert [r.body["model"] for r in fp.requests] == ["gpt-4o-mini"]


def test_an_unmapped_connic_model_names_the_option(calc: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    calc.agent("calc", tools=["calc.add"], model="connic/gpt-5.6-terra", retry_options=FAST_RETRIES)
    calc.suite("calc", ADDS)
    with serving(monkeypatch, ['{"sum": 10}']) as fp:
        result = calc.run("--connic-live")
    assert result.ret == 2
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*connic/gpt-5.6-terra is a Connic-hosted model; map it to a provider model to call it locally,"
            + " e.g. --connic-model-alias connic/gpt-5.6-terra=openai/* (ini connic_model_aliases)*"
        ]
    )
    assert fp.requests == []


# -- concurrency ---------------------------------------------------------------


class InFlight:
    """A provider script that answers after ``hold`` seconds and counts the requests it holds at
    once: the most it held says whether runs overlapped, whatever the machine's load."""

    def __init__(self, hold: float = 0.3) -> None:
        self.hold = hold
        self.now = 0
        self.most = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(self.hold)
        with self._lock:
            self.now -= 1
        return text("hi")


def test_runs_of_a_case_call_a_live_provider_concurrently(calc: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    calc.agent("greeter", retry_options=FAST_RETRIES, max_concurrent_runs=4)
    calc.suite("greeter", "tests:\n  - name: greets\n    payload: hello\n    runs: 4\n")
    concurrent, sequential = InFlight(), InFlight()
    with serving(monkeypatch, concurrent) as fp:
        calc.run("--connic-live").assert_outcomes(passed=1)
    with serving(monkeypatch, sequential) as fp_sequential:
        calc.run("--connic-live", "--connic-concurrency", "1").assert_outcomes(passed=1)
    assert len(fp.requests) == len(fp_sequential.requests) == 4
    # runs overlap at the provider (each holds its request 0.3 s); with --connic-concurrency 1 never
    assert concurrent.most >= 2 and sequential.most == 1, (concurrent.most, sequential.most)
