"""Issue 16, load warnings: what Connic's loader warns about (``connic lint`` shows it) appears
once per session as a located warning in pytest's summary, attributed to the user's file and
line; misspelt agent keys get a did-you-mean (docs/fidelity.md). Each warning once under xdist too:
the equivalence session (tests/plugin/test_xdist_reports.py) holds every one of them."""

from __future__ import annotations

import pytest

from helpers.equivalence import agent_with_typos
from helpers.project import CALC_TOOLS, ConnicProject

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

AGENT_WITH_TYPOS = agent_with_typos("echo")


def run(project: ConnicProject) -> pytest.RunResult:
    return project.run("-W", "always", "-p", "no:randomly")


def echo_suite(project: ConnicProject, names: tuple[str, ...] = ("one", "two")) -> None:
    cases = "".join(f"  - name: {n}\n    payload: hi\n    expected_result: status == 'completed'\n" for n in names)
    project.suite("echo", "tests:\n" + cases)
    project.suite("again", "agent: echo\ntests:\n" + cases)


def test_a_misspelt_agent_key_is_a_located_warning_with_the_closest_key(project: ConnicProject) -> None:
    project.tool("calc", CALC_TOOLS)
    project.write("agents/echo.yaml", AGENT_WITH_TYPOS)
    echo_suite(project)

    result = run(project)

    result.assert_outcomes(passed=4)  # Connic deploys it: a warning, not an error
    out = result.stdout.str()
    typo = ("agents/echo.yaml:6:1: max_iteration: unknown agent key 'max_iteration'; did you mean "
            "'max_iterations'? Connic's loader ignores unknown keys, so this setting has no effect, on "
            "Connic as here (prefix local extensions with 'x-')")
    assert out.count(typo) == 1
    result.stdout.fnmatch_lines([
        "*warnings summary*",
        "agents/echo.yaml:6",
        f"*agents/echo.yaml:6: UnknownAgentKeyWarning: {typo}",
    ])
    assert out.count("retry_options.max_dely: unknown agent key 'max_dely'; did you mean 'max_delay'?") == 1
    assert out.count("agents/echo.yaml:11:1: colour: unknown agent key 'colour', not a setting of Connic's "
                     "agent configuration") == 1
    assert "x-owner" not in out
    assert "pytest_connic" not in out.split("warnings summary", 1)[1]  # located at the user's file


def test_a_schema_that_does_not_load_is_warned_at_its_agent_file_once(project: ConnicProject) -> None:
    project.tool("calc", CALC_TOOLS)
    project.agent("loose", output_schema="nowhere")
    project.agent("echo", type="tool", tool_name="calc.echo", output_schema="nowhere")
    project.suite("loose", "tests:\n  - name: plain\n    payload: hi\n    expected_result: output == 'plain text'\n")
    project.replies("loose", "plain", "plain text")
    echo_suite(project)

    result = run(project)

    result.assert_outcomes(passed=5)
    out = result.stdout.str()
    unloaded = ("agents/loose.yaml: output_schema 'nowhere' of agent 'loose' could not be loaded "
                "(schemas/nowhere.json: the file does not exist); Connic's loader skips it, so the agent's "
                "output is not validated, here as on Connic")
    assert out.count(unloaded) == 1
    ignored = ("agents/echo.yaml: output_schema is only supported for LLM agents; Connic's loader ignores it "
               "for agent 'echo' (type: tool), here as on Connic")
    assert out.count(ignored) == 1
    line = next(n for n, text in enumerate((project.root / "agents/loose.yaml").read_text().splitlines(), 1)
                if text.startswith("output_schema:"))
    result.stdout.fnmatch_lines([f"*agents/loose.yaml:{line}: ConnicLoadWarning: {unloaded}"])


def test_middleware_that_does_not_parse_is_warned_at_collection_and_the_agent_runs_without_it(
        project: ConnicProject) -> None:
    project.tool("calc", CALC_TOOLS)
    project.agent("echo", type="tool", tool_name="calc.echo")
    project.write("middleware/echo.py", "def before(content, context):\n    return content +\n")
    echo_suite(project)

    result = run(project)

    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    message = ("middleware/echo.py: the middleware of agent 'echo' failed to load: invalid syntax (echo.py, line 2); "
               "Connic's loader (connic lint, connic deploy) only warns about it and the agent runs WITHOUT its "
               "middleware (before/after/cleanup), here as on Connic")
    assert out.count(message) == 1
    result.stdout.fnmatch_lines(["middleware/echo.py:2", f"*middleware/echo.py:2: ConnicLoadWarning: {message}*"])


BROKEN_IMPORT = '''
import not_installed_anywhere


def before(content, context):
    context["seen"] = True
    return content
'''


def test_middleware_that_fails_to_import_is_warned_once_when_its_agent_runs(project: ConnicProject) -> None:
    project.tool("calc", CALC_TOOLS)
    project.agent("echo", type="tool", tool_name="calc.echo")
    project.write("middleware/echo.py", BROKEN_IMPORT)
    project.write("hooks/echo.py", BROKEN_IMPORT.replace("def before(content, context)", "def before(tool_name, params, context)"))
    cases = "".join(f"  - name: {n}\n    payload: hi\n    expected_result: status == 'completed'\n"
                    for n in ("one", "two", "three"))
    project.suite("echo", "tests:\n" + cases)

    result = run(project)

    result.assert_outcomes(passed=3)  # the agent ran without its middleware, as on Connic
    out = result.stdout.str()
    message = ("middleware/echo.py: the middleware of agent 'echo' failed to load: No module named "
               "'not_installed_anywhere'; Connic's loader (connic lint, connic deploy) only warns about it and "
               "the agent runs WITHOUT its middleware")
    assert out.count(message) == 1
    result.stdout.fnmatch_lines([f"*middleware/echo.py:1: ConnicLoadWarning: {message}*"])


def test_an_api_spec_tool_ref_is_warned_at_its_line(project: ConnicProject) -> None:
    project.tool("calc", CALC_TOOLS)
    project.agent("desk", tools=["calc.add", "api:billing.get_invoice"])
    project.suite("desk", "tests:\n  - name: answers\n    payload: hi\n    expected_result: output == 'ok'\n")
    project.replies("desk", "answers", "ok")

    result = run(project)

    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    message = ("agents/desk.yaml: tools entry 'api:billing.get_invoice' of agent 'desk' is an API spec tool, "
               "configured in Connic's dashboard; with no spec registry Connic's loader skips it")
    assert out.count(message) == 1
    line = next(n for n, text in enumerate((project.root / "agents/desk.yaml").read_text().splitlines(), 1)
                if "api:billing" in text)
    result.stdout.fnmatch_lines([f"*agents/desk.yaml:{line}: ConnicLoadWarning: {message}*"])


def test_load_warnings_can_be_made_errors(project: ConnicProject) -> None:
    project.tool("calc", CALC_TOOLS)
    project.write("agents/echo.yaml", AGENT_WITH_TYPOS)
    echo_suite(project)

    result = project.run("-W", "error::pytest_connic.warnings.UnknownAgentKeyWarning")

    assert result.ret != 0
    result.stdout.fnmatch_lines(["*UnknownAgentKeyWarning: agents/echo.yaml:6:1: max_iteration: unknown agent key*"])


ANSWER_MODEL = '''
def pytest_connic_make_model(config, agent, model, case, run_index):
    return lambda request: "ok"
'''
#: docs/errors.md "Silencing a warning you know about", for the agent below
KNOWN = """[pytest]
filterwarnings =
    ignore:.*context_compression of agent 'chat' is not applied locally:pytest_connic.warnings.ConnicLoadWarning
    ignore:.*context_compression.session_history of agent 'chat':pytest_connic.warnings.ConnicWarning
"""


def test_context_compression_is_warned_once_per_session_with_relative_paths_and_can_be_silenced(
        project: ConnicProject) -> None:
    """Two public projects (knowledge-copilot, telegram-personal-assistant) showed these two warnings
    on every run, one with an absolute path, the runtime's once per xdist worker. Under xdist, a
    warning met by both workers at run time shown once, where the serial session shows it: the
    equivalence session (tests/plugin/test_xdist_reports.py, the middleware that fails to import)."""
    project.agent("chat", session=True, context_compression={"keep_recent_messages": 4,
                                                             "session_history": {"interval": 4}})
    project.write("conftest.py", ANSWER_MODEL)
    # four cases (under xdist, each of two workers would run two and meet the session's warning itself)
    project.suite("chat", "tests:\n" + "".join(f"  - name: c{i}\n    payload: hi\n" for i in range(4)))

    result = project.run("-p", "no:randomly")

    result.assert_outcomes(passed=4, warnings=2)
    summary = result.stdout.str().split("warnings summary", 1)[1].split("-- Docs:", 1)[0]
    assert summary.count("context_compression of agent 'chat' is not applied locally") == 1
    assert summary.count("context_compression.session_history of agent 'chat' is not simulated") == 1
    assert str(project.root) not in summary  # relative to where pytest runs, as pytest names files
    result.stdout.fnmatch_lines(["agents/chat.yaml:*", "  agents/chat.yaml:*: ConnicLoadWarning: *"])
    project.pytester.makeini(KNOWN)
    silenced = project.run("-p", "no:randomly")
    silenced.assert_outcomes(passed=4)
    assert "warnings summary" not in silenced.stdout.str()
