"""A recording never fails in silence (docs/models.md): a recording session that cannot write a
complete cassette makes the case an error that says why and how to fix it, writes nothing, and
the next replay's "no cassette" names the cause; a judge model's bad verdict is never stored;
re-recording one case rewrites that case's cassette only. Recorded from the fake provider on
127.0.0.1 (real HTTP through LiteLLM)."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest
import yaml

from helpers.fake_provider import Reply, error, text, tool_call
from helpers.network import local_provider_env, serving, warm_up_litellm
from helpers.project import ConnicProject

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

if importlib.util.find_spec("litellm") is None:
    pytest.skip("the [live] extra (litellm) is not installed", allow_module_level=True)

FAST_RETRIES = {"attempts": 1, "initial_delay": 0, "max_delay": 1}


@pytest.fixture(scope="module", autouse=True)
def litellm_imported() -> None:
    warm_up_litellm()


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    local_provider_env(monkeypatch, "sk-test-record-1234567890")
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)


def searching(body: dict[str, Any]) -> Reply:
    """The fake model: search once, then answer whatever the tool said (an error too)."""
    if body["messages"][-1]["role"] == "tool":
        return text("done")
    return tool_call("web_search", {"query": "opening hours"})


def with_cache(project: ConnicProject, *args: str) -> pytest.RunResult:
    """A session with pytest's cache (project.run turns it off): the recording notes live there."""
    return project.pytester.runpytest("-p", "no:hypothesispytest", *args)


def test_web_search_without_a_backend_fails_the_recording_and_writes_no_cassette(
    project: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.agent("finder", tools=["web_search"])
    project.suite("finder", """
        tests:
          - name: finds
            payload: opening hours
    """)
    with serving(monkeypatch, searching):
        recorded = with_cache(project, "--connic-record-mode", "once")

    recorded.assert_outcomes(errors=1)
    recorded.stdout.fnmatch_lines([
        "*case 'finds' (finder) could not be recorded",
        ("    cassettes/finder/finds.yaml: the recording is incomplete, "
        "so no cassette was written*run 1: its web call 'web_search' failed while recording: WebUnavailable: "
        "web_search has no search backend: set TAVILY_API_KEY*implement the hook pytest_connic_predefined_tool "
        "in conftest.py*--connic-record-mode=once*"),
    ])
    assert not (project.root / "cassettes").exists()

    # the next replay says why there is no cassette
    replayed = with_cache(project)
    replayed.assert_outcomes(failed=1)
    replayed.stdout.fnmatch_lines([
        ("*no cassette for this case: expected cassettes/finder/finds.yaml*the last recording session wrote none: "
        "run 1: its web call 'web_search' failed while recording: WebUnavailable: *TAVILY_API_KEY*"),
    ])


def test_a_provider_error_while_recording_writes_nothing_and_names_the_run(
    calc: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    calc.agent("calc", tools=["calc.add"], retry_options=FAST_RETRIES)
    calc.suite("calc", """
        tests:
          - name: adds
            payload: "4 + 6?"
            runs: 2
            success_threshold: 50
    """)
    answers = iter([text('{"sum": 10}'), error(401, "invalid api key")])
    with serving(monkeypatch, lambda body: next(answers)):
        recorded = calc.run("--connic-record-mode", "once", "--connic-concurrency", "1")

    assert recorded.ret == 2  # the provider refused: an infrastructure error
    recorded.assert_outcomes(errors=1)
    recorded.stdout.fnmatch_lines(["*run 2: the model call of agent 'calc' failed: ProviderError*"])
    assert not (calc.root / "cassettes").exists()  # not a cassette with one run of two


def test_a_judge_that_does_not_answer_a_verdict_is_an_error_and_no_judgement_is_stored(
    project: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.agent("bank", guardrails={"input": [{"type": "prompt_injection"}]})
    project.suite("bank", """
        tests:
          - name: harmless
            payload: what is my balance
    """)

    def provider(body: dict[str, Any]) -> Reply:
        return text("not json" if "guardrail" in body["messages"][0]["content"] else "42 EUR")

    with serving(monkeypatch, provider):
        recorded = project.run("--connic-record-mode", "once", "--connic-guardrail-model", "openai/gpt-4o-mini")

    recorded.assert_outcomes(errors=1)
    recorded.stdout.fnmatch_lines([
        "*could not be recorded",
        ("*run 1: its guardrail call 'prompt_injection' failed while recording: RunAborted: "
        "the judgement of the input guardrail 'prompt_injection' failed: the judge model did not answer*'not json'*"),
    ])
    assert not (project.root / "cassettes").exists()


def test_re_recording_one_case_rewrites_only_its_cassette(
    calc: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    calc.agent("calc", tools=["calc.add"])
    calc.suite("calc", """
        tests:
          - name: first
            payload: "1"
          - name: second
            payload: "2"
    """)
    calc.suite("other", """
        agent: calc
        tests:
          - name: first
            payload: "3"
    """)
    with serving(monkeypatch, lambda body: text("old")):
        calc.run("--connic-record-mode", "once").assert_outcomes(passed=3)
    folder = calc.root / "cassettes"
    before = {p: p.read_bytes() for p in folder.rglob("*.yaml")}
    assert len(before) == 3

    with serving(monkeypatch, lambda body: text("new")):
        calc.run("tests/calc.yaml", "-k", "first", "--connic-record-mode", "all").assert_outcomes(passed=1)

    after = {p: p.read_bytes() for p in folder.rglob("*.yaml")}
    changed = sorted(p.relative_to(folder).as_posix() for p in after if after[p] != before[p])
    assert changed == ["calc/first.yaml"]
    assert json.dumps(yaml.safe_load(after[folder / "calc/first.yaml"])).count("new") == 1
