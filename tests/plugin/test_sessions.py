"""Connic's sessions (``session:``) under xdist: the cases of an agent with a session get an xdist
group, and ``--dist loadgroup`` keeps the cases that share a session on one worker (docs/lifecycle.md
"Sessions"). What a session does in a run (history, key, ttl, files) is tested below the session:
tests/unit/lifecycle/test_agent_sessions.py."""

from __future__ import annotations

import re

from helpers.project import ConnicProject
from helpers.sessions import CHAT_SUITE, SEEN_MODEL

PLAIN_SUITES = {f"other{i}": f'''
    agent: other
    tests:
      - name: plain {i}
        payload: hi
''' for i in range(4)}


def xdist_project(project: ConnicProject) -> None:
    project.agent("chat", session={"key": "input.user"})
    project.write("conftest.py", SEEN_MODEL)
    project.suite("chat", CHAT_SUITE)
    project.agent("other")
    for name, text in PLAIN_SUITES.items():
        project.suite(name, text)


def test_the_cases_of_an_agent_with_a_session_get_an_xdist_group(project: ConnicProject) -> None:
    xdist_project(project)
    result = project.run("-p", "no:randomly", "--co", "-q", "-m", "xdist_group")
    result.stdout.fnmatch_lines(["*tests/chat.yaml::ann introduces herself*", "*3/7 tests collected*"])


def test_loadgroup_keeps_the_cases_that_share_a_session_on_one_worker(project: ConnicProject) -> None:
    xdist_project(project)
    result = project.run("-p", "no:randomly", "-n", "2", "--dist", "loadgroup", "-v")
    result.assert_outcomes(passed=7)
    workers = set(re.findall(r"\[(gw\d)\][^\n]*PASSED tests/chat\.yaml::", result.stdout.str()))
    assert len(workers) == 1, result.stdout.str()
