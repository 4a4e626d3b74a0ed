"""Mistakes caught before the run (suite/static.py): located at collection, with the closest name."""

from __future__ import annotations

import pytest
import yaml

from helpers.project import ConnicProject, esc

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)


def test_unknown_tool_names_fail_their_case_in_setup_with_the_closest_name(calc: ConnicProject) -> None:
    calc.suite(
        "calc",
        """
        tests:
          - name: typo in calls
            payload: '{"a": 1}'
            expected_tool_calls:
              - ad
              - multiplyy: params.a == 1
          - name: typo in no calls
            payload: '{"a": 1}'
            expected_no_tool_calls: [calc.ad]
            expected_tool_calls: [calc.ad]
          - name: typo in order
            payload: '{"a": 1}'
            expected_tool_call_order: [calc.add, calc.multipy]
        """,
    )
    result = calc.run("-q", "-rE")
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines([
        esc("tests/calc.yaml:5:9: tests[0].expected_tool_calls[0]: agent 'calc' has no tool 'ad'; "
            "did you mean 'calc.add'? (its tools: calc.add, calc.multiply); the assertion could never hold"),
        esc("tests/calc.yaml:6:9: tests[0].expected_tool_calls[1].multiplyy: agent 'calc' has no tool "
            "'multiplyy'; did you mean 'calc.multiply'?*"),
        esc("tests/calc.yaml:10:27: tests[1].expected_tool_calls[0]: agent 'calc' has no tool 'calc.ad'*"),
        esc("tests/calc.yaml:13:42: tests[2].expected_tool_call_order[1]: agent 'calc' has no tool "
            "'calc.multipy'; did you mean 'calc.multiply'?*"),
    ])
    result.stdout.no_fnmatch_line("*no cassette*")  # nothing ran
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_a_vacuous_no_calls_entry_is_a_located_warning_and_the_case_runs(calc: ConnicProject) -> None:
    calc.suite(
        "calc",
        """
        tests:
          - name: never called
            payload: hi
            expected_no_tool_calls: [calc.ad]
        """,
    )
    calc.replies("calc", "never called", "done")
    result = calc.run("-q", "-W", "always::pytest_connic.warnings.ConnicWarning")
    result.assert_outcomes(passed=1)  # Connic passes it: it is vacuous, not wrong
    result.stdout.fnmatch_lines([
        esc("*tests/calc.yaml:4: ConnicLoadWarning: tests/calc.yaml:4:30: tests[0].expected_no_tool_calls[0]: "
            "agent 'calc' has no tool 'calc.ad'; did you mean 'calc.add'? (its tools: calc.add, calc.multiply); "
            "this assertion can never fail"),
        "    expected_no_tool_calls: [[]calc.ad[]]",  # pytest shows the suite's own line
    ])


def test_refs_function_names_and_predefined_tools_are_accepted(project: ConnicProject) -> None:
    project.tool("calc", "def add(a: int, b: int) -> dict:\n    \"\"\"Add.\"\"\"\n    return {'sum': a + b}\n")
    project.agent("calc", tools=["calc.add", "web_search"])
    project.suite(
        "calc",
        """
        tests:
          - name: names as the model and the trace see them
            payload: hi
            expected_tool_calls: [add, calc.add, web_search]
            expected_no_tool_calls: [web_search]
        """,
    )
    result = project.run("-q", "-rE")
    result.assert_outcomes(failed=1)  # it runs: it fails only for the missing cassette
    result.stdout.fnmatch_lines(["*no cassette*"])
    result.stdout.no_fnmatch_line("*has no tool*")


def test_a_sequential_pipeline_has_its_stages_tools(calc: ConnicProject) -> None:
    calc.agent("pipe", type="sequential", agents=["calc", "echo"])
    calc.suite(
        "pipe",
        """
        tests:
          - name: stage tools
            payload: hi
            expected_tool_calls: [calc.add, echo]
          - name: not a stage tool
            payload: hi
            expected_tool_calls: [calc.divide]
        """,
    )
    result = calc.run("-q", "-rE", "--collect-only")
    assert result.ret == 0  # collection itself succeeds; the invalid case fails in setup
    result = calc.run("-q", "-rE")
    result.stdout.fnmatch_lines([esc("tests/pipe.yaml:7:27: tests[1].expected_tool_calls[0]: agent 'pipe' has no "
                                     "tool 'calc.divide'*(its tools: calc.add, calc.echo, calc.multiply)*")])
    result.stdout.no_fnmatch_line("*'pipe' has no tool 'calc.add'*")
    result.stdout.no_fnmatch_line("*'pipe' has no tool 'echo'*")


def test_an_open_catalogue_gives_a_located_warning_and_the_case_runs(calc: ConnicProject) -> None:
    calc.agent("remote", tools=["calc.add"], mcp_servers=[{"name": "crm", "url": "http://127.0.0.1:9/mcp"}])
    calc.suite(
        "remote",
        """
        tests:
          - name: an MCP tool perhaps
            payload: hi
            expected_tool_calls: [crm_lookup]
        """,
    )
    result = calc.run("-q", "-rE", "-W", "always::pytest_connic.warnings.ConnicWarning")
    result.stdout.fnmatch_lines([
        ("*tests/remote.yaml:4:27: tests[[]0[]].expected_tool_calls[[]0[]]: agent 'remote' has no known tool "
         "'crm_lookup' (not checked: its MCP servers or api: tools are known only when it runs)*"),
    ])
    result.stdout.no_fnmatch_line("*the assertion could never hold*")
    strict = calc.run("-q", "-W", "error::pytest_connic.warnings.ConnicWarning")
    strict.stdout.fnmatch_lines(["*ConnicLoadWarning: tests/remote.yaml:4:27:*no known tool 'crm_lookup'*"])
    assert strict.ret == 1  # -W error: this file's collection fails with it (a suite that cannot run)


def test_unknown_child_agent_and_its_tools(calc: ConnicProject) -> None:
    calc.suite(
        "calc",
        """
        tests:
          - name: children
            payload: hi
            expected_child_agents:
              ech: {}
              echo:
                expected_tool_calls: [calc.echoo]
        """,
    )
    result = calc.run("-q", "-rE")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        esc("tests/calc.yaml:5:7: tests[0].expected_child_agents.ech: no agent 'ech' in this project; did you "
            "mean 'echo'? (agents: calc, echo); it can never be triggered"),
        esc("tests/calc.yaml:7:31: tests[0].expected_child_agents.echo.expected_tool_calls[0]: agent 'echo' has "
            "no tool 'calc.echoo'; did you mean 'calc.echo'?*"),
    ])


def test_approval_decisions_name_a_gated_tool_by_its_ref(calc: ConnicProject) -> None:
    calc.agent("gated", tools=["calc.add", "calc.multiply"], approval={"tools": ["calc.add"]})
    calc.suite(
        "gated",
        """
        tests:
          - name: short name
            payload: hi
            approval_decisions:
              - tool: add
                decision: approve
          - name: not gated
            payload: hi
            approval_decisions:
              - tool: calc.multiply
                decision: approve
        """,
    )
    result = calc.run("-q", "-rE", "--collect-only", "-W", "always::pytest_connic.warnings.ConnicWarning")
    assert result.ret == 0  # warnings: a decision that never answers is unused, the case may still be right
    result.stdout.fnmatch_lines([
        esc("*tests/gated.yaml:5:15: tests[0].approval_decisions[0].tool: approval decisions name the tool by "
            "its canonical ref: write 'calc.add', not 'add'*"),
        esc("*tests/gated.yaml:10:15: tests[1].approval_decisions[0].tool: no agent gates 'calc.multiply' by "
            "approval*(gated: calc.add); this decision could never answer a request"),
    ])


def test_unknown_agent_is_located_at_its_agent_key(calc: ConnicProject) -> None:
    calc.suite("some", "# a comment\nagent: calcc\ntests:\n  - name: x\n    payload: hi\n")
    result = calc.run("-q")
    result.stdout.fnmatch_lines(["*tests/some.yaml:2:1: unknown agent 'calcc'. Did you mean 'calc'?*"])
    # a suite Connic cannot run: exit 1, as `connic test` (2 is Connic's code for infrastructure)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_missing_mocks_and_builder_modules_have_a_close_name(calc: ConnicProject) -> None:
    calc.write("tests/mocks/calc_mocks.py", "def mock(tool_name, params, context):\n    return {}\n")
    calc.write("tests/builders/invoice.py", "def build(context, builder_args, test_name, payload, files):\n"
                                            "    return 'hi'\n")
    calc.suite(
        "calc",
        """
        defaults:
          mocks: calc_mock
        tests:
          - name: from defaults
            payload: hi
          - name: builder
            builder: invoices
        """,
    )
    result = calc.run("-q", "-rE")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines([
        esc("tests/calc.yaml:2:10: defaults.mocks: no mocks module tests/mocks/calc_mock.py; did you mean "
            "'calc_mocks'? (mocks: calc_mocks); Connic fails the case before the agent starts"),
        esc("tests/calc.yaml:7:14: tests[1].builder: no builder module tests/builders/invoices.py; did you mean "
            "'invoice'?*"),
    ])


def test_names_connic_calls_bound_to_values_are_errors(calc: ConnicProject) -> None:
    calc.write("tests/mocks/calc_mocks.py", "mock_calc_add = {'sum': 3}\n\ndef mock_calc(tool_name, params, context):\n"
                                            "    return {}\n")
    calc.write("tests/builders/b.py", "build = 'hello'\ncleanup = None\n")
    calc.suite(
        "calc",
        """
        tests:
          - name: mocks
            payload: hi
            mocks: calc_mocks
          - name: builder
            builder: b
        """,
    )
    result = calc.run("-q", "-rE")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines([
        esc("tests/calc.yaml:4:12: tests[0].mocks: tests/mocks/calc_mocks.py:1:1: 'mock_calc_add' is a dict, not "
            "a function; Connic calls it, so it must be a def (or another callable)"),
        esc("tests/calc.yaml:6:14: tests[1].builder: tests/builders/b.py:1:1: 'build' is 'hello' (str), not a "
            "function*"),
        esc("tests/calc.yaml:6:14: tests[1].builder: tests/builders/b.py:2:1: 'cleanup' is None, not a function*"),
    ])


def test_expression_hints_point_a_caret_at_the_spot(calc: ConnicProject) -> None:
    calc.suite(
        "calc",
        """
        tests:
          - name: assignment
            payload: hi
            expected_result: output.risk_level = "low"
          - name: keyword
            payload: hi
            expected_result: output.got.from == 1
        """,
    )
    result = calc.run("-q", "-rE")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines([
        esc("tests/calc.yaml:4:22: tests[0].expected_result: invalid syntax in expected_result: a single '=' is "
            "not a comparison: did you mean '=='?"),
        '    output.risk_level = "low"',
        "                      ^",
    ])
    result.stdout.fnmatch_lines([
        esc("tests/calc.yaml:7:22: tests[1].expected_result: invalid syntax in expected_result: 'from' is a "
            'Python keyword and cannot follow a dot; write output.got["from"]'),
        "    output.got.from == 1",
        "               ^",
    ])


# ------------------------------------------------------------------------ cassette hints


def test_a_hand_written_cassette_says_once_it_cannot_notice_a_changed_prompt(calc: ConnicProject) -> None:
    calc.suite("calc", "tests:\n  - name: one\n    payload: hi\n    runs: 3\n  - name: two\n    payload: hi\n")
    cassette = calc.replies("calc", "one", [("add", {"a": 1, "b": 2})], '{"sum": 3}')
    calc.replies("calc", "two", "done")
    result = calc.run("-q", "-W", "always::pytest_connic.warnings.ConnicWarning")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    note = "its turns carry no `request` digests (a hand-written cassette), so replay cannot notice a changed prompt"
    assert out.count(note) == 2  # once per cassette, not once per run
    result.stdout.fnmatch_lines([("*cassettes/calc/one.yaml: its turns carry no `request` digests*"
                                 "`pytest --connic-record-mode=digests` adds them*")])
    before = yaml.safe_load(cassette.read_text("utf-8"))

    digested = calc.run("-q", "--connic-record-mode", "digests", "-W", "always::pytest_connic.warnings.ConnicWarning")
    digested.assert_outcomes(passed=2)
    assert note not in digested.stdout.str()
    after = yaml.safe_load(cassette.read_text("utf-8"))
    turns = after["runs"][0]["turns"]
    assert all(set(turn["request"]) >= {"model", "digest"} for turn in turns)
    assert [{k: v for k, v in turn.items() if k != "request"} for turn in turns] == before["runs"][0]["turns"]

    again = calc.run("-q", "-W", "always::pytest_connic.warnings.ConnicWarning")
    again.assert_outcomes(passed=2)
    assert out.count(note) == 2 and again.stdout.str().count(note) == 0  # now it can notice a change


def test_a_pipeline_cassette_with_top_level_turns_says_where_the_stages_turns_go(calc: ConnicProject) -> None:
    calc.agent("pipe", type="sequential", agents=["calc", "echo"])
    calc.suite("pipe", "tests:\n  - name: p\n    payload: hi\n")
    calc.replies("pipe", "p", '{"sum": 3}')
    result = calc.run("-q")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        ("*no entry children.calc[[]0[]]*the run's top-level `turns:` (1) belong to the case's own agent, which never "
        "asked for a model (a sequential pipeline has none: each stage replays its own turns): write them under "
        "the stage, `- children: {calc: [[]{turns: [[]...[]]}[]]}` in place of `- turns: [[]...[]]`*"),
    ])
