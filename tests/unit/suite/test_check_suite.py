"""``check_suite`` below pytest (suite/static.py): the mistakes caught before the run, located at
the suite's line and column with the closest name. A case's mistake is its ``CaseSpec.error`` (it
fails in setup, its siblings run); a suite's mistake that could still be right is a located
warning. How a session shows them (a setup error, a warning in pytest's summary, ``-W error``):
tests/plugin/test_collection_checks.py."""

from __future__ import annotations

from helpers.harness import CaseProject
from pytest_connic.project.index import index_project
from pytest_connic.suite.loader import load_suite
from pytest_connic.suite.static import check_suite

NEVER_HOLDS = "; the assertion could never hold"
CALC_TOOLS_ARE = " (its tools: calc.add, calc.multiply)"
CALLED = "; Connic calls it, so it must be a def (or another callable)"


def checked(project: CaseProject, suite: str) -> tuple[dict[str, list[str]], list[tuple[int, str]]]:
    """The errors of each case of ``tests/<suite>.yaml`` (one a line) and the warnings, by line."""
    loaded = load_suite(project.root / "tests" / f"{suite}.yaml", project.root)
    assert loaded is not None
    warnings = check_suite(loaded, index_project(project.root))
    errors = {case.name: case.error.split("\n") if case.error else [] for case in loaded.cases}
    return errors, [(w.line, w.message) for w in warnings]


def test_unknown_tool_names_are_errors_with_the_closest_name(calc_cases: CaseProject) -> None:
    calc_cases.suite("calc", """
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
          - name: fine
            payload: '{"a": 1}'
            expected_tool_calls: [add, calc.multiply]
    """)
    errors, warnings = checked(calc_cases, "calc")
    assert errors == {
        "typo in calls": [
            (f"tests/calc.yaml:5:9: tests[0].expected_tool_calls[0]: agent 'calc' has no tool 'ad'; did you mean "
            f"'calc.add'?{CALC_TOOLS_ARE}{NEVER_HOLDS}"),
            (f"tests/calc.yaml:6:9: tests[0].expected_tool_calls[1].multiplyy: agent 'calc' has no tool 'multiplyy'; "
            f"did you mean 'calc.multiply'?{CALC_TOOLS_ARE}{NEVER_HOLDS}"),
        ],
        "typo in no calls": [(f"tests/calc.yaml:10:27: tests[1].expected_tool_calls[0]: agent 'calc' has no tool "
                             f"'calc.ad'; did you mean 'calc.add'?{CALC_TOOLS_ARE}{NEVER_HOLDS}")],
        "typo in order": [(f"tests/calc.yaml:13:42: tests[2].expected_tool_call_order[1]: agent 'calc' has no tool "
                          f"'calc.multipy'; did you mean 'calc.multiply'?{CALC_TOOLS_ARE}{NEVER_HOLDS}")],
        "fine": [],
    }
    # the expected_no_tool_calls entry of the second case: vacuous, not wrong (below)
    assert [line for line, _ in warnings] == [9]


def test_a_vacuous_no_calls_entry_is_a_located_warning_and_no_error(calc_cases: CaseProject) -> None:
    calc_cases.suite("calc", "tests:\n  - name: never called\n    payload: hi\n    expected_no_tool_calls: [calc.ad]\n")
    errors, warnings = checked(calc_cases, "calc")
    assert errors == {"never called": []}  # Connic passes it: it is vacuous, not wrong
    assert warnings == [(4, ("tests/calc.yaml:4:30: tests[0].expected_no_tool_calls[0]: agent 'calc' has no tool "
                            f"'calc.ad'; did you mean 'calc.add'?{CALC_TOOLS_ARE}; this assertion can never fail"))]


def test_refs_function_names_and_predefined_tools_are_accepted(case_project: CaseProject) -> None:
    case_project.tool("calc", "def add(a: int, b: int) -> dict:\n    \"\"\"Add.\"\"\"\n    return {'sum': a + b}\n")
    case_project.agent("calc", tools=["calc.add", "web_search"])
    case_project.suite("calc", """
        tests:
          - name: names as the model and the trace see them
            payload: hi
            expected_tool_calls: [add, calc.add, web_search]
            expected_no_tool_calls: [web_search]
    """)
    assert checked(case_project, "calc") == ({"names as the model and the trace see them": []}, [])


def test_a_sequential_pipeline_has_its_stages_tools(calc_cases: CaseProject) -> None:
    calc_cases.agent("pipe", type="sequential", agents=["calc", "echo"])
    calc_cases.suite("pipe", """
        tests:
          - name: stage tools
            payload: hi
            expected_tool_calls: [calc.add, echo]
          - name: not a stage tool
            payload: hi
            expected_tool_calls: [calc.divide]
    """)
    errors, warnings = checked(calc_cases, "pipe")
    assert errors == {
        "stage tools": [],
        "not a stage tool": ["tests/pipe.yaml:7:27: tests[1].expected_tool_calls[0]: agent 'pipe' has no tool "
                             "'calc.divide'; did you mean 'calc.add'? (its tools: calc.add, calc.echo, calc.multiply)"
                             + NEVER_HOLDS],
    }
    assert warnings == []


def test_an_open_catalogue_is_a_located_warning_and_no_error(calc_cases: CaseProject) -> None:
    calc_cases.agent("remote", tools=["calc.add"], mcp_servers=[{"name": "crm", "url": "http://127.0.0.1:9/mcp"}])
    calc_cases.suite("remote", "tests:\n  - name: an MCP tool perhaps\n    payload: hi\n    expected_tool_calls: [crm_lookup]\n")
    assert checked(calc_cases, "remote") == ({"an MCP tool perhaps": []}, [(4, (
        "tests/remote.yaml:4:27: tests[0].expected_tool_calls[0]: agent 'remote' has no known tool 'crm_lookup' "
        "(not checked: its MCP servers or api: tools are known only when it runs)"))])


def test_unknown_child_agent_and_its_tools(calc_cases: CaseProject) -> None:
    calc_cases.suite("calc", """
        tests:
          - name: children
            payload: hi
            expected_child_agents:
              ech: {}
              echo:
                expected_tool_calls: [calc.echoo]
    """)
    errors, warnings = checked(calc_cases, "calc")
    assert errors == {"children": [
        ("tests/calc.yaml:5:7: tests[0].expected_child_agents.ech: no agent 'ech' in this project; did you mean "
         "'echo'? (agents: calc, echo); it can never be triggered"),
        ("tests/calc.yaml:7:31: tests[0].expected_child_agents.echo.expected_tool_calls[0]: agent 'echo' has no tool "
         "'calc.echoo'; did you mean 'calc.echo'? (its tools: calc.echo)" + NEVER_HOLDS),
    ]}
    assert warnings == []


def test_approval_decisions_name_a_gated_tool_by_its_ref(calc_cases: CaseProject) -> None:
    calc_cases.agent("gated", tools=["calc.add", "calc.multiply"], approval={"tools": ["calc.add"]})
    calc_cases.suite("gated", """
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
    """)
    errors, warnings = checked(calc_cases, "gated")
    assert errors == {"short name": [], "not gated": []}  # a decision that never answers: the case may still be right
    assert warnings == [
        (5, ("tests/gated.yaml:5:15: tests[0].approval_decisions[0].tool: approval decisions name the tool by its "
             "canonical ref: write 'calc.add', not 'add' (Connic matches a decision by its canonical ref, never by "
             "a short name: this decision never answers a request)")),
        (10, ("tests/gated.yaml:10:15: tests[1].approval_decisions[0].tool: no agent gates 'calc.multiply' by "
              "approval (gated: calc.add); this decision could never answer a request")),
    ]


def test_missing_mocks_and_builder_modules_have_a_close_name(calc_cases: CaseProject) -> None:
    calc_cases.write("tests/mocks/calc_mocks.py", "def mock(tool_name, params, context):\n    return {}\n")
    calc_cases.write("tests/builders/invoice.py", "def build(context, builder_args, test_name, payload, files):\n"
                                                  "    return 'hi'\n")
    calc_cases.suite("calc", """
        defaults:
          mocks: calc_mock
        tests:
          - name: from defaults
            payload: hi
          - name: builder
            builder: invoices
    """)
    mocks = ("tests/calc.yaml:2:10: defaults.mocks: no mocks module tests/mocks/calc_mock.py; did you mean "
             "'calc_mocks'? (mocks: calc_mocks); Connic fails the case before the agent starts")
    errors, warnings = checked(calc_cases, "calc")
    assert errors == {"from defaults": [mocks], "builder": [
        ("tests/calc.yaml:7:14: tests[1].builder: no builder module tests/builders/invoices.py; did you mean "
         "'invoice'? (builders: invoice); Connic fails the case before the agent starts"), mocks]}
    assert warnings == []


def test_names_connic_calls_bound_to_values_are_errors(calc_cases: CaseProject) -> None:
    calc_cases.write("tests/mocks/calc_mocks.py", "mock_calc_add = {'sum': 3}\n\ndef mock_calc(tool_name, params, context):\n"
                                                  "    return {}\n")
    calc_cases.write("tests/builders/b.py", "build = 'hello'\ncleanup = None\n")
    calc_cases.suite("calc", """
        tests:
          - name: mocks
            payload: hi
            mocks: calc_mocks
          - name: builder
            builder: b
    """)
    errors, warnings = checked(calc_cases, "calc")
    assert errors == {
        "mocks": [(f"tests/calc.yaml:4:12: tests[0].mocks: tests/mocks/calc_mocks.py:1:1: 'mock_calc_add' is a dict, "
                  f"not a function{CALLED}")],
        "builder": [(f"tests/calc.yaml:6:14: tests[1].builder: tests/builders/b.py:1:1: 'build' is 'hello' (str), not "
                    f"a function{CALLED}"),
                    (f"tests/calc.yaml:6:14: tests[1].builder: tests/builders/b.py:2:1: 'cleanup' is None, not a "
                    f"function{CALLED}")],
    }
    assert warnings == []


def test_expression_hints_point_a_caret_at_the_spot(calc_cases: CaseProject) -> None:
    calc_cases.suite("calc", """
        tests:
          - name: assignment
            payload: hi
            expected_result: output.risk_level = "low"
          - name: keyword
            payload: hi
            expected_result: output.got.from == 1
    """)
    errors, _ = checked(calc_cases, "calc")
    assert errors == {
        "assignment": [("tests/calc.yaml:4:22: tests[0].expected_result: invalid syntax in expected_result: a single "
                       "'=' is not a comparison: did you mean '=='?"),
                       '    output.risk_level = "low"',
                       "                      ^"],
        "keyword": [("tests/calc.yaml:7:22: tests[1].expected_result: invalid syntax in expected_result: 'from' is a "
                    'Python keyword and cannot follow a dot; write output.got["from"]'),
                    "    output.got.from == 1",
                    "               ^"],
    }
