"""``retry_options`` as Connic applies it: operation retries of tool and sequential agents (with
backoff on the run's clock, ``rerun_middleware``, ``context.retry_attempt``), the tool-failure
reflection budget of LLM agents, and the context fields ``after`` middleware sees
(docs/fidelity.md; agent-yaml; tools-and-python "When middleware re-runs")."""

from __future__ import annotations

import json

import pytest

from helpers.project import ConnicProject, esc

#: fails until it has been called ``payload["fail"]`` times (a counter file per ``payload["key"]``)
FLAKY = '''
import pathlib


def flaky(payload: dict, context: dict) -> dict:
    """Fail the first payload["fail"] calls."""
    path = pathlib.Path("counter-" + payload["key"])
    calls = int(path.read_text()) if path.exists() else 0
    path.write_text(str(calls + 1))
    if calls < payload["fail"]:
        raise RuntimeError(f"call {calls + 1} failed")
    return {"calls": calls + 1, "retry_attempt": context.get("retry_attempt")}


def broken(city: str) -> dict:
    """Look up the weather of a city."""
    raise RuntimeError(f"weather service down for {city}")
'''

#: ``before`` notes every run of it; ``after`` shows what the context holds at the end
RECORDING_MIDDLEWARE = '''
import json


async def before(content, context):
    context.setdefault("befores", []).append(context.get("retry_attempt", 0))
    return content


async def after(response, context):
    return json.dumps({"befores": context["befores"], "retry_attempt": context.get("retry_attempt"),
                       "body": json.loads(response)})
'''


def tool_agent(project: ConnicProject, name: str, **retry: object) -> None:
    project.agent(name, type="tool", tool_name="retry.flaky", retry_options=retry)


def test_a_tool_agent_retries_its_operation_up_to_attempts(project: ConnicProject) -> None:
    project.tool("retry", FLAKY)
    tool_agent(project, "three", attempts=3)  # Connic's default delays (10 s, 20 s): a virtual clock
    tool_agent(project, "one", attempts=1)
    project.suite("three", '''
        tests:
          - name: fails twice then works
            payload: '{"key": "three", "fail": 2}'
            expected_result: status == "completed" and output.calls == 3 and output.retry_attempt == 2
    ''')
    project.suite("one", '''
        tests:
          - name: fails twice then works
            payload: '{"key": "one", "fail": 2}'
            expected_result: status == "completed"
    ''')
    result = project.run("-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*tests/three.yaml::fails twice then works PASSED*"])
    result.stdout.fnmatch_lines(["*tests/one.yaml::fails twice then works FAILED*"])
    result.stdout.fnmatch_lines(["*Error:*RuntimeError: call 1 failed"])
    assert "retry 2 of" not in result.stdout.str()  # one attempt: no retry


def test_retries_show_in_the_trace_and_the_run_ends_with_the_last_error(project: ConnicProject) -> None:
    project.tool("retry", FLAKY)
    tool_agent(project, "always", attempts=3, initial_delay=1, max_delay=5)
    project.suite("always", '''
        tests:
          - name: never works
            payload: '{"key": "always", "fail": 99}'
    ''')
    result = project.run("-q")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        esc("*agent error: RuntimeError: call 3 failed"),
        "*Trace:",
        esc("*✗ retry 2 of 3 — RuntimeError: call 1 failed*"),
        esc("*✗ retry 3 of 3 — RuntimeError: call 2 failed*"),
    ])


@pytest.mark.timeout(60)  # hang guard: the backoff below is 100 s + 200 s on a real clock
def test_a_backoff_past_timeout_s_times_the_run_out(project: ConnicProject) -> None:
    project.tool("retry", FLAKY)
    tool_agent(project, "patient", attempts=3, initial_delay=100, max_delay=300)
    tool_agent(project, "quick", attempts=3, initial_delay=1, max_delay=2)
    for name in ("patient", "quick"):
        project.suite(name, f'''
            tests:
              - name: gives up
                timeout_s: 50
                payload: '{{"key": "{name}", "fail": 99}}'
                expected_result: status == "failed" and "call 3 failed" in error
        ''')
    result = project.run("-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*tests/patient.yaml::gives up FAILED*"])
    result.stdout.fnmatch_lines(["*tests/quick.yaml::gives up PASSED*"])
    # the real failure is in the error, not only in the trace
    result.stdout.fnmatch_lines([esc("*run timed out after 50s (timeout_s), waiting 100s to start retry 2 of 3 "
                                     "after the attempt before it failed: *call 1 failed*")])


def test_rerun_middleware_runs_before_again_per_retry(project: ConnicProject) -> None:
    project.tool("retry", FLAKY)
    tool_agent(project, "rerun", attempts=3, rerun_middleware=True)
    tool_agent(project, "once", attempts=3)
    for name in ("rerun", "once"):
        project.write(f"middleware/{name}.py", RECORDING_MIDDLEWARE)
        project.suite(name, f'''
            tests:
              - name: before per attempt
                payload: '{{"key": "{name}", "fail": 2}}'
                expected_result: output.befores == [0, 1, 2]
              - name: the context shows the attempt
                payload: '{{"key": "{name}-b", "fail": 2}}'
                expected_result: output.retry_attempt == 2 and output.body.retry_attempt == 2
        ''')
    result = project.run("-v")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*tests/once.yaml::before per attempt FAILED*"])


def test_a_sequential_agent_retries_the_pipeline(project: ConnicProject) -> None:
    project.tool("retry", FLAKY)
    tool_agent(project, "stage", attempts=1)
    project.agent("retried", type="sequential", agents=["stage"], retry_options={"attempts": 3})
    project.agent("single", type="sequential", agents=["stage"], retry_options={"attempts": 1})
    for name in ("retried", "single"):
        project.suite(name, f'''
            tests:
              - name: a flaky stage
                payload: '{{"key": "{name}", "fail": 2}}'
                expected_result: status == "completed" and output.calls == 3
        ''')
    result = project.run("-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*tests/single.yaml::a flaky stage FAILED*"])


def test_an_llm_agent_fails_once_a_tool_used_its_reflection_budget(project: ConnicProject) -> None:
    project.tool("retry", FLAKY)
    project.agent("budget3", tools=["retry.broken"], retry_options={"attempts": 3})
    project.agent("budget5", tools=["retry.broken"], retry_options={"attempts": 5})
    calls = [[("broken", {"city": "Oslo"})]] * 3
    for name in ("budget3", "budget5"):
        project.suite(name, '''
            tests:
              - name: a tool that keeps failing
                payload: weather in Oslo?
                expected_result: status == "completed" and "unavailable" in output
        ''')
        project.replies(name, "a tool that keeps failing", *calls, "The weather service is unavailable.")
    result = project.run("-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*tests/budget3.yaml::a tool that keeps failing FAILED*"])
    result.stdout.fnmatch_lines(["*tests/budget5.yaml::a tool that keeps failing PASSED*"])
    result.stdout.fnmatch_lines([esc(
        "*tool retry.broken failed in 3 model turn(s) in a row, the retry_options.attempts budget (3) of agent 'budget3': "
        "RuntimeError: weather service down for Oslo*"
    )])


AFTER_CONTEXT = '''
import json


async def after(response, context):
    return json.dumps({k: context.get(k) for k in ("fallback_model_used", "token_usage", "duration_ms")})
'''


def test_after_middleware_sees_the_fallback_model_and_the_token_usage(project: ConnicProject) -> None:
    project.agent("switchy", fallback_model="anthropic/claude-sonnet-4-6")
    project.write("middleware/switchy.py", AFTER_CONTEXT)
    project.suite("switchy", '''
        tests:
          - name: the fallback answered
            payload: hi
            expected_result: >-
              output.fallback_model_used == "anthropic/claude-sonnet-4-6"
              and output.token_usage.prompt_tokens == 5 and output.token_usage.candidates_tokens == 2
              and output.token_usage.total_tokens == 7 and output.duration_ms >= 0
          - name: the primary answered
            payload: hi
            expected_result: output.fallback_model_used == None
    ''')
    project.cassette("switchy", "the fallback answered", [{"turns": [
        {"content": "hello", "model": "anthropic/claude-sonnet-4-6", "usage": {"input_tokens": 5, "output_tokens": 2}},
    ]}])
    project.cassette("switchy", "the primary answered", [{"turns": [{"content": "hello"}]}])
    result = project.run("-v")
    result.assert_outcomes(passed=2)


def test_a_replay_says_that_its_duration_counts_retry_delays_it_skipped(project: ConnicProject,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the table's latency column shown
    monkeypatch.delenv("CI", raising=False)
    project.tool("retry", FLAKY)
    tool_agent(project, "three", attempts=3)  # Connic's default delays: 10 s, then 20 s
    project.suite("three", '''
        tests:
          - name: fails twice then works
            payload: '{"key": "three", "fail": 2}'
    ''')
    result = project.run("--connic-json", "report.json", "--connic-html", "report.html")
    result.assert_outcomes(passed=1)
    report = json.loads((project.root / "report.json").read_text("utf-8"))
    (case,) = report["cases"]
    assert case["median_latency_ms"] >= 30000  # Connic's run would take the waits
    assert "30s of retry delays were skipped (not waited) in this replay" in json.dumps(case)
    # each report says how much of the latency is skipped time
    assert case["median_latency_virtual_ms"] == 30000 and case["runs_detail"][0]["virtual_ms"] == 30000
    result.stdout.fnmatch_lines(["*│ 30.*s (30.00s virtual) │*"])
    assert "virtual" in (project.root / "report.html").read_text("utf-8")  # the page's script says it
