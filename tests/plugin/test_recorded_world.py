"""The recorded world (docs/models.md, "The recorded world"): a recording stores the run ids and a
seed, and a replay a day later gives user code the same ids and ``random`` values, while its clock
is the real one (times in the request are volatile values): a middleware that writes the time into
the prompt and a tool that returns a child's run id, ``random`` values and today's time replay
without divergence, in a real session whose process tree (the worker processes included) lives a
day later. The same below the session, a cassette without the section and a bad hand-written one:
tests/unit/lifecycle/test_world_replay.py."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.fake_provider import Reply, text, tool_calls
from helpers.network import local_provider_env, serving, warm_up_litellm
from helpers.project import ConnicProject
from helpers.world import MIDDLEWARE, PROBE

if importlib.util.find_spec("litellm") is None:
    pytest.skip("the [live] extra (litellm) is not installed", allow_module_level=True)

KEY = "sk-test-DONOTLEAK-1234567890"

#: a sitecustomize for the replay session: its whole process tree (pytest's process, the
#: forkserver, the worker processes) lives a day later, without sleeping
A_DAY_LATER = '''
import datetime

import time_machine

time_machine.travel(datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1),
                    tick=True).start()
'''


def model(body: dict[str, Any]) -> Reply:
    """Ask the tool, then answer with what it returned."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return text("done")
    return tool_calls(("ask", {"question": "why?"}))


@pytest.fixture(scope="session", autouse=True)
def litellm_imported() -> None:
    warm_up_litellm()


@pytest.fixture
def world(project: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> ConnicProject:
    """A project recorded against the fake provider (in-process)."""
    local_provider_env(monkeypatch, KEY)
    project.tool("probe", PROBE)
    project.agent("asker", tools=["probe.ask"])
    project.agent("helper", type="tool", tool_name="probe.body")
    project.write("middleware/asker.py", MIDDLEWARE)
    project.suite("asker", """
        tests:
          - name: stamped
            payload: "hello"
            expected_result: output == "done"
    """)
    with serving(monkeypatch, model):
        project.run("--connic-record-mode", "once").assert_outcomes(passed=1)
    return project


def replay_a_day_later(project: ConnicProject, *args: str) -> pytest.RunResult:
    shim = project.root / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(A_DAY_LATER, "utf-8")
    path = os.pathsep.join([str(shim), os.environ.get("PYTHONPATH", "")])
    project.pytester._monkeypatch.setenv("PYTHONPATH", path)  # the subprocess and its workers
    return project.run_subprocess("-p", "no:randomly", *args)


def cassette_file(project: ConnicProject) -> Path:
    return project.root / "cassettes" / "asker" / "stamped.yaml"


def test_the_recording_stores_the_world_and_a_replay_a_day_later_holds(world: ConnicProject) -> None:
    data = yaml.safe_load(cassette_file(world).read_text("utf-8"))
    recorded = data["runs"][0]["world"]
    assert len(recorded["run_ids"]) == 2  # the case's and the helper's
    assert isinstance(recorded["seed"], int) and "+" in str(recorded["started_at"])
    result = replay_a_day_later(world)
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*differs from the recorded one*")
