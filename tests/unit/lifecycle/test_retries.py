"""``retry_options`` as Connic applies it, below pytest: operation retries of tool and sequential
agents (with backoff on the run's clock, ``rerun_middleware``, ``context.retry_attempt``), the
tool-failure reflection budget of LLM agents, and the context fields ``after`` middleware sees
(docs/fidelity.md; agent-yaml; tools-and-python "When middleware re-runs")."""

from __future__ import annotations

import re

from helpers.harness import CaseProject
from pytest_connic.records.events import NoteEvent, RetryEvent
from pytest_connic.records.run import RunRecord
from pytest_connic.reports.json_report import build_json_report
from pytest_connic.reports.terminal import median_latency
from pytest_connic.secrets import Masker

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


def tool_agent(project: CaseProject, name: str, **retry: object) -> None:
    project.agent(name, type="tool", tool_name="retry.flaky", retry_options=retry)


def only(outcome_records: list[RunRecord]) -> RunRecord:
    (record,) = outcome_records
    return record


def retries(record: RunRecord) -> list[RetryEvent]:
    return [e for e in record.events if isinstance(e, RetryEvent)]


def flaky_suite(project: CaseProject, name: str, fail: int, **case: object) -> None:
    extra = "".join(f"\n    {k}: {v}" for k, v in case.items())
    project.suite(name, f"tests:\n  - name: flaky\n    payload: '{{\"key\": \"{name}\", \"fail\": {fail}}}'{extra}\n")


def test_a_tool_agent_retries_its_operation_up_to_attempts(case_project: CaseProject) -> None:
    case_project.tool("retry", FLAKY)
    tool_agent(case_project, "three", attempts=3)  # Connic's default delays (10 s, 20 s): a virtual clock
    tool_agent(case_project, "one", attempts=1)
    expected = 'status == "completed" and output.calls == 3 and output.retry_attempt == 2'
    flaky_suite(case_project, "three", 2, expected_result=f"'{expected}'")
    flaky_suite(case_project, "one", 2, expected_result="'status == \"completed\"'")
    three = case_project.case("three", "flaky")
    assert three.verdict_passed, three.failure_reason
    assert [e.name for e in retries(only(three.records))] == ["retry 2 of 3", "retry 3 of 3"]
    one = only(case_project.case("one", "flaky").records)
    assert (one.status, one.error) == ("failed", "RuntimeError: call 1 failed")
    assert retries(one) == []  # one attempt: no retry


def test_retries_show_in_the_trace_and_the_run_ends_with_the_last_error(case_project: CaseProject) -> None:
    case_project.tool("retry", FLAKY)
    tool_agent(case_project, "always", attempts=3, initial_delay=1, max_delay=5)
    flaky_suite(case_project, "always", 99)
    record = only(case_project.case("always", "flaky").records)
    assert (record.status, record.error) == ("failed", "RuntimeError: call 3 failed")
    assert [(e.name, e.error, e.waiting) for e in retries(record)] == [
        ("retry 2 of 3", "RuntimeError: call 1 failed", False),
        ("retry 3 of 3", "RuntimeError: call 2 failed", False),
    ]
    assert [e.delay_s for e in retries(record)] == [1, 2]  # the backoff, capped by max_delay


def test_a_backoff_past_timeout_s_times_the_run_out(case_project: CaseProject) -> None:
    case_project.tool("retry", FLAKY)
    tool_agent(case_project, "patient", attempts=3, initial_delay=100, max_delay=300)
    tool_agent(case_project, "quick", attempts=3, initial_delay=1, max_delay=2)
    for name in ("patient", "quick"):
        flaky_suite(case_project, name, 99, timeout_s=50,
                    expected_result="'status == \"failed\" and \"call 3 failed\" in error'")
    assert case_project.case("quick", "flaky").verdict_passed
    patient = only(case_project.case("patient", "flaky").records)
    # the real failure is in the error, not only in the trace
    assert patient.error == ("run timed out after 50s (timeout_s), waiting 100s to start retry 2 of 3 after the "
                             "attempt before it failed: RuntimeError: call 1 failed")
    assert [e.waiting for e in retries(patient)] == [False]  # no mark of the wait stays in the trace


def test_rerun_middleware_runs_before_again_per_retry(case_project: CaseProject) -> None:
    case_project.tool("retry", FLAKY)
    tool_agent(case_project, "rerun", attempts=3, rerun_middleware=True)
    tool_agent(case_project, "once", attempts=3)
    for name in ("rerun", "once"):
        case_project.write(f"middleware/{name}.py", RECORDING_MIDDLEWARE)
        flaky_suite(case_project, name, 2)
    rerun = only(case_project.case("rerun", "flaky").records).output
    once = only(case_project.case("once", "flaky").records).output
    assert rerun == {"befores": [0, 1, 2], "retry_attempt": 2, "body": {"calls": 3, "retry_attempt": 2}}
    assert once == {"befores": [0], "retry_attempt": 2, "body": {"calls": 3, "retry_attempt": 2}}


def test_a_sequential_agent_retries_the_pipeline(case_project: CaseProject) -> None:
    case_project.tool("retry", FLAKY)
    tool_agent(case_project, "stage", attempts=1)
    case_project.agent("retried", type="sequential", agents=["stage"], retry_options={"attempts": 3})
    case_project.agent("single", type="sequential", agents=["stage"], retry_options={"attempts": 1})
    for name in ("retried", "single"):
        flaky_suite(case_project, name, 2, expected_result="'status == \"completed\" and output.calls == 3'")
    assert case_project.case("retried", "flaky").verdict_passed
    single = only(case_project.case("single", "flaky").records)
    assert (single.status, single.error) == ("failed", "stage 'stage' ended failed: RuntimeError: call 1 failed")


def test_an_llm_agent_fails_once_a_tool_used_its_reflection_budget(case_project: CaseProject) -> None:
    case_project.tool("retry", FLAKY)
    case_project.agent("budget3", tools=["retry.broken"], retry_options={"attempts": 3})
    case_project.agent("budget5", tools=["retry.broken"], retry_options={"attempts": 5})
    calls = [[("broken", {"city": "Oslo"})]] * 3
    for name in ("budget3", "budget5"):
        case_project.suite(name, '''
            tests:
              - name: a tool that keeps failing
                payload: weather in Oslo?
                expected_result: status == "completed" and "unavailable" in output
        ''')
        case_project.replies(name, "a tool that keeps failing", *calls, "The weather service is unavailable.")
    assert case_project.case("budget5", "a tool that keeps failing").verdict_passed
    budget3 = only(case_project.case("budget3", "a tool that keeps failing").records)
    assert (budget3.status, budget3.error) == ("failed", (
        "tool retry.broken failed in 3 model turn(s) in a row, the retry_options.attempts budget (3) of agent "
        "'budget3': RuntimeError: weather service down for Oslo"))


AFTER_CONTEXT = '''
import json


async def after(response, context):
    return json.dumps({k: context.get(k) for k in ("fallback_model_used", "token_usage", "duration_ms")})
'''


def test_after_middleware_sees_the_fallback_model_and_the_token_usage(case_project: CaseProject) -> None:
    case_project.agent("switchy", fallback_model="anthropic/claude-sonnet-4-6")
    case_project.write("middleware/switchy.py", AFTER_CONTEXT)
    case_project.suite("switchy", '''
        tests:
          - name: the fallback answered
            payload: hi
          - name: the primary answered
            payload: hi
    ''')
    case_project.cassette("switchy", "the fallback answered", [{"turns": [
        {"content": "hello", "model": "anthropic/claude-sonnet-4-6", "usage": {"input_tokens": 5, "output_tokens": 2}},
    ]}])
    case_project.cassette("switchy", "the primary answered", [{"turns": [{"content": "hello"}]}])
    outcomes = case_project.cases("switchy")
    fallback = only(outcomes["the fallback answered"].records).output
    assert isinstance(fallback, dict) and fallback["duration_ms"] >= 0
    assert {k: fallback[k] for k in ("fallback_model_used", "token_usage")} == {
        "fallback_model_used": "anthropic/claude-sonnet-4-6",
        "token_usage": {"prompt_tokens": 5, "candidates_tokens": 2, "total_tokens": 7}}
    primary = only(outcomes["the primary answered"].records).output
    assert isinstance(primary, dict) and primary["fallback_model_used"] is None


def test_a_replay_says_that_its_duration_counts_retry_delays_it_skipped(case_project: CaseProject) -> None:
    case_project.tool("retry", FLAKY)
    tool_agent(case_project, "three", attempts=3)  # Connic's default delays: 10 s, then 20 s
    flaky_suite(case_project, "three", 2)
    outcome = case_project.case("three", "flaky")
    record = only(outcome.records)
    assert record.duration_ms >= 30000  # Connic's run would take the waits
    assert record.virtual_ms == 30000 and outcome.median_virtual_ms == 30000
    notes = [e.text for e in record.events if isinstance(e, NoteEvent)]
    assert notes == [("30s of retry delays were skipped (not waited) in this replay; the run's duration counts "
                      "them, as on Connic")]
    # each report says how much of the latency is skipped time
    assert re.fullmatch(r"30\.\d\ds \(30\.00s virtual\)", median_latency(outcome))
    case = build_json_report([outcome], masker=Masker(()))["cases"][0]
    assert case["median_latency_virtual_ms"] == 30000 and case["runs_detail"][0]["virtual_ms"] == 30000

