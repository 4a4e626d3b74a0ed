"""Small real Connic projects written into pytester's directory, and run with pytest."""

from __future__ import annotations

import fnmatch
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml


def esc(pattern: str) -> str:
    """An fnmatch pattern with ``[`` and ``]`` taken literally (key paths like ``tests[0]``)."""
    return pattern.replace("[", "\x00").replace("]", "[]]").replace("\x00", "[[]")


def assert_failure_reasons(result: pytest.RunResult, reasons: dict[str, str]) -> None:
    """Each case's failure report says why on the line after its headline: the headline
    ``tests/x.yaml:N: case 'NAME' (agent) failed`` is followed by ``N/M runs passed, ...: REASON``;
    ``reasons`` maps a case name to an fnmatch pattern of that second line (with ``*`` around)."""
    lines = result.stdout.lines
    for name, pattern in reasons.items():
        heads = [i for i, line in enumerate(lines)
                 if f"case '{name}' (" in line and line.rstrip().endswith((" failed", " could not be set up"))]
        assert heads, f"no failure headline for case {name!r} in:\n" + "\n".join(lines)
        follow = [lines[i + 1] for i in heads if i + 1 < len(lines)]
        assert any(fnmatch.fnmatch(line, pattern) for line in follow), (
            f"case {name!r}: the line after its headline does not match {pattern!r}: {follow!r}")


class ProjectFiles:
    """Writes a Connic project's files (agents, tools, suites, cassettes, ...) under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (self.root / "agents").mkdir(parents=True, exist_ok=True)

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        before = path.stat().st_mtime_ns if path.exists() else None
        path.write_text(textwrap.dedent(text).lstrip("\n"), "utf-8")
        if before is not None and path.stat().st_mtime_ns // 10**9 <= before // 10**9:
            # an edit within the same second, of the same size, would leave Python's bytecode
            # cache (keyed by the source's whole-second mtime and size) serving the old module
            later = (before // 10**9 + 1) * 10**9
            os.utime(path, ns=(later, later))
        return path

    def agent(self, name: str, **fields: Any) -> Path:
        data: dict[str, Any] = {"version": "1.0", "name": name, "description": f"the {name} agent"}
        if fields.get("type", "llm") == "llm":
            data.update(model="openai/gpt-4o-mini", system_prompt=f"You are {name}.")
        data.update(fields)
        return self.write(f"agents/{name}.yaml", yaml.safe_dump(data, sort_keys=False))

    def tool(self, module: str, source: str) -> Path:
        return self.write(f"tools/{module.replace('.', '/')}.py", source)

    def suite(self, name: str, text: str) -> Path:
        return self.write(f"tests/{name}.yaml", text)

    def cassette(self, suite: str, case: str, runs: list[Any]) -> Path:
        data = {"version": 1, "runs": runs}
        return self.write(f"cassettes/{suite}/{case}.yaml", yaml.safe_dump(data, sort_keys=False))

    def replies(self, suite: str, case: str, *turns: Any) -> Path:
        """A one-run cassette; each turn a string (final answer) or a list of (tool, args) calls."""
        out = []
        for turn in turns:
            if isinstance(turn, str):
                out.append({"content": turn})
            else:
                out.append({"tool_calls": [{"name": n, "arguments": a} for n, a in turn]})
        return self.cassette(suite, case, [{"turns": out}])


class ConnicProject(ProjectFiles):
    """A Connic project in pytester's directory, run with pytest (the wiring: verdicts, exit
    codes, reports). What a run does is tested below pytest: ``helpers/harness.CaseProject``."""

    def __init__(self, pytester: pytest.Pytester) -> None:
        super().__init__(pytester.path)
        self.pytester = pytester

    def run(self, *args: str) -> pytest.RunResult:
        # Hypothesis's plugin would re-import hypothesis in every in-process run (seconds each)
        return self.pytester.runpytest("-p", "no:cacheprovider", "-p", "no:hypothesispytest", *args)

    def run_subprocess(self, *args: str) -> pytest.RunResult:
        return self.pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


CALC_TOOLS = '''
def add(a: int, b: int) -> dict:
    """Add two numbers.

    Args:
        a: the first number
        b: the second number
    """
    return {"sum": a + b}


def multiply(a: int, b: int) -> dict:
    """Multiply two numbers."""
    return {"product": a * b}


def echo(payload: dict) -> dict:
    """Echo the payload back (a tool agent's body)."""
    return {"got": payload}
'''
