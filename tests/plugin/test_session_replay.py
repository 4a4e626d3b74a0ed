"""A case of an agent with ``session:`` is self-contained in replay (docs/models.md "Sessions"):
recorded together, its cases replay alone (``-k``), after a failure (``--lf``), on two xdist
workers (``--dist load``) and in random order with the whole suite's verdicts and no divergence."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.fake_provider import FakeProvider, Reply, text
from helpers.project import ConnicProject

if importlib.util.find_spec("litellm") is None:
    pytest.skip("the [live] extra (litellm) is not installed", allow_module_level=True)

STRICT = ("-W", "error::pytest_connic.warnings.CassetteDivergenceWarning")
NAMES = ("first", "second", "third")
#: each case passes only when it sees the conversation of the cases before it
SUITE = "tests:\n" + "".join(
    f"  - name: {name}\n    payload: {name} message\n    expected_result: output.seen == {i + 1}\n"
    for i, name in enumerate(NAMES)
)
WHOLE = {"first": "PASSED", "second": "PASSED", "third": "PASSED"}


def counting_model(body: dict[str, Any]) -> Reply:
    """The fake model: how many user turns it was shown (the session's history and this run's)."""
    return text(json.dumps({"seen": sum(1 for m in body["messages"] if m["role"] == "user")}))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project, its three cases recorded together once (a pytest subprocess against the fake
    provider on 127.0.0.1)."""
    root = tmp_path_factory.mktemp("session-recorded")
    (root / "agents").mkdir()
    agent = {"version": "1.0", "name": "chat", "description": "the chat agent", "model": "openai/gpt-4o-mini",
             "system_prompt": "You are chat.", "session": True}
    (root / "agents" / "chat.yaml").write_text(yaml.safe_dump(agent), "utf-8")
    (root / "tests").mkdir()
    (root / "tests" / "chat.yaml").write_text(SUITE, "utf-8")
    with FakeProvider(counting_model) as fp:
        env = {**os.environ, "OPENAI_API_KEY": "sk-fake-key", "OPENAI_API_BASE": fp.base_url}
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider",
                               "--connic-record-mode", "once", "-q"], check=False, cwd=root, env=env,
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return root


@pytest.fixture
def chat(project: ConnicProject, recorded: Path, monkeypatch: pytest.MonkeyPatch) -> ConnicProject:
    """A copy of the recorded project; replay needs no provider (nothing listens at the base URL)."""
    shutil.copytree(recorded, project.root, dirs_exist_ok=True)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key")
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:9/v1")
    return project


def verdicts(result: pytest.RunResult) -> dict[str, str]:
    """Each case's verdict, in the order the cases ran (``-v`` lines, with or without xdist)."""
    found = re.findall(r"(?:(PASSED|FAILED|ERROR) )?tests/chat\.yaml::(\w+)(?: (PASSED|FAILED|ERROR))?",
                       result.stdout.str())
    return {name: before or after for before, name, after in found if before or after}


def test_the_recording_holds_the_history_each_case_started_with(chat: ConnicProject) -> None:
    data = yaml.safe_load((chat.root / "cassettes" / "chat" / "third.yaml").read_text("utf-8"))
    session = data["runs"][0]["session"]
    assert session["agent"] == "chat" and session["key"] is None
    assert session["from"] == ["first", "second"]
    assert [m["content"] for m in session["history"] if m["role"] == "user"] == ["first message", "second message"]
    first = yaml.safe_load((chat.root / "cassettes" / "chat" / "first.yaml").read_text("utf-8"))
    assert first["runs"][0]["session"]["history"] == []


def test_the_whole_suite_replays_green(chat: ConnicProject) -> None:
    result = chat.run("-p", "no:randomly", "-v", *STRICT)
    assert verdicts(result) == WHOLE


@pytest.mark.parametrize("name", NAMES)
def test_each_case_alone_has_the_whole_suites_verdict(chat: ConnicProject, name: str) -> None:
    result = chat.run("-p", "no:randomly", "-v", "-k", name, *STRICT)
    assert verdicts(result) == {name: WHOLE[name]}
    result.stdout.no_fnmatch_line("*differs*")


def test_last_failed_after_a_forced_failure_has_the_whole_suites_verdict(chat: ConnicProject) -> None:
    suite = chat.root / "tests" / "chat.yaml"
    suite.write_text(SUITE.replace("output.seen == 2", "output.seen == 99"), "utf-8")
    run = chat.pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:randomly", "-v", *STRICT)
    assert verdicts(run)["second"] == "FAILED"
    suite.write_text(SUITE, "utf-8")
    result = chat.pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:randomly", "-v", "--lf", *STRICT)
    assert verdicts(result) == {"second": "PASSED"}


def test_random_order_has_the_whole_suites_verdict(chat: ConnicProject) -> None:
    orders = set()
    for seed in (1, 2, 3, 4):  # pytest-randomly reorders the cases (it is loaded by default)
        result = chat.run("-p", "randomly", f"--randomly-seed={seed}", "-v", *STRICT)
        assert verdicts(result) == WHOLE
        orders.add(tuple(verdicts(result)))
    assert len(orders) > 1  # the cases did run in other orders


def test_two_workers_under_dist_load_have_the_whole_suites_verdict(chat: ConnicProject) -> None:
    result = chat.run("-p", "no:randomly", "-n", "2", "--dist", "load", "-v", *STRICT)
    assert verdicts(result) == WHOLE
    result.stdout.no_fnmatch_line("*@connic-session-*")


def test_a_cassette_without_the_section_says_session_history_differs_and_names_the_case(
    chat: ConnicProject,
) -> None:
    path = chat.root / "cassettes" / "chat" / "third.yaml"
    data = yaml.safe_load(path.read_text("utf-8"))
    del data["runs"][0]["session"]  # as a hand-written or an older cassette
    path.write_text(yaml.safe_dump(data, sort_keys=False), "utf-8")
    whole = chat.run("-p", "no:randomly", "-v", *STRICT)  # the history from the store, as before
    assert verdicts(whole) == WHOLE
    result = chat.run("-p", "no:randomly", "-v", "-k", "first or third")
    # strict replay: the recorded answers were made for another history
    assert verdicts(result) == {"first": "PASSED", "third": "FAILED"}
    result.stdout.fnmatch_lines([("*replay diverged: *session history differs: this run started with 2 message(s) "
                                  "of history from the runs of case 'first', its recording with 4*")])
