"""``pytest_connic.coverage.compute`` against Connic's own ``connic test --coverage`` (spec §8.7).

Every project is measured twice: by the SDK's ``connic.cli._compute_local_coverage`` and by
``compute_coverage``; the two reports must be the same JSON, key order and floats included.
Each test also pins the value its rule produces, so a rule that both implementations lost
would still be caught.
"""

from __future__ import annotations

import contextlib
import json
import re
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_connic.coverage.compute import (
    compute_coverage,
    coverage_exit_status,
    resolve_tool,
    tool_inventory,
)
from pytest_connic.coverage.render import render_coverage, render_runtime_coverage
from pytest_connic.coverage.runtime import (
    add_runtime_coverage,
    asserted_from_suites,
    merge_called,
    params_in_expression,
)

TOOLS = {
    "tools/calc.py": '''
        def add(a: int, b: int) -> int:
            """Add two numbers.

            Args:
                a: The first addend.
                b: The second addend.
            """
            return a + b


        def sub(a: int, b: int) -> int:
            """Subtract b from a."""
            return a - b


        def _private(x: int) -> int:
            """Not a tool."""
            return x
    ''',
    "tools/math/calc.py": '''
        def mul(x: float, y: float = 1.0) -> float:
            """Multiply x by y."""
            return x * y
    ''',
    "tools/lookup.py": '''
        async def find_user(email: str, context: dict) -> dict:
            """Find a user by e-mail."""
            return {"email": email}
    ''',
    "tools/jobs.py": '''
        def run(payload: dict) -> dict:
            """Run the job described by the payload."""
            return payload
    ''',
}


def llm(name: str, tools: list[str] | None = None, discoverable: list[str] | None = None) -> str:
    """An LLM agent's YAML."""
    lines = [
        'version: "1.0"',
        f"name: {name}",
        f"description: The {name} agent.",
        "type: llm",
        "model: gemini/gemini-2.5-flash",
        "system_prompt: Be helpful.",
        f"tools: {json.dumps(tools or [])}",
    ]
    if discoverable:
        lines.append(f"discoverable_tools: {json.dumps(discoverable)}")
    return "\n".join(lines) + "\n"


TOOL_AGENT = 'version: "1.0"\nname: tooler\ndescription: Runs a job.\ntype: tool\ntool_name: jobs.run\n'
SEQUENTIAL = (
    'version: "1.0"\nname: pipeline\ndescription: Chains agents.\ntype: sequential\n'
    "agents: [assistant, tooler]\n"
)


def suite(*cases: str, agent: str | None = None) -> str:
    """A suite with the given cases (YAML snippets, each starting with ``name:``, payload optional)."""
    text = 'version: "1.0"\n' + (f"agent: {agent}\n" if agent else "") + "tests:\n"
    for case in cases:
        first, *rest = textwrap.dedent(case).strip().splitlines()
        if not any(line.startswith(("payload:", "builder:")) for line in rest):
            rest.insert(0, "payload: go")  # Connic requires one of the two
        text += f"  - {first}\n" + "".join(f"    {line}\n" for line in rest)
    return text


def write(root: Path, files: Mapping[str, str]) -> Path:
    """Write a Connic project under ``root`` and return ``root``."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


@pytest.fixture
def sdk_coverage() -> Callable[[Path], dict[str, Any]]:
    """Connic's own implementation; the tests skip when the SDK moved or renamed it."""
    cli = pytest.importorskip("connic.cli")
    function = getattr(cli, "_compute_local_coverage", None)
    if function is None:
        pytest.skip("connic.cli._compute_local_coverage is gone from this SDK; parity cannot be checked")
    return function  # type: ignore[no-any-return]


@pytest.fixture
def parity(sdk_coverage: Callable[[Path], dict[str, Any]]) -> Callable[[Path], dict[str, Any]]:
    """Compute both reports, assert they are the same JSON, return ours."""

    def check(root: Path) -> dict[str, Any]:
        theirs = sdk_coverage(root)
        ours = compute_coverage(root)
        assert set(ours) == set(theirs)
        for key in theirs:
            if key != "agents":
                assert ours[key] == theirs[key], key
        assert len(ours["agents"]) == len(theirs["agents"])
        for mine, expected in zip(ours["agents"], theirs["agents"]):
            assert list(mine) == list(expected)
            for field, value in expected.items():
                assert mine[field] == value, (expected["name"], field)
                assert type(mine[field]) is type(value), (expected["name"], field)
        assert json.dumps(ours) == json.dumps(theirs)  # key order and float repr too
        return ours

    return check


def row(report: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The report row of agent ``name``."""
    return next(r for r in report["agents"] if r["name"] == name)


# --------------------------------------------------------------------------- the rules


def test_exact_ref_and_nested_module(tmp_path: Path, parity: Callable[[Path], dict[str, Any]]) -> None:
    write(
        tmp_path,
        {**TOOLS, "agents/assistant.yaml": llm("assistant", ["calc.add", "calc.sub", "math.calc.mul"])},
    )
    write(
        tmp_path, {"tests/assistant.yaml": suite("name: a\nexpected_tool_calls: [calc.add, math.calc.mul]")}
    )
    r = row(parity(tmp_path), "assistant")
    assert (r["tools_covered"], r["tools_total"], r["uncovered_tools"]) == (2, 3, ["calc.sub"])
    assert r["percent"] == 100.0 * 2 / 3  # unrounded


def test_short_name_fallback_and_wrong_module_prefix(
    tmp_path: Path, parity: Callable[[Path], dict[str, Any]]
) -> None:
    write(
        tmp_path,
        {**TOOLS, "agents/assistant.yaml": llm("assistant", ["calc.add", "calc.sub", "math.calc.mul"])},
    )
    case = "name: a\nexpected_tool_calls:\n  - add\n  - wrongmodule.sub: params.a == 1\n  - calc.nothing"
    write(tmp_path, {"tests/assistant.yaml": suite(case)})
    r = row(parity(tmp_path), "assistant")
    assert r["uncovered_tools"] == ["math.calc.mul"]
    assert r["tools_covered"] == 2


def test_discovery_markers_do_not_count(tmp_path: Path, parity: Callable[[Path], dict[str, Any]]) -> None:
    agent = llm("assistant", ["calc.add"], discoverable=["lookup.find_user"])
    case = "name: a\nexpected_tool_calls: [search_tools, use_tool, find_user]"
    write(tmp_path, {**TOOLS, "agents/assistant.yaml": agent, "tests/assistant.yaml": suite(case)})
    r = row(parity(tmp_path), "assistant")
    assert r["tools_total"] == 2  # calc.add + lookup.find_user; search_tools/use_tool excluded
    assert (r["uncovered_tools"], r["percent"]) == (["calc.add"], 50.0)


def test_order_counts_and_no_tool_calls_does_not(
    tmp_path: Path, parity: Callable[[Path], dict[str, Any]]
) -> None:
    case = "name: a\nexpected_tool_call_order: [calc.sub]\nexpected_no_tool_calls: [calc.add]"
    write(tmp_path, {**TOOLS, "agents/assistant.yaml": llm("assistant", ["calc.add", "calc.sub"])})
    write(tmp_path, {"tests/assistant.yaml": suite(case)})
    assert row(parity(tmp_path), "assistant")["uncovered_tools"] == ["calc.add"]


def test_predefined_tools_count(tmp_path: Path, parity: Callable[[Path], dict[str, Any]]) -> None:
    case = "name: a\nexpected_tool_calls:\n  - db_find: params.collection == 'users'"
    write(
        tmp_path, {**TOOLS, "agents/assistant.yaml": llm("assistant", ["db_find", "web_search", "calc.add"])}
    )
    write(tmp_path, {"tests/assistant.yaml": suite(case)})
    r = row(parity(tmp_path), "assistant")
    assert r["uncovered_tools"] == ["calc.add", "web_search"]


def test_no_suites_scores_zero(tmp_path: Path, parity: Callable[[Path], dict[str, Any]]) -> None:
    files = {
        **TOOLS,
        "agents/assistant.yaml": llm("assistant", ["calc.add"]),
        "agents/tooler.yaml": TOOL_AGENT,
    }
    report = parity(write(tmp_path, {**files, "agents/pipeline.yaml": SEQUENTIAL}))
    assert [(r["name"], r["has_tests"], r["percent"]) for r in report["agents"]] == [
        ("assistant", False, 0.0),
        ("pipeline", False, 0.0),
        ("tooler", False, 0.0),
    ]
    assert report["overall"] == 0.0
    assert coverage_exit_status(report) == 0


def test_tool_agent_and_sequential_agent_covered_by_a_suite(
    tmp_path: Path, parity: Callable[[Path], dict[str, Any]]
) -> None:
    files = {
        **TOOLS,
        "agents/assistant.yaml": llm("assistant", ["calc.add"]),
        "agents/tooler.yaml": TOOL_AGENT,
    }
    files |= {"agents/pipeline.yaml": SEQUENTIAL, "tests/tooler.yaml": suite("name: runs\npayload: '{}'")}
    files |= {"tests/pipeline.yaml": suite("name: chains\npayload: go")}
    report = parity(write(tmp_path, files))
    assert (row(report, "tooler")["tools_covered"], row(report, "tooler")["percent"]) == (1, 100.0)
    assert (row(report, "pipeline")["tools_total"], row(report, "pipeline")["percent"]) == (0, 100.0)
    assert report["overall"] == (0.0 + 100.0 + 100.0) / 3


def test_ab_variant_is_skipped(tmp_path: Path, parity: Callable[[Path], dict[str, Any]]) -> None:
    files = {**TOOLS, "agents/assistant.yaml": llm("assistant", ["calc.add"])}
    files |= {"agents/assistant-test-x.yaml": llm("assistant-test-x", ["calc.add", "calc.sub"])}
    files |= {
        "tests/variant.yaml": suite("name: a\nexpected_tool_calls: [calc.sub]", agent="assistant-test-x")
    }
    report = parity(write(tmp_path, files))
    assert [r["name"] for r in report["agents"]] == ["assistant"]
    assert "error" not in report


def test_broken_suite_of_an_ab_variant_is_a_global_error(
    tmp_path: Path, parity: Callable[[Path], dict[str, Any]]
) -> None:
    files = {**TOOLS, "agents/assistant.yaml": llm("assistant", ["calc.add"])}
    files |= {"agents/assistant-test-x.yaml": llm("assistant-test-x", ["calc.add"])}
    report = parity(write(tmp_path, {**files, "tests/assistant-test-x.yaml": "tests: []\n"}))
    assert report["error"].startswith("Test files failed to parse: tests/assistant-test-x.yaml: ")


def test_parse_error_makes_percent_none(tmp_path: Path, parity: Callable[[Path], dict[str, Any]]) -> None:
    files = {
        **TOOLS,
        "agents/assistant.yaml": llm("assistant", ["calc.add"]),
        "agents/tooler.yaml": TOOL_AGENT,
    }
    files |= {"tests/assistant.yaml": suite("name: a\nexpected_tool_calls: [calc.add]")}
    files |= {"tests/sub/more.yaml": "agent: assistant\nversion: 1.0\ntests: [{name: b, payload: x}]\n"}
    files |= {"tests/tooler.yaml": suite("name: runs")}
    report = parity(write(tmp_path, files))
    r = row(report, "assistant")
    assert r["percent"] is None and r["has_tests"] is True
    assert r["parse_error"].startswith("tests/sub/more.yaml: 1 validation error for TestFile\nversion\n")
    assert report["overall"] == 100.0  # the broken agent is left out of the mean
    assert "error" not in report
    assert coverage_exit_status(report) == 1


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("- just\n- a list\n", id="not-a-mapping"),
        pytest.param("tests: [unclosed\n", id="yaml-syntax"),
        pytest.param("agent: 42\ntests: [{name: a}]\n", id="agent-not-a-string"),
        pytest.param("1: x\ntests: [{name: a}]\n", id="non-string-key"),
        pytest.param("tests: [{name: a}, {name: a}]\n", id="duplicate-case"),
        pytest.param(
            "tests:\n  - name: a\n    expected_tool_calls: [{calc.add: x, calc.sub: y}]\n", id="two-keys"
        ),
    ],
)
def test_parse_error_messages_are_connics(
    tmp_path: Path, parity: Callable[[Path], dict[str, Any]], text: str
) -> None:
    files = {**TOOLS, "agents/assistant.yaml": llm("assistant", ["calc.add"]), "tests/assistant.yaml": text}
    r = row(parity(write(tmp_path, files)), "assistant")
    assert r["parse_error"].startswith("tests/assistant.yaml: ")


def test_broken_suite_for_an_unknown_agent_is_a_global_error(
    tmp_path: Path, parity: Callable[[Path], dict[str, Any]]
) -> None:
    files = {**TOOLS, "agents/assistant.yaml": llm("assistant", ["calc.add"])}
    files |= {"tests/assistant.yaml": "tests: []\n", "tests/ghost.yaml": "tests: {}\n"}
    files |= {"tests/valid_ghost.yaml": suite("name: a\nexpected_tool_calls: [calc.add]")}  # ignored
    report = parity(write(tmp_path, files))
    # Every parse error is listed, the known agent's too, grouped by agent.
    assert re.fullmatch(
        r"Test files failed to parse: tests/assistant\.yaml: .*; tests/ghost\.yaml: .*",
        report["error"],
        re.DOTALL,
    )
    assert row(report, "assistant")["percent"] is None
    assert coverage_exit_status(report) == 1


def test_global_error_groups_parse_errors_by_agent(
    tmp_path: Path, parity: Callable[[Path], dict[str, Any]]
) -> None:
    files = {**TOOLS, "agents/assistant.yaml": llm("assistant")}
    files |= {"tests/a.yaml": "agent: zed\ntests: []\n", "tests/b.yaml": "agent: ghost\ntests: []\n"}
    files |= {"tests/c.yaml": "agent: zed\ntests: []\n"}
    error = parity(write(tmp_path, files))["error"]
    # Neither file order nor name order: agents in order of first appearance, then their files.
    positions = [error.index(f"tests/{name}.yaml: ") for name in "acb"]
    assert positions == sorted(positions)


def test_relative_project_root_like_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parity: Callable[[Path], dict[str, Any]]
) -> None:
    """``connic test --coverage`` passes ``Path(".")``; messages then name ``tests/...`` too."""
    files = {**TOOLS, "agents/assistant.yaml": llm("assistant", ["calc.add"])}
    write(tmp_path, {**files, "tests/assistant.yaml": "tests: []\n", "tests/ghost.yaml": "tests: 1\n"})
    monkeypatch.chdir(tmp_path)
    report = parity(Path("."))
    assert report["error"].startswith("Test files failed to parse: tests/assistant.yaml: ")


def test_yaml_under_tests_files_is_a_suite(tmp_path: Path, parity: Callable[[Path], dict[str, Any]]) -> None:
    files = {**TOOLS, "agents/assistant.yaml": llm("assistant", ["calc.add"])}
    report = parity(write(tmp_path, {**files, "tests/files/data.yaml": "rows: [1, 2]\n"}))
    assert report["error"].startswith("Test files failed to parse: tests/files/data.yaml: 1 validation error")


def test_ignored_files(tmp_path: Path, parity: Callable[[Path], dict[str, Any]]) -> None:
    broken = "tests: []\n"
    files = {**TOOLS, "agents/assistant.yaml": llm("assistant", ["calc.add"])}
    files |= {
        "tests/assistant.yml": broken,
        "tests/.assistant.yaml": broken,
        "tests/.hidden/assistant.yaml": broken,
    }
    files |= {
        "tests/assistant.yaml": "",
        "tests/sub/assistant.yaml": "# only a comment\n",
        "tests/n.yaml": "null\n",
    }
    files |= {"tests/notes.txt": broken}
    report = parity(write(tmp_path, files))
    assert row(report, "assistant")["has_tests"] is False
    assert "error" not in report


def test_upper_case_suffix_is_a_suite(tmp_path: Path, parity: Callable[[Path], dict[str, Any]]) -> None:
    files = {**TOOLS, "agents/assistant.yaml": llm("assistant", ["calc.add"])}
    report = parity(
        write(tmp_path, {**files, "tests/assistant.YAML": suite("name: a\nexpected_tool_calls: [add]")})
    )
    assert row(report, "assistant")["percent"] == 100.0


def test_missing_agents_dir(tmp_path: Path, parity: Callable[[Path], dict[str, Any]]) -> None:
    report = parity(write(tmp_path, {"tests/x.yaml": suite("name: a")}))
    assert report["agents"] == [] and report["overall"] == 0.0
    assert report["error"].startswith("Agents directory not found at ")
    assert coverage_exit_status(report) == 1


def test_agent_load_errors(tmp_path: Path, parity: Callable[[Path], dict[str, Any]]) -> None:
    files = {**TOOLS, "agents/assistant.yaml": llm("assistant", ["calc.add", "calc.missing"])}
    files |= {
        "agents/nameless.yaml": 'version: "1.0"\ndescription: x\n',
        "agents/orphan-test-x.yaml": llm("orphan-test-x"),
    }
    report = parity(write(tmp_path, files))
    assert "Failed to load agent: agents/nameless.yaml: " in report["error"]
    assert "cannot resolve tool 'calc.missing'" in report["error"]
    assert "looks like a test variant" in report["error"]
    assert coverage_exit_status(report) == 1


def test_symlinked_tests_dir(tmp_path: Path, parity: Callable[[Path], dict[str, Any]]) -> None:
    project = write(tmp_path / "p", {**TOOLS, "agents/assistant.yaml": llm("assistant", ["calc.add"])})
    write(tmp_path / "elsewhere", {"a.yaml": suite("name: a")})
    (project / "tests").symlink_to(tmp_path / "elsewhere")
    report = parity(project)
    assert report["error"].startswith("Symbolic links are not allowed: ")


def test_suite_symlinked_out_of_tests(tmp_path: Path, parity: Callable[[Path], dict[str, Any]]) -> None:
    project = write(tmp_path / "p", {**TOOLS, "agents/assistant.yaml": llm("assistant", ["calc.add"])})
    write(tmp_path, {"outside.yaml": suite("name: a")})
    (project / "tests").mkdir()
    (project / "tests" / "assistant.yaml").symlink_to(tmp_path / "outside.yaml")
    assert "is outside" in row(parity(project), "assistant")["parse_error"]


def test_kitchen_sink(tmp_path: Path, parity: Callable[[Path], dict[str, Any]]) -> None:
    """Defaults cascade, nested agents and suites, several suites per agent, every agent type."""
    files = {**TOOLS, "agents/_defaults.yaml": "model: gemini/gemini-2.5-flash\n"}
    files |= {"agents/team/_defaults.yaml": "system_prompt: From the team defaults.\n"}
    files |= {"agents/team/helper.yaml": 'version: "1.0"\nname: helper\ndescription: x\ntools: [calc.sub]\n'}
    files |= {
        "agents/assistant.yaml": llm(
            "assistant", ["calc.add", "calc.sub", "math.calc.mul", "db_find"], ["lookup.find_user"]
        )
    }
    files |= {"agents/assistant-test-b.yaml": llm("assistant-test-b", ["calc.add"])}
    files |= {
        "agents/tooler.yaml": TOOL_AGENT,
        "agents/pipeline.yaml": SEQUENTIAL,
        "agents/idle.yaml": llm("idle"),
    }
    files |= {
        "tests/assistant.yaml": suite(
            "name: a\nexpected_tool_calls: [calc.add]", "name: b\nexpected_tool_call_order: [mul]"
        )
    }
    files |= {
        "tests/deep/more.yaml": suite(
            "name: c\nexpected_tool_calls: [{find_user: 'params.email'}]", agent="assistant"
        )
    }
    files |= {
        "tests/helper.yaml": suite("name: h\nexpected_no_tool_calls: [calc.sub]"),
        "tests/tooler.yaml": suite("name: t"),
    }
    report = parity(write(tmp_path, files))
    # Agents in path order below agents/; the A/B variant is not reported.
    assert [r["name"] for r in report["agents"]] == ["assistant", "idle", "pipeline", "helper", "tooler"]
    assert row(report, "assistant")["uncovered_tools"] == ["calc.sub", "db_find"]
    assert row(report, "assistant")["percent"] == 60.0
    assert row(report, "helper")["percent"] == 0.0  # only expected_no_tool_calls
    assert (row(report, "idle")["has_tests"], row(report, "idle")["percent"]) == (False, 0.0)
    assert report["overall"] == (60.0 + 0.0 + 0.0 + 0.0 + 100.0) / 5


# --------------------------------------------------------------------------- rendering


def sdk_text(report: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> str:
    """What ``connic test --coverage`` prints for ``report`` after its banner, without colours."""
    cli = pytest.importorskip("connic.cli")
    render = getattr(cli, "_render_coverage", None)
    fail = getattr(cli, "_fail_and_exit", None)
    if render is None or fail is None:
        pytest.skip("connic.cli._render_coverage/_fail_and_exit are gone; rendering parity cannot be checked")
    capsys.readouterr()
    with pytest.raises(SystemExit) if _aborts(report) else contextlib.nullcontext():
        if report.get("error"):
            fail(report["error"])  # the CLI stops before the table
        render(report)
    captured = capsys.readouterr()
    return re.sub(r"\x1b\[[0-9;]*m", "", captured.out + captured.err)


def _aborts(report: Mapping[str, Any]) -> bool:
    """Whether Connic's CLI exits while printing ``report``."""
    return bool(report.get("error") or any(r["parse_error"] for r in report["agents"]))


RENDER_PROJECTS: dict[str, dict[str, str]] = {
    "mixed": {
        **TOOLS,
        "agents/assistant.yaml": llm("assistant", ["calc.add", "calc.sub", "math.calc.mul"]),
        "agents/tooler.yaml": TOOL_AGENT,
        "agents/pipeline.yaml": SEQUENTIAL,
        "agents/a-very-long-agent-name.yaml": llm("a-very-long-agent-name", ["db_find"]),
        "tests/assistant.yaml": suite("name: a\nexpected_tool_calls: [calc.add]"),
        "tests/pipeline.yaml": suite("name: p"),
    },
    "one-agent": {
        **TOOLS,
        "agents/solo.yaml": llm("solo", ["calc.add"]),
        "tests/solo.yaml": suite("name: a\nexpected_tool_calls: [add]"),
    },
    "empty": {"agents/.keep": ""},
    "parse-error": {
        **TOOLS,
        "agents/assistant.yaml": llm("assistant"),
        "tests/assistant.yaml": "tests: []\n",
    },
    "global-error": {**TOOLS, "agents/assistant.yaml": llm("assistant"), "tests/ghost.yaml": "tests: []\n"},
    "no-agents-dir": {"tools/calc.py": TOOLS["tools/calc.py"]},
}


@pytest.mark.parametrize("name", sorted(RENDER_PROJECTS))
def test_render_matches_connic(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    report = compute_coverage(write(tmp_path, RENDER_PROJECTS[name]))
    assert render_coverage(report) == sdk_text(report, capsys)


def test_render_key_lines(tmp_path: Path) -> None:
    text = render_coverage(compute_coverage(write(tmp_path, RENDER_PROJECTS["mixed"])))
    lines = text.splitlines()
    assert lines[1] == "    │ Agent                  │ Type       │ Tools covered │ Coverage │"
    assert "    │ assistant              │ llm        │ 1/3           │  33.3%   │" in lines
    assert "    │ a-very-long-agent-name │ llm        │ no tests      │   0.0%   │" in lines
    assert "    │ pipeline               │ sequential │ —             │ 100.0%   │" in lines
    assert lines[lines.index("  → Uncovered tools:") + 1] == "    assistant: calc.sub, math.calc.mul"
    assert "  Overall coverage: 33.3%  (4 agents)" in lines
    assert "\x1b" not in text


def test_render_messages(tmp_path: Path) -> None:
    assert render_coverage({"agents": [], "overall": 0.0}) == "    ! No agents found.\n"
    assert render_coverage({"agents": [], "overall": 0.0, "error": "boom"}) == "    ✗ boom\n"
    broken = compute_coverage(write(tmp_path, RENDER_PROJECTS["parse-error"]))
    text = render_coverage(broken)
    assert text.startswith(
        "    ✗ Test files failed to parse: assistant: tests/assistant.yaml: 1 validation error"
    )
    assert "\n" not in text.rstrip("\n")  # control characters escaped like Connic (\x0a)
    assert "\\x0a" in text
    single = compute_coverage(write(tmp_path / "one", RENDER_PROJECTS["one-agent"]))
    assert "  Overall coverage: 100.0%  (1 agent)" in render_coverage(single).splitlines()


# --------------------------------------------------------------------------- runtime extras


@pytest.fixture
def runtime_project(tmp_path: Path) -> Path:
    """An agent with custom, nested, discoverable and predefined tools, plus a child agent."""
    files = {
        **TOOLS,
        "agents/assistant.yaml": llm(
            "assistant",
            ["calc.add", "calc.sub", "math.calc.mul", "db_find", "trigger_agent"],
            ["lookup.find_user"],
        ),
    }
    files |= {
        "agents/tooler.yaml": TOOL_AGENT,
        "agents/assistant-test-b.yaml": llm("assistant-test-b", ["calc.add"]),
    }
    case_a = """
        name: a
        expected_tool_calls:
          - calc.add: params.a == 1 and params["b"] > 0 and params.nope
          - wrongmodule.sub: "'a' in params"
          - db_find: params.filter.name == 'x'
          - use_tool
          - mcp_weather
          - math.calc.mul: "params.x >"
        expected_tool_call_order: [find_user]
        expected_no_tool_calls: [calc.nothing]
    """
    case_b = """
        name: b
        expected_child_agents:
          tooler:
            expected_tool_calls:
              - jobs.run: |
                  params.payload.kind == 'x'
                  and invocations == 1
    """
    files |= {
        "tests/assistant.yaml": suite(case_a, case_b),
        "tests/broken.yaml": "agent: tooler\ntests: []\n",
    }
    return write(tmp_path, files)


def test_asserted_from_suites(runtime_project: Path) -> None:
    asserted, params = asserted_from_suites(runtime_project)
    assert asserted == {
        "assistant": [
            "calc.add",
            "db_find",
            "find_user",
            "math.calc.mul",
            "mcp_weather",
            "use_tool",
            "wrongmodule.sub",
        ],
        "tooler": ["jobs.run"],
    }
    assert params == {
        "assistant": {"calc.add": ["a", "b", "nope"], "db_find": ["filter"], "wrongmodule.sub": ["a"]},
        "tooler": {"jobs.run": ["payload"]},
    }


def test_asserted_from_suites_tolerates_a_broken_project(tmp_path: Path) -> None:
    write(tmp_path / "elsewhere", {"a.yaml": suite("name: a\nexpected_tool_calls: [calc.add]")})
    (tmp_path / "tests").symlink_to(tmp_path / "elsewhere")
    assert asserted_from_suites(tmp_path) == ({}, {})


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("params.amount > 0", {"amount"}),
        ('params["amount"] > 0 and params.currency == "EUR"', {"amount", "currency"}),
        ("params.address.city == 'Paris'", {"address"}),
        ("'amount' in params", {"amount"}),
        ("'amount' not in params", {"amount"}),
        ("params[0] == 1 or params[context.key] == 2", set()),
        ("'x' in params.tags", {"tags"}),
        ("result.ok and invocations >= 2", set()),
        ("context.params.x == 1", set()),
        ("params.a ==", set()),
        ("  params.a == 1\n  and params.b", {"a", "b"}),
        ("params.a == 1  # a comment", {"a"}),
        ("", set()),
        ("params.x" + " and params.x" * 5000, set()),  # beyond the size guard
    ],
)
def test_params_in_expression(expression: str, expected: set[str]) -> None:
    assert params_in_expression(expression) == expected


def test_resolve_tool() -> None:
    refs = ["calc.add", "math.calc.mul", "db_find"]
    assert resolve_tool("calc.add", refs) == "calc.add"
    assert resolve_tool("mul", refs) == "math.calc.mul"
    assert resolve_tool("other.mul", refs) == "math.calc.mul"
    assert resolve_tool("db_find", refs) == "db_find"
    assert resolve_tool("calc.div", refs) is None


def test_add_runtime_coverage(runtime_project: Path) -> None:
    report = compute_coverage(runtime_project)
    before = json.loads(json.dumps(report))
    calls = ["calc.add", "math.calc.mul", "search_tools", "calc.add", "mcp_weather", "sub"]
    called = {"assistant": calls, "ghost": ["calc.add"]}
    result = add_runtime_coverage(report, called, *asserted_from_suites(runtime_project))
    assert json.loads(json.dumps(report)) == before  # the input is not modified
    assert {key: value for key, value in result.items() if key != "pytest_connic"} == before
    agents = {entry["name"]: entry for entry in result["pytest_connic"]["agents"]}
    assert list(agents) == ["assistant", "tooler"]  # the report's agents; variants excluded
    assistant = agents["assistant"]
    # Calls are canonical refs, taken as they are: "sub" is not credited to calc.sub.
    assert assistant["called_tools"] == ["calc.add", "math.calc.mul", "mcp_weather", "search_tools", "sub"]
    assert assistant["asserted_tools"] == [
        "calc.add",
        "calc.sub",
        "db_find",
        "lookup.find_user",
        "math.calc.mul",
    ]
    assert assistant["never_called"] == ["calc.sub", "db_find", "lookup.find_user", "trigger_agent"]
    assert assistant["unmatched_assertions"] == ["mcp_weather"]
    tools = assistant["tools"]
    assert tools["calc.add"] == {
        "asserted_params": ["a", "b"],
        "unasserted_params": [],
        "unknown_params": ["nope"],
    }
    assert tools["calc.sub"] == {"asserted_params": ["a"], "unasserted_params": ["b"], "unknown_params": []}
    assert tools["math.calc.mul"]["unasserted_params"] == ["x", "y"]
    assert tools["lookup.find_user"]["unasserted_params"] == ["email"]  # ``context`` is not a parameter
    assert tools["db_find"] == {"asserted_params": ["filter"], "unasserted_params": [], "unknown_params": []}
    assert agents["tooler"]["tools"]["jobs.run"]["asserted_params"] == ["payload"]
    assert agents["tooler"]["never_called"] == ["jobs.run"]


def test_add_runtime_coverage_needs_an_inventory(runtime_project: Path) -> None:
    report = json.loads(json.dumps(compute_coverage(runtime_project)))
    with pytest.raises(ValueError, match="inventory"):
        add_runtime_coverage(report, {}, {}, {})
    result = add_runtime_coverage(report, {}, {}, {}, inventory=tool_inventory(runtime_project))
    assert result["pytest_connic"]["agents"][0]["never_called"][0] == "calc.add"


def test_add_runtime_coverage_on_an_error_report(tmp_path: Path) -> None:
    report = compute_coverage(tmp_path)  # no agents/
    result = add_runtime_coverage(report, {"x": ["y"]}, {}, {})
    assert result["pytest_connic"] == {"agents": []}
    assert result["error"] == report["error"]


def test_merge_called() -> None:
    a = {"assistant": ["calc.add", "db_find"], "tooler": ["jobs.run"]}
    b = {"assistant": ("calc.add", "calc.sub"), "helper": iter(["x"])}
    assert merge_called(a, b) == {
        "assistant": ["calc.add", "calc.sub", "db_find"],
        "helper": ["x"],
        "tooler": ["jobs.run"],
    }
    assert merge_called({}, {}) == {}


def test_render_runtime_coverage(runtime_project: Path) -> None:
    report = compute_coverage(runtime_project)
    assert render_runtime_coverage(report) == ""
    result = add_runtime_coverage(report, {"assistant": ["calc.add"]}, *asserted_from_suites(runtime_project))
    lines = render_runtime_coverage(result).splitlines()
    assert lines[0] == "  → Runtime tool usage (pytest-connic):"
    assert (
        "    assistant: 1/6 tools called; never called: calc.sub, db_find, lookup.find_user, math.calc.mul, "
        "trigger_agent" in lines
    )
    assert "      calc.sub: parameters never asserted: b" in lines
    assert "      calc.add: assertions name unknown parameters: nope" in lines
    assert "      assertions naming no tool of the agent: mcp_weather" in lines
    assert "    tooler: 0/1 tools called; never called: jobs.run" in lines
