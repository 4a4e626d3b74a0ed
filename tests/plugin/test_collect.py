"""Collection: Connic's discovery rules, node ids, located validation errors as a session shows
them (what each says: tests/unit/suite/test_suite_errors.py)."""

from __future__ import annotations

import gc
import re
from pathlib import Path

import pytest

from helpers.project import ConnicProject, esc

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
SIMPLE = """
tests:
  - name: {name}
    payload: '{{"x": 1}}'
"""


def test_collects_node_ids_with_connic_discovery(calc: ConnicProject) -> None:
    calc.suite("echo", SIMPLE.format(name="first"))
    calc.write("tests/nested/deep/echo_more.YAML", "agent: echo\n" + SIMPLE.format(name="upper case suffix"))
    calc.write("tests/.hidden/echo.yaml", SIMPLE.format(name="hidden dir"))
    calc.write("tests/.echo.yaml", "agent: echo\n" + SIMPLE.format(name="hidden file"))
    calc.write("tests/empty.yaml", "# only a comment\n")
    calc.write("tests/null.yaml", "null\n")
    result = calc.run("--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "tests/echo.yaml::first",
            "tests/nested/deep/echo_more.YAML::upper case suffix",
            "*2 tests collected*",
        ]
    )
    result.stdout.no_fnmatch_line("*hidden*")
    assert result.ret == 0


@pytest.mark.parametrize("autoload", [False, True], ids=["no-autoload", "autoload"])
@pytest.mark.parametrize("spelling", ["pytest_connic", "connic", "pytest_connic.plugin"])
def test_p_loads_the_plugin_by_each_documented_name(calc: ConnicProject, monkeypatch: pytest.MonkeyPatch,
                                                    spelling: str, autoload: bool) -> None:
    """docs/running.md "Loading the plugin": with autoloading off, ``-p`` loads the plugin by the
    package's name, the entry point's or the module's; with it on, the first two are no-ops (the
    module's is pytest's own "already registered" error, as for any plugin's module)."""
    if not autoload:
        monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    calc.suite("echo", SIMPLE.format(name="first"))
    result = calc.run("-p", spelling, "--collect-only", "-q")
    if autoload and spelling == "pytest_connic.plugin":  # loudly, never in silence
        assert result.ret != 0
        result.stderr.fnmatch_lines(["ValueError: Plugin already registered under a different name: connic=*"])
        return
    result.stdout.fnmatch_lines(["tests/echo.yaml::first", "*1 test collected*"])
    assert result.ret == 0


def test_yml_is_not_a_suite_and_connic_refuses_the_upload(calc: ConnicProject) -> None:
    calc.suite("echo", SIMPLE.format(name="real suite"))
    calc.write("tests/old.yml", SIMPLE.format(name="yml is not a suite"))
    result = calc.run("--collect-only", "-q")
    result.stdout.no_fnmatch_line("*yml is not a suite*")
    result.stdout.fnmatch_lines(["*Connic would refuse to upload this project: tests/old.yml: File type '.yml' not allowed*"])


def test_yaml_outside_a_connic_project_is_never_collected(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", **{"tests/x": SIMPLE.format(name="nope")})
    pytester.makepyfile(test_plain="def test_ok():\n    assert True\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["test_plain.py::test_ok", "*1 test collected*"])
    result.stdout.no_fnmatch_line("*nope*")


def test_python_tests_in_the_project_keep_working(calc: ConnicProject) -> None:
    calc.suite("echo", SIMPLE.format(name="case"))
    calc.write("test_unit.py", "def test_unit():\n    assert 1 + 1 == 2\n")
    result = calc.run("-q")
    result.assert_outcomes(passed=2)


def test_items_carry_marker_and_k_selects_by_case_name(calc: ConnicProject) -> None:
    calc.suite("echo", SIMPLE.format(name="login works") + "  - name: logout works\n    payload: '{}'\n")
    result = calc.run("-q", "-m", "connic", "-k", "login")
    result.assert_outcomes(passed=1, deselected=1)


def test_unknown_agent_is_a_collection_error_with_suggestions(calc: ConnicProject) -> None:
    calc.suite("calcc", SIMPLE.format(name="x"))
    result = calc.run("-q")
    result.stdout.fnmatch_lines(
        [
            (
                "*tests/calcc.yaml:1:1: unknown agent 'calcc' (from the file name; set `agent:` to target another"
                " agent). Did you mean 'calc'?*"
            )
        ]
    )
    assert result.ret != 0
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_unknown_key_names_location_and_closest_key(calc: ConnicProject) -> None:
    calc.suite(
        "echo",
        """
        tests:
          - name: typo
            payload: '{}'
            expected_tool_call:
              - calc.echo
          - name: fine
            payload: '{}'
        """,
    )
    result = calc.run("-q")
    result.stdout.fnmatch_lines(
        [
            esc("*tests/echo.yaml:4:5: tests[0].expected_tool_call: unknown key 'expected_tool_call';"
                " did you mean 'expected_tool_calls'?*")
        ]
    )
    # the invalid case fails alone in setup; its sibling runs
    result.assert_outcomes(passed=1, errors=1)


def test_invalid_case_fails_in_setup_with_location(calc: ConnicProject) -> None:
    """Each validation message, located: tests/unit/suite/test_suite_errors.py."""
    calc.suite("echo", "tests:\n  - name: a\n    payload: p\n    expected_result: len(output) > 0\n")
    result = calc.run("-q")
    result.stdout.fnmatch_lines([esc("*tests/echo.yaml:4:22: tests[0].expected_result: *call*")])
    result.assert_outcomes(errors=1)
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    result.stdout.no_fnmatch_line("*Traceback*")


def test_invalid_file_is_one_collection_error(calc: ConnicProject) -> None:
    """Each validation message, located: tests/unit/suite/test_suite_errors.py."""
    calc.suite("echo", "tests:\n  - name: a\n    payload: p\n  - name: a\n    payload: q\n")
    calc.suite("other", "agent: echo\ntests:\n  - name: other suite runs\n    payload: p\n")
    result = calc.run("-q", "--continue-on-collection-errors")
    result.stdout.fnmatch_lines([esc("*tests/echo.yaml:4:11: tests[1].name: Duplicate test name 'a' in file "
                                     "(first at line 2).*")])
    result.assert_outcomes(errors=1, passed=1)
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_yaml_fixture_under_tests_files_is_collected_as_a_suite_with_a_hint(calc: ConnicProject) -> None:
    """Discovery takes every tests/**/*.yaml (as Connic does); the hint's text: test_suite_errors.py."""
    calc.write("tests/files/data.yaml", "customers:\n  - ada\n")
    result = calc.run("-q")
    result.stdout.fnmatch_lines(["*unknown key 'customers'*", "*Connic parses every tests/**/*.yaml file as a suite*"])


def test_project_load_errors_are_reported(project: ConnicProject) -> None:
    project.agent("base-test-x")  # a variant whose base agent does not exist
    project.suite("base-test-x", SIMPLE.format(name="a"))
    result = project.run("-q")
    result.stdout.fnmatch_lines(["*the Connic project failed to load*", "*looks like a test variant*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # as `connic test`: a project that fails to load exits 1


def test_reportinfo_points_at_the_case_line(calc: ConnicProject) -> None:
    calc.suite("echo", "tests:\n  - name: a\n    payload: '{}'\n  - name: b\n    payload: '{}'\n")
    items, _ = calc.pytester.inline_genitems()
    assert [i.nodeid for i in items] == ["tests/echo.yaml::a", "tests/echo.yaml::b"]
    assert [i.reportinfo()[1] for i in items] == [1, 3]
    assert items[1].reportinfo()[2] == "echo::b"


# ========== every YAML file within bounds (folded from test_hardening_yaml.py) ==============================
# Every YAML file of a project is read within bounds, not only suites (``test_loader_fuzz.py``):
# agent files and ``_defaults.yaml`` (which the SDK reads with an unbounded ``yaml.safe_load``),
# ``connectors/*.yaml``, cassettes, and JSON nested past Python's stack in a model's answer.
#
# Each refusal is quick and located; the rest of the project still runs.

pytestmark = [pytest.mark.timeout(120), pytest.mark.isolation_none]  # a regression would hang in the SDK: fail instead

ECHO = 'from connic.tools import send_connector\n\n\n' \
       'def echo(payload: dict) -> dict:\n    """Echo."""\n    return {"got": payload}\n\n\n' \
       'async def notify(payload: dict) -> dict:\n    """Send a notification."""\n' \
       '    return await send_connector("notify", {"text": "hi"})\n'
SOUND = "tests:\n  - name: sound\n    payload: '{\"x\": 1}'\n    expected_result: output.got.x == 1\n"


def bomb(prefix: str = "b", levels: int = 9, width: int = 9) -> str:
    """Mappings of ``width`` aliases of the previous level: ``width ** levels`` values when expanded
    (the SDK's ``_defaults.yaml`` merge walks every path of two of them)."""
    lines = [f"{prefix}0: &{prefix}0 {{" + ", ".join(f"k{j}: lol" for j in range(width)) + "}"]
    for i in range(1, levels):
        keys = ", ".join(f"k{j}: *{prefix}{i - 1}" for j in range(width))
        lines.append(f"{prefix}{i}: &{prefix}{i} {{{keys}}}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def echo(project: ConnicProject) -> ConnicProject:
    """A tool agent ``echo`` with a passing suite (``zz-echo.yaml``, collected after the suite of any
    other agent, which carries the project's load errors), and a tool for a second agent."""
    project.tool("calc", ECHO)
    project.agent("echo", type="tool", tool_name="calc.echo")
    project.suite("zz-echo", "agent: echo\n" + SOUND)
    return project


def run(project: ConnicProject, *args: str) -> tuple[pytest.RunResult, str]:
    result = project.run("-p", "no:timeout", "--continue-on-collection-errors", *args)
    text = result.stdout.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text
    return result, text


OTHER = 'version: "1.0"\nname: other\ndescription: d\ntype: tool\ntool_name: calc.echo\n'


@pytest.mark.parametrize(
    ("agent", "defaults", "location"),
    [
        pytest.param(OTHER + bomb(), None, "agents/sub/other.yaml:6:", id="agent"),
        pytest.param(OTHER, bomb(), "agents/sub/_defaults.yaml:1:", id="defaults"),
        # the SDK deep-merges the two key by key: 9**8 paths to walk, it never finishes
        pytest.param(OTHER + bomb(), bomb(), "agents/sub/other.yaml:6:", id="defaults-and-agent"),
    ],
)
def test_an_alias_bomb_in_agent_yaml_is_refused_with_its_location(
    echo: ConnicProject, agent: str, defaults: str | None, location: str
) -> None:
    echo.write("agents/sub/other.yaml", agent)
    if defaults is not None:
        echo.write("agents/sub/_defaults.yaml", defaults)
    echo.suite("other", SOUND)
    result, _text = run(echo)
    result.assert_outcomes(passed=1, errors=1)  # echo's suite runs; other's reports the refusal
    result.stdout.fnmatch_lines([(
        f"*Failed to load agent: *{location}*: document too large: more than 200000 values "
        "(after alias expansion); Connic's loader (yaml.safe_load) has no such limit*"
    )])


def test_agent_yaml_nested_too_deeply_is_refused(echo: ConnicProject) -> None:
    echo.write("agents/other.yaml", 'version: "1.0"\nname: other\ndescription: d\nx-deep: ' + "[" * 5000
               + "]" * 5000 + "\n")
    echo.suite("other", SOUND)
    result, _text = run(echo)
    result.stdout.fnmatch_lines(["*Failed to load agent: agents/other.yaml:4:*: document nested too deeply*"])
    assert result.parseoutcomes()["passed"] == 1


def test_a_huge_agent_file_is_refused_before_it_is_parsed(echo: ConnicProject) -> None:
    path = echo.write("agents/other.yaml", 'version: "1.0"\nname: other\n')
    with path.open("a") as handle:
        handle.write("# " + "x" * (11 * 1024 * 1024) + "\n")
    echo.suite("other", SOUND)
    result, _text = run(echo)
    result.stdout.fnmatch_lines(["*Failed to load agent: agents/other.yaml:1:1: file too large: *bytes*"])


def test_an_alias_bomb_in_a_connector_fails_only_what_needs_connectors(echo: ConnicProject) -> None:
    echo.agent("notifier", type="tool", tool_name="calc.notify")
    echo.write("connectors/notify.yaml", "type: webhook\nmode: outbound\n" + bomb() + "config: *b8\n")
    echo.suite("notifier", "tests:\n  - name: sends\n    payload: '{}'\n    expected_result: status == 'completed'\n")
    result, _text = run(echo)
    result.assert_outcomes(passed=1, failed=1)  # echo completes (automatic outbound: nothing loads)
    result.stdout.fnmatch_lines(
        ["*connectors that failed to load: Failed to load connector: connectors/notify.yaml:*:*: document too large*"])


def test_an_alias_bomb_in_a_cassette_fails_its_case_with_the_location(project: ConnicProject) -> None:
    project.agent("calc")
    project.suite("calc", "tests:\n  - name: bombed\n    payload: hi\n  - name: fine\n    payload: hi\n")
    project.write("cassettes/calc/bombed.yaml", bomb() + "version: 1\nruns: [{turns: [{content: *b8}]}]\n")
    project.cassette("calc", "fine", [{"turns": [{"content": "ok"}]}])
    result, _text = run(project)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*cassettes/calc/bombed.yaml:*:*: document too large: more than 200000 values*"])


def test_an_answer_nested_past_the_stack_stays_text(project: ConnicProject) -> None:
    """``json.loads`` raises RecursionError, not ValueError, on JSON nested 100,000 deep."""
    project.agent("calc")
    deep = "[" * 100_000 + "]" * 100_000
    project.suite("calc", "tests:\n  - name: deep\n    payload: hi\n"
                          "    expected_result: status == 'completed' and output.x == null\n")
    project.cassette("calc", "deep", [{"turns": [{"content": deep}]}])
    result, _text = run(project, "--connic-json", "report.json")
    result.assert_outcomes(failed=1)  # the output is the text: no key x, and no crash
    result.stdout.fnmatch_lines([  # the run completed; only the check on the (text) output fails
        "*expected_result not satisfied: output.x == null where output.x = <missing>*",
        "*✓ calc (*ms)",
    ])


def nested_children_bomb() -> str:
    """``expected_child_agents`` aliased 9 ways per level: Connic's validation recurses into each."""
    lines = ["x-c0: &c0 {expected_triggered: 1}"]
    for i in range(1, 9):
        keys = ", ".join(f"k{j}: *c{i - 1}" for j in range(9))
        lines.append(f"x-c{i}: &c{i} {{expected_child_agents: {{{keys}}}}}")
    return "\n".join(lines) + "\ntests:\n  - name: a\n    payload: x\n    expected_child_agents: {top: *c8}\n"


def test_coverage_mode_is_bounded_too(echo: ConnicProject) -> None:
    """``--connic-coverage`` parses suites and agents as Connic does (``yaml.safe_load``), where a
    bomb never finishes validating; the bounded pre-check reports it as the file's parse error."""
    echo.suite("bombed", "agent: echo\n" + nested_children_bomb())
    echo.write("agents/other.yaml", OTHER + bomb())
    result, _text = run(echo, "--connic-coverage")
    result.stdout.fnmatch_lines([  # Connic's coverage error: every load and parse error on one line
        ("*✗ Failed to load agent: agents/other.yaml:6:*: document too large: more than 200000 values*"
        "; Test files failed to parse: tests/bombed.yaml:*:*: document too large: more than 200000 values*"),
    ])


# ------------------------------------------------------------------------ paused collector (docs/performance.md)


def test_collection_leaves_the_garbage_collector_as_it_found_it(calc: ConnicProject) -> None:
    calc.suite("echo", "agent: echo\ntests:\n  - name: one\n    payload: hi\n  - name: two\n    payload: hi\n")
    assert gc.isenabled()
    assert calc.run("--collect-only", "-q").ret == 0
    assert gc.isenabled()
    gc.disable()
    try:
        assert calc.run("--collect-only", "-q").ret == 0
        assert not gc.isenabled()
    finally:
        gc.enable()


# ------------------------------------------------------------------------ a whole pytest run over corpus files
# (the corpus: tests/corpus/, tests/unit/suite/test_validation_parity.py)


RUN_FILES = [
    "invalid/tests_empty_list", "invalid/version_float", "invalid/yaml_bad_indentation",
    "invalid/yaml_control_character", "invalid/duplicate_names", "invalid/files_non_ascii",
    "invalid/tool_calls_int", "invalid/approval_response_with_reject", "invalid/grandchild_null",
    "invalid/builder_args_int_key", "unknown_keys/case_expected_tool_call", "unknown_keys/top_agnet",
    "plugin_only/expected_result_call", "plugin_only/approval_params_singular",
]


def test_pytest_run_over_corpus_suites_reports_every_error_located(project: ConnicProject) -> None:
    names = []
    for rel in RUN_FILES:
        source = CORPUS / f"{rel}.yaml"
        name = source.stem.replace("_", "-")
        (project.root / "tests" / f"{name}.yaml").parent.mkdir(exist_ok=True)
        (project.root / "tests" / f"{name}.yaml").write_bytes(source.read_bytes())
        project.agent(name)
        names.append(name)
    result = project.run("-q", "-rE", "--continue-on-collection-errors")
    output = result.stdout.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output
    assert "pytest_connic" not in output  # no frame of plugin code
    result.assert_outcomes(errors=len(names))  # collection errors and invalid cases failing in setup
    section = output.split("= ERRORS =", 1)[1].split("\n=", 1)[0]
    messages = [line for line in section.splitlines()[1:] if not re.match(r"_{3,} ERROR ", line)
                and not line.startswith("    ")]  # an expression's echo and caret, under its message
    assert len(messages) == len(names)  # one located line per suite, nothing else (no traceback)
    for line in messages:
        assert re.match(r"tests/[\w-]+\.yaml:\d+:\d+: \S", line), line
    assert {line.split(".yaml:", 1)[0].removeprefix("tests/") for line in messages} == set(names)
    summary = [line for line in output.splitlines() if line.startswith("ERROR ")]
    assert len(summary) == len(names)
    for line in summary:  # collection errors are listed by file; setup errors add their (cut) message
        assert re.fullmatch(r"ERROR tests/[\w-]+\.yaml(::\S+ - Failed: tests/.*)?", line), line


def test_cases_that_never_ran_are_in_no_report(calc: ConnicProject) -> None:
    """As pytest reports nothing for tests it never ran: after a collection error (`--co` too) and
    after a `--sw` stop, the cases that never started are in no table, no JSON, no JUnit; a real
    interruption (Ctrl-C) still lists them as interrupted (tests/plugin/test_interrupts.py)."""
    calc.suite("echo", """
        tests:
          - name: fails first
            payload: '{"x": 1}'
            expected_result: output.got.x == 2
          - name: never runs
            payload: '{"x": 1}'
    """)
    calc.write("tests/broken.yaml", "tests:\n  - name: [broken\n")
    for args in (("--co", "-q"), ("-q",)):
        result = calc.run(*args)
        assert result.ret == pytest.ExitCode.TESTS_FAILED  # pytest stops; a suite Connic cannot run: 1
        result.stdout.no_fnmatch_line("*connic results*")
        result.stdout.no_fnmatch_line("*cases passed*")
        result.stdout.no_fnmatch_line("*INTR*")
    (calc.root / "tests/broken.yaml").unlink()
    result = calc.pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:randomly", "--sw",
                                     "--connic-json", "report.json", "--junitxml", "junit.xml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*0/1 cases passed.*"])
    result.stdout.no_fnmatch_line("*never runs*")
    import json

    assert [c["test_name"] for c in json.loads((calc.root / "report.json").read_text())["cases"]] == ["fails first"]
    assert "never runs" not in (calc.root / "junit.xml").read_text()


def test_after_x_under_xdist_the_cases_that_never_ran_are_in_no_report(calc: ConnicProject) -> None:
    """``-n 2 -x``: xdist stops with its own ``Interrupted``; the case queued behind the failure on
    its worker never runs and, as a Python test there, is reported nowhere (it was ``SKIPPED
    tests/echo.yaml:1: interrupted``)."""
    pytest.importorskip("xdist")
    # four cases: xdist's load scheduling gives each worker two, "never runs" after "fails first"
    calc.suite("echo", "tests:\n" + "".join(
        f"  - name: {name}\n    payload: '{{\"x\": 1}}'\n    expected_result: output.got.x == {want}\n"
        for name, want in (("fails first", 2), ("never runs", 1), ("third", 1), ("fourth", 1))))
    result = calc.run("-p", "no:randomly", "-n", "2", "-x", "-rA", "--connic-json", "report.json",
                      "--junitxml", "junit.xml")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # xdist's exit after -x, for Python tests too
    result.assert_outcomes(failed=1, passed=2)
    result.stdout.no_fnmatch_line("*SKIPPED*")
    result.stdout.no_fnmatch_line("*never runs*")
    import json

    report = json.loads((calc.root / "report.json").read_text())
    assert sorted(c["test_name"] for c in report["cases"]) == ["fails first", "fourth", "third"]
    assert "never runs" not in (calc.root / "junit.xml").read_text()
