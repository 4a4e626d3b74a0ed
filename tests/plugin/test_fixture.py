"""The ``connic`` fixture: the same runtime, driven from Python tests."""

from __future__ import annotations

import pytest

from helpers.project import ConnicProject, esc

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

HEADER = """
        import pytest
        from pytest_connic.models.base import ModelResponse, ToolCallRequest
"""


def _clean(result: object) -> None:
    result.stdout.no_fnmatch_line("*INTERNALERROR*")  # type: ignore[attr-defined]
    result.stdout.no_fnmatch_line("*pytest_connic/*.py:*")  # type: ignore[attr-defined]


def test_run_replays_the_python_cassette_and_returns_records(calc: ConnicProject) -> None:
    calc.write(
        "test_agent.py",
        HEADER
        + """
        def test_adds(connic):
            records = connic.run("calc", "add 4 and 6", runs=3)
            assert len(records) == 3
            assert len({r.run_id for r in records}) == 3
            first = records[0]
            assert first.status == "completed" and first.error is None
            assert first.output == {"sum": 10} and first.output_raw == '{"sum": 10}'
            assert first.input == {"message": "add 4 and 6"}
            assert [(c.name, c.ref, c.params, c.result) for c in first.tool_calls] == [
                ("add", "calc.add", {"a": 4, "b": 6}, {"sum": 10})
            ]
            assert [s["name"] for s in first.trace][0] == "agent_run"
            assert '"tool_name":"add"' in first.trace[2]["metadata_json"]
            assert connic.last_outcome.successes == 3
        """,
    )
    calc.replies("python", "test_adds", [("add", {"a": 4, "b": 6})], '{"sum": 10}')
    result = calc.run("-q", "test_agent.py")
    result.assert_outcomes(passed=1)


def test_model_argument_and_payload_dict(calc: ConnicProject) -> None:
    calc.write(
        "test_agent.py",
        HEADER
        + """
        def test_function_model(connic):
            def model(request):
                if len(request.messages) == 1:
                    return ModelResponse(tool_calls=[ToolCallRequest("c1", "multiply", {"a": 6, "b": 7})])
                return request.messages[-1]["content"]
            record = connic.run_one("calc", {"q": "six times seven"}, model=model)
            assert record.input == {"q": "six times seven"}
            assert record.output == {"product": 42}
            assert record.tool_calls[0].ref == "calc.multiply"

        def test_object_model(connic):
            class Fixed:
                async def complete(self, request):
                    return ModelResponse(content=request.system_prompt)
            assert connic.run_one("calc", model=Fixed()).output == "You are calc."
        """,
    )
    result = calc.run("-q", "test_agent.py")
    result.assert_outcomes(passed=2)


def test_tool_agents_need_no_model_and_expectations_work_like_a_suite(calc: ConnicProject) -> None:
    calc.write(
        "test_agent.py",
        """
        def test_passes(connic):
            record = connic.run_one("echo", {"a": 1}, expected_result="output.got.a == 1",
                                    expected_tool_calls=[{"echo": "params.payload.a == 1"}])
            assert record.passed

        def test_fails(connic):
            connic.run("echo", {"a": 1}, runs=2, expected_result="output.got.a == 2")
        """,
    )
    result = calc.run("-q", "test_agent.py")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_agent.py:7: case 'test_fails' (echo) failed",
            ("    0/2 runs passed, threshold 100% needs 2: "
            "expected_result not satisfied: output.got.a == 2 where output.got.a = 1"),
            "*Failed:  as above",  # the reason is said once, in the first line
        ]
    )
    _clean(result)


def test_without_expectations_the_status_is_for_the_test_to_judge(project: ConnicProject) -> None:
    project.tool("bad", 'def explode(payload: dict) -> dict:\n    """Fails."""\n    raise RuntimeError("kaboom")\n')
    project.agent("bad", type="tool", tool_name="bad.explode")
    project.write(
        "test_agent.py",
        """
        def test_failed_run_is_returned(connic):
            record = connic.run_one("bad", "hi")
            assert record.status == "failed" and record.error == "RuntimeError: kaboom"
            assert record.output is None and record.tool_calls[0].error == "RuntimeError: kaboom"
        """,
    )
    result = project.run("-q", "test_agent.py")
    result.assert_outcomes(passed=1)


def test_cassette_problems_fail_the_test_without_a_traceback(calc: ConnicProject) -> None:
    calc.write(
        "test_agent.py",
        """
        def test_no_cassette(connic):
            connic.run("calc", "hi")

        def test_unused_turns(connic):
            connic.run("calc", "hi", cassette="custom")

        def test_unchecked(connic):
            record = connic.run_one("calc", "hi", cassette="custom", check=False)
            assert record.status == "completed" and not record.passed
            assert "fewer steps than recorded" in record.failures[0]
        """,
    )
    calc.replies("custom", "test_unused_turns", "one", "two")
    calc.replies("custom", "test_unchecked", "one", "two")
    result = calc.run("-q", "test_agent.py")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines_random(
        [
            "test_agent.py:2: case 'test_no_cassette' (calc) failed",
            ("    0/1 runs passed, threshold 100% needs 1: "
            "no cassette for this case: expected cassettes/python/test_no_cassette.yaml*"),
            esc("test_agent.py:5: case 'test_unused_turns' (calc) failed"), esc("    0/1 runs passed, threshold 100% needs 1: "
                "*cassettes/custom/test_unused_turns.yaml: runs[0].turns: the agent completed run 1 after 1 of 2 "
                "recorded model turn(s); it took fewer steps than recorded"),
        ]
    )
    _clean(result)


def test_the_make_model_hook_applies_with_case_none(calc: ConnicProject) -> None:
    calc.write(
        "conftest.py",
        """
        def pytest_connic_make_model(config, agent, model, case, run_index):
            return lambda request: "case is %s, run %d" % (case, run_index)
        """,
    )
    calc.write(
        "test_agent.py",
        """
        def test_hooked(connic):
            assert [r.output for r in connic.run("calc", "hi", runs=2)] == ["case is None, run 0", "case is None, run 1"]
        """,
    )
    result = calc.run("-q", "test_agent.py")
    result.assert_outcomes(passed=1)


def test_bad_arguments_and_setup_problems_fail_clearly(calc: ConnicProject) -> None:
    calc.write(
        "test_agent.py",
        """
        def test_runs_out_of_range(connic):
            connic.run("echo", "hi", runs=500)

        def test_unknown_agent(connic):
            connic.run("eccho", "hi")

        def test_missing_fixture(connic):
            connic.run("echo", "hi", files=["nope.pdf"], check=False)

        def test_bad_expression(connic):
            connic.run("echo", "hi", expected_result="len(output) > 1")
        """,
    )
    result = calc.run("-q", "test_agent.py")
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines_random(
        [
            "*connic.run('echo'): runs: Input should be less than or equal to 100",
            "*connic.run: unknown agent 'eccho'; did you mean 'echo'? (agents: calc, echo)",
            "test_agent.py:8: case 'test_missing_fixture' (echo) could not be set up",
            ("    missing fixture: "
            "tests/files/nope.pdf does not exist"),
            "*connic.run('echo'): expected_result: *",
        ]
    )
    result.stdout.no_fnmatch_line("*During handling*")
    _clean(result)


def test_project_root_argument(calc: ConnicProject) -> None:
    outside = calc.pytester.path.parent / f"{calc.pytester.path.name}_outside"
    outside.mkdir()
    (outside / "test_elsewhere.py").write_text(
        "def test_from_outside(connic):\n"
        f"    record = connic.run_one('echo', {{'a': 1}}, project_root={str(calc.root)!r})\n"
        "    assert record.output == {'got': {'a': 1}}\n\n"
        "def test_no_project(connic):\n"
        "    connic.run('echo', 'hi')\n",
        "utf-8",
    )
    result = calc.pytester.runpytest("-p", "no:cacheprovider", "-q", str(outside / "test_elsewhere.py"))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([("*connic fixture: no Connic project (a folder with agents/) at or above *"
                                 "; pass project_root= to connic.run()")])
    _clean(result)


def test_async_tests_can_run_agents(calc: ConnicProject) -> None:
    pytest.importorskip("anyio")
    calc.write(
        "test_agent.py",
        """
        import pytest

        @pytest.mark.anyio
        async def test_async(connic):
            assert connic.run_one("echo", "hi").output == {"got": {"message": "hi"}}
        """,
    )
    result = calc.run("-q", "test_agent.py", "-k", "not trio")
    result.assert_outcomes(passed=1)
