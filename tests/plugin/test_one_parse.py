"""One parse per file: every YAML file of the project (agent files, ``_defaults.yaml``, suites,
cassettes) is parsed once per session, positions included, and shared by whatever reads it (the
project index, the loader's locators, the agent-key check, the YAML guard, suite loading and the
SDK's own load). Counted in a real session (a subprocess) by a conftest that wraps the parser."""

from __future__ import annotations

import pytest

from helpers.project import ConnicProject

COUNTING = '''
import collections
import os

import yaml

import pytest_connic.yamlpos as yamlpos

PARSES = collections.Counter()
_parse = yamlpos._loader_for
_safe_load = yaml.safe_load


def _counted(text):
    PARSES[text] += 1
    return _parse(text)


def _counted_safe_load(stream, *args, **kwargs):
    PARSES["sdk:" + str(getattr(stream, "name", ""))] += 1
    return _safe_load(stream, *args, **kwargs)


yamlpos._loader_for = _counted
yaml.safe_load = _counted_safe_load


def pytest_unconfigure(config):
    with open("parses.txt", "w", encoding="utf-8") as out:
        for text, count in PARSES.items():
            out.write(f"{count}\\t{text.splitlines()[0] if text else ''}\\n")
'''


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_each_project_file_is_parsed_once_per_session(project: ConnicProject, isolation: str) -> None:
    project.write("conftest.py", COUNTING)
    project.tool("calc", "def add(a: int, b: int) -> dict:\n    return {'sum': a + b}\n")
    project.write("agents/team/_defaults.yaml", "# defaults of the team\ntemperature: 0.1\n")
    project.write("agents/team/calc.yaml", "# the calc agent\nversion: '1.0'\nname: calc\ndescription: adds\n"
                  "model: openai/gpt-4o-mini\nsystem_prompt: You add.\nreasoning_budget: 10\ntools:\n  - calc.add\n")
    project.suite("calc", "# the calc suite\ntests:\n  - name: adds\n    payload: hi\n    expected_result: output == 3\n"
                          "  - name: again\n    payload: hi\n    expected_result: output == 3\n")
    for case in ("adds", "again"):
        project.write(f"cassettes/calc/{case}.yaml", f"# the {case} cassette\nversion: 1\nruns:\n  - turns:\n"
                      "      - tool_calls:\n          - {name: add, arguments: {a: 1, b: 2}}\n      - content: '3'\n")
    result = project.run_subprocess("-p", "no:randomly", "-p", "no:xdist", f"--connic-isolation={isolation}")
    result.assert_outcomes(passed=2)
    counts = {}
    for line in (project.root / "parses.txt").read_text("utf-8").splitlines():
        count, first = line.split("\t", 1)
        counts[first] = int(count)
    project_files = {first: n for first, n in counts.items() if first.startswith("# ") or "/agents/" in first}
    assert project_files == {
        "# defaults of the team": 1, "# the calc agent": 1, "# the calc suite": 1,
        "# the adds cassette": 1, "# the again cassette": 1,
    }, counts
