"""Every YAML file of a project is read within bounds, not only suites (``test_loader_fuzz.py``):
agent files and ``_defaults.yaml`` (which the SDK reads with an unbounded ``yaml.safe_load``),
``connectors/*.yaml``, cassettes, and JSON nested past Python's stack in a model's answer.

Each refusal is quick and located; the rest of the project still runs.
"""

from __future__ import annotations

import time

import pytest

from helpers.project import ConnicProject

pytestmark = pytest.mark.timeout(120)  # a regression would hang in the SDK: fail instead

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
    started = time.perf_counter()
    result = project.run("-p", "no:timeout", "--continue-on-collection-errors", *args)
    assert time.perf_counter() - started < 20
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
