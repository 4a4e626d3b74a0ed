"""Models of a run below pytest: cassette replay and its strictness, and models a project's
``pytest_connic_make_model`` hook supplies (docs/models.md, "Replay is strict")."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from helpers.harness import CaseProject, HookHost, conftest_hooks
from helpers.models import ECHO_REQUEST_MODEL
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord
from pytest_connic.reports.failure import failure_text
from pytest_connic.secrets import Masker

ONE_CASE = """
tests:
  - name: {name}
    payload: add 4 and 6
    expected_result: output.sum == 10
"""


def only(outcome: CaseOutcome) -> RunRecord:
    (record,) = outcome.records
    return record


def head(outcome: CaseOutcome) -> list[str]:
    """The first two lines of the case's failure report (no traceback anywhere in it)."""
    text = failure_text(outcome, Masker())
    assert "Traceback" not in text
    return text.split("\n")[:2]


def test_a_hand_written_cassette_drives_the_agent_and_its_real_tools(calc_cases: CaseProject) -> None:
    calc_cases.suite("calc", ONE_CASE.format(name="adds") + "    expected_tool_calls:\n      - add: result.sum == 10\n")
    calc_cases.replies("calc", "adds", [("add", {"a": 4, "b": 6})], '{"sum": 10}')
    outcome = calc_cases.case("calc", "adds")
    assert outcome.verdict_passed, outcome.failure_reason
    record = only(outcome)
    assert [(c.ref, c.params, c.result) for c in record.tool_calls] == [("calc.add", {"a": 4, "b": 6}, {"sum": 10})]
    assert record.output == {"sum": 10}
    assert (outcome.recorded_runs, outcome.replayed_runs) == (1, 1)


def test_a_missing_cassette_fails_the_case_with_where_it_was_expected(calc_cases: CaseProject) -> None:
    calc_cases.suite("calc", ONE_CASE.format(name="lonely"))
    outcome = calc_cases.case("calc", "lonely")
    assert outcome.status == "failed"
    assert head(outcome) == [
        "tests/calc.yaml:2: case 'lonely' (calc) failed",
        ("    0/1 runs passed, threshold 100% needs 1: no cassette for this case: expected "
         "cassettes/calc/lonely.yaml; record one with --connic-record-mode=once (needs provider credentials) or "
         "write it by hand (docs/models.md)"),
    ]


def test_a_cassette_that_runs_out_of_turns_fails(calc_cases: CaseProject) -> None:
    calc_cases.suite("calc", ONE_CASE.format(name="short"))
    calc_cases.replies("calc", "short", [("add", {"a": 4, "b": 6})])
    outcome = calc_cases.case("calc", "short")
    assert not outcome.verdict_passed
    first, second = head(outcome)
    assert first == "tests/calc.yaml:2: case 'short' (calc) failed"
    assert second.startswith("    0/1 runs passed, threshold 100% needs 1: ")
    assert second.endswith("cassettes/calc/short.yaml: runs[0].turns: the agent asked for model turn 2 of run 1 but "
                           "the cassette has 1; the agent took more steps than recorded")


def test_a_completed_run_leaving_turns_unused_fails(calc_cases: CaseProject) -> None:
    calc_cases.suite("calc", ONE_CASE.format(name="long"))
    calc_cases.replies("calc", "long", '{"sum": 10}', '{"sum": 11}')
    outcome = calc_cases.case("calc", "long")
    assert not outcome.verdict_passed
    first, second = head(outcome)
    assert first == "tests/calc.yaml:2: case 'long' (calc) failed"
    assert second.startswith("    0/1 runs passed, threshold 100% needs 1: ")
    assert second.endswith("cassettes/calc/long.yaml: runs[0].turns: the agent completed run 1 after 1 of 2 recorded "
                           "model turn(s); it took fewer steps than recorded")
    # the divergence is the reason: the expectations were not evaluated on top of it
    (failure,) = only(outcome).failures
    assert "fewer steps than recorded" in failure
    assert "expected_result not satisfied" not in failure_text(outcome, Masker())


def test_a_cassette_calling_an_unknown_tool_fails(calc_cases: CaseProject) -> None:
    calc_cases.suite("calc", ONE_CASE.format(name="divides"))
    calc_cases.replies("calc", "divides", [("divide", {"a": 4, "b": 2})], '{"sum": 10}')
    outcome = calc_cases.case("calc", "divides")
    assert not outcome.verdict_passed
    assert head(outcome)[1].endswith(
        "cassettes/calc/divides.yaml: runs[0].turns[0].tool_calls[0]: the cassette calls tool 'divide', "
        "but the request of 'calc' offers: add, multiply")
    assert only(outcome).tool_calls == []  # no tool ran


def test_no_cassette_is_read_when_no_model_is_called(calc_cases: CaseProject) -> None:
    # a tool agent never asks for a model: no cassette needed, even a broken one is never read
    calc_cases.suite("echo", "tests:\n  - name: plain\n    payload: '{\"a\": 1}'\n    expected_result: output.got.a == 1\n")
    calc_cases.write("cassettes/echo/plain.yaml", "version: 99\n")
    outcome = calc_cases.case("echo", "plain")
    assert outcome.verdict_passed, outcome.failure_reason
    assert outcome.recorded_runs is None  # no run replayed a cassette


def test_the_make_model_hook_supplies_models_and_none_falls_back_to_cassettes(calc_cases: CaseProject) -> None:
    def make_model(agent: Any, model: str, case: Mapping[str, object], run_index: int) -> object:
        if case["name"] == "cassette":
            return None
        return lambda request: json.dumps({"sum": run_index, "model": model, "agent": agent.config.name})

    calc_cases.host = HookHost(make_model=make_model)
    calc_cases.suite("calc", """
        tests:
          - name: hooked
            payload: hi
            runs: 3
          - name: cassette
            payload: hi
            expected_result: output.sum == 42
    """)
    calc_cases.replies("calc", "cassette", '{"sum": 42}')
    outcomes = calc_cases.cases("calc")
    assert sorted((r.index, r.output["sum"], r.output["model"], r.output["agent"])  # type: ignore[index]
                  for r in outcomes["hooked"].records) == [
        (0, 0, "openai/gpt-4o-mini", "calc"), (1, 1, "openai/gpt-4o-mini", "calc"), (2, 2, "openai/gpt-4o-mini", "calc")]
    assert outcomes["cassette"].verdict_passed, outcomes["cassette"].failure_reason
    assert (outcomes["hooked"].recorded_runs, outcomes["cassette"].recorded_runs) == (None, 1)


def test_the_make_model_hook_sees_the_resolved_case(calc_cases: CaseProject) -> None:
    calc_cases.host = conftest_hooks(ECHO_REQUEST_MODEL)
    calc_cases.suite("calc", "tests:\n  - name: echoed\n    payload: hi\n")
    assert only(calc_cases.case("calc", "echoed")).output["has_case"] is True  # type: ignore[index]
    seen: list[Mapping[str, object]] = []

    def make_model(agent: object, model: str, case: Mapping[str, object], run_index: int) -> object:
        seen.append(case)
        return lambda request: "ok"

    calc_cases.host = HookHost(make_model=make_model)
    assert calc_cases.case("calc", "echoed").verdict_passed
    assert [(c["name"], c["payload"], c["runs"]) for c in seen] == [("echoed", "hi", 1)]
