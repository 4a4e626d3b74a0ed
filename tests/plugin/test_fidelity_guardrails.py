"""Issue 16, guardrails as Connic applies them: each type's default ``entities`` and
``config.fail_run`` (docs/fidelity.md)."""

from __future__ import annotations

import json

import pytest

from helpers.project import ConnicProject

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)


def _statuses(project: ConnicProject) -> dict[str, tuple[str, str | None]]:
    cases = json.loads((project.root / "report.json").read_text("utf-8"))["cases"]
    return {c["test_name"]: (c["runs_detail"][0]["status"], c["runs_detail"][0]["error"]) for c in cases}


def test_pii_leakage_without_entities_checks_connics_default_set_and_pii_checks_all(project: ConnicProject) -> None:
    project.agent("leak", guardrails={"output": [{"type": "pii_leakage"}]})
    project.agent("leak-email", guardrails={"output": [{"type": "pii_leakage", "config": {"entities": ["email"]}}]})
    project.agent("pii", guardrails={"input": [{"type": "pii"}]})
    project.suite("leak", '''
        tests:
          - name: an email is not in pii_leakage's default set
            payload: hi
            expected_result: status == "completed" and output == "mail ada@example.com"
          - name: an ssn is
            payload: hi
            expected_result: status == "blocked"
    ''')
    project.replies("leak", "an email is not in pii_leakage's default set", "mail ada@example.com")
    project.replies("leak", "an ssn is", "ssn 123-45-6789")
    project.suite("leak-email", '''
        tests:
          - name: listed, an email blocks
            payload: hi
            expected_result: status == "blocked"
    ''')
    project.replies("leak-email", "listed, an email blocks", "mail ada@example.com")
    project.suite("pii", '''
        tests:
          - name: the input pii default is all seven
            payload: mail ada@example.com
            expected_result: status == "blocked"
    ''')

    project.run("-q").assert_outcomes(passed=4)


def test_fail_run_turns_a_block_into_a_failed_run_on_input_and_output(project: ConnicProject) -> None:
    def rule(fail_run: bool) -> dict[str, object]:
        config: dict[str, object] = {"patterns": ["forbidden"], "rejection_message": "Nope."}
        if fail_run:
            config["fail_run"] = True
        return {"type": "regex", "config": config}

    project.agent("in-block", guardrails={"input": [rule(False)]})
    project.agent("in-fail", guardrails={"input": [rule(True)]})
    project.agent("out-fail", guardrails={"output": [rule(True)]})
    project.write("middleware/in-fail.py", '''
def after(response, context):
    context["after_ran"] = True
    return response
''')
    for agent in ("in-block", "in-fail"):
        project.suite(agent, f'''
            tests:
              - name: {agent} input
                payload: forbidden words
                expected_result: status == "blocked" and output == "Nope."
        ''')
    project.suite("out-fail", '''
        tests:
          - name: out-fail output
            payload: hi
            expected_result: status == "blocked"
    ''')
    project.replies("out-fail", "out-fail output", "forbidden answer")

    result = project.run("--connic-json", "report.json")

    # the same expectation passes without fail_run and fails with it, on input and on output
    result.assert_outcomes(passed=1, failed=2)
    assert _statuses(project) == {
        "in-block input": ("blocked", None),
        "in-fail input": ("failed", "Nope."),
        "out-fail output": ("failed", "Nope."),
    }
    # fail_run changes the status only: after still ran as run_after_on_block says
    report = json.loads((project.root / "report.json").read_text("utf-8"))
    run = next(c for c in report["cases"] if c["test_name"] == "in-fail input")["runs_detail"][0]
    assert [e for e in run["events"] if e.get("phase") == "after"]
    assert run["output"] == "Nope."  # the output stays: only the status changes
