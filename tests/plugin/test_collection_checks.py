"""Mistakes caught before the run (suite/static.py) as a session shows them: a case's error fails it
in setup while its siblings run, a warning is located in pytest's summary at the suite's line and
fails collection under ``-W error``, an unknown agent is the file's collection error. What
``check_suite`` finds, message by message (tool names, stages, children, approvals, mocks and
builders, names bound to values, expression hints): tests/unit/suite/test_check_suite.py."""

from __future__ import annotations

import pytest
import yaml

from helpers.project import ConnicProject, esc

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)


def test_an_unknown_tool_name_fails_its_case_in_setup_and_its_sibling_runs(calc: ConnicProject) -> None:
    calc.suite("calc", """
        tests:
          - name: typo
            payload: hi
            expected_tool_calls: [ad]
          - name: fine
            payload: hi
    """)
    calc.replies("calc", "fine", "done")
    result = calc.run("-q", "-rE")
    result.assert_outcomes(errors=1, passed=1)
    result.stdout.fnmatch_lines([
        esc("tests/calc.yaml:4:27: tests[0].expected_tool_calls[0]: agent 'calc' has no tool 'ad'; "
            "did you mean 'calc.add'? (its tools: calc.add, calc.multiply); the assertion could never hold"),
    ])
    result.stdout.no_fnmatch_line("*no cassette*")  # the invalid case never ran
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


def test_unknown_agent_is_located_at_its_agent_key(calc: ConnicProject) -> None:
    calc.suite("some", "# a comment\nagent: calcc\ntests:\n  - name: x\n    payload: hi\n")
    result = calc.run("-q")
    result.stdout.fnmatch_lines(["*tests/some.yaml:2:1: unknown agent 'calcc'. Did you mean 'calc'?*"])
    # a suite Connic cannot run: exit 1, as `connic test` (2 is Connic's code for infrastructure)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


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
