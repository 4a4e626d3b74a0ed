"""The recorded world below the session (docs/models.md, "The recorded world"): a recording stores
the run ids and a seed, and a later replay gives user code, in its worker process, the same ids
and ``random`` values while its clock is the real one (times in the request are volatile values); a cassette
without the section diverges on the random draws; a hand-written section with a bad time is
located. A replay a day later, in a real session whose whole process tree (the worker processes
included) lives a day later, stays in tests/plugin/test_recorded_world.py: travelling pytest's
process alone would give the two sides of a run different days."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.fake_provider import Reply, text, tool_calls
from helpers.harness import CaseProject, first_failure
from helpers.network import local_provider_env, no_network, serving
from helpers.world import MIDDLEWARE, PROBE

pytestmark = pytest.mark.usefixtures("litellm_imported")


def model(body: dict[str, Any]) -> Reply:
    """Ask the tool, then answer with what it returned."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return text("done")
    return tool_calls(("ask", {"question": "why?"}))


@pytest.fixture
def world(case_project: CaseProject, monkeypatch: pytest.MonkeyPatch) -> CaseProject:
    """A project recorded against the fake provider; its runs process-isolated (the worker seeds
    ``random`` for user code: in pytest's own process nothing does)."""
    case_project.settings["isolation"] = "process"
    local_provider_env(monkeypatch, "sk-test-DONOTLEAK-1234567890")
    case_project.tool("probe", PROBE)
    case_project.agent("asker", tools=["probe.ask"])
    case_project.agent("helper", type="tool", tool_name="probe.body")
    case_project.write("middleware/asker.py", MIDDLEWARE)
    case_project.suite("asker", """
        tests:
          - name: stamped
            payload: "hello"
            expected_result: output == "done"
    """)
    with serving(monkeypatch, model):
        assert case_project.case("asker", "stamped", mode="once").verdict_passed
    return case_project


def cassette_file(project: CaseProject) -> Path:
    return project.root / "cassettes" / "asker" / "stamped.yaml"


def replay(project: CaseProject, monkeypatch: pytest.MonkeyPatch) -> Any:
    with no_network(monkeypatch) as attempts:
        outcome = project.case("asker", "stamped")
    assert attempts == []
    return outcome


def test_the_recording_stores_the_world_and_a_replay_later_holds(
    world: CaseProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = yaml.safe_load(cassette_file(world).read_text("utf-8"))
    recorded = data["runs"][0]["world"]
    assert len(recorded["run_ids"]) == 2  # the case's and the helper's
    assert isinstance(recorded["seed"], int) and "+" in str(recorded["started_at"])
    outcome = replay(world, monkeypatch)
    assert outcome.verdict_passed, outcome.failure_reason
    assert not [w for w in world.warnings if "differs from the recorded one" in w]
    (record,) = outcome.records
    (ask,) = record.tool_calls
    assert isinstance(ask.result, dict) and ask.result["child_run"] == recorded["run_ids"][1]


def test_without_the_world_section_the_same_replay_diverges(world: CaseProject, monkeypatch: pytest.MonkeyPatch) -> None:
    path = cassette_file(world)
    data = yaml.safe_load(path.read_text("utf-8"))
    del data["runs"][0]["world"]  # a cassette from before the section: replayed as it always was
    path.write_text(yaml.safe_dump(data, sort_keys=False), "utf-8")
    outcome = replay(world, monkeypatch)
    assert not outcome.verdict_passed  # the random draws are not the recorded ones
    assert re.match(r"replay diverged: ask now returns something else: draws\[0\] 0\.\S* → 0\.",
                    outcome.failure_reason or ""), outcome.failure_reason


def test_a_hand_written_world_section_with_a_bad_time_is_located(case_project: CaseProject) -> None:
    case_project.settings["isolation"] = "process"
    case_project.tool("probe", PROBE)
    case_project.agent("asker", tools=["probe.ask"])
    case_project.suite("asker", """
        tests:
          - name: stamped
            payload: "hello"
    """)
    case_project.cassette("asker", "stamped", [{"turns": [{"content": "done"}], "world": {"started_at": "yesterday"}}])
    outcome = case_project.case("asker", "stamped")
    assert not outcome.verdict_passed
    assert re.search(r"stamped\.yaml:\d+(:\d+)?: runs\[0\]\.world\.started_at: expected an ISO 8601 time",
                     first_failure(outcome)), first_failure(outcome)
