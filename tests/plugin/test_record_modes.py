"""Record modes through the plugin: pytest runs of small Connic projects that record from a fake
OpenAI-compatible provider on 127.0.0.1 (real HTTP through LiteLLM), then replay offline."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from helpers.fake_provider import Reply, text, tool_call
from helpers.network import local_provider_env, no_network, serving, warm_up_litellm
from helpers.project import ConnicProject

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

if importlib.util.find_spec("litellm") is None:
    pytest.skip("the [live] extra (litellm) is not installed", allow_module_level=True)

KEY = "sk-test-DONOTLEAK-1234567890"
FAST_RETRIES = {"attempts": 2, "initial_delay": 0, "max_delay": 1}

SUITE = """
tests:
  - name: adds
    payload: "4 + 6?"
    runs: 2
    expected_tool_calls:
      - calc.add: params.a == 4 and params.b == 6
    expected_result: output.sum == 10
  - name: wrong sum
    payload: "4 + 6?"
    expected_result: output.sum == 11
"""


def calculator(body: dict[str, Any]) -> Reply:
    """The fake model: ask for ``add``, then answer with what the tool returned."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return text(last["content"])
    return tool_call("add", {"a": 4, "b": 6})


@pytest.fixture(scope="session", autouse=True)
def litellm_imported() -> None:
    """Import LiteLLM in this process before any in-process pytest run does: its import loads the
    importlib_metadata backport, which deletes the stdlib's distribution finder; pytester's restore
    of ``sys.meta_path`` after an inner run would then leave later inner runs without plugins.
    One call imports what LiteLLM imports lazily (seconds, and warnings) once, not in every run."""
    warm_up_litellm()


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key, and a base URL where nothing listens: a test that forgets to serve stays local."""
    local_provider_env(monkeypatch, KEY)


@pytest.fixture
def calc(calc: ConnicProject) -> ConnicProject:
    calc.agent("calc", tools=["calc.add", "calc.multiply"], retry_options=FAST_RETRIES)
    calc.suite("calc", SUITE)
    return calc


def cassette(project: ConnicProject, case: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((project.root / "cassettes" / "calc" / f"{case}.yaml").read_text("utf-8"))
    return data


def test_record_once_then_replay_offline_with_the_same_verdict(
    calc: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving(monkeypatch, calculator) as fp:
        recorded = calc.run("--connic-record-mode", "once")
    recorded.assert_outcomes(passed=1, failed=1)
    assert recorded.ret == 1
    assert len(fp.requests) == 6  # adds: 2 runs x 2 turns; wrong sum: 1 run x 2 turns

    data = cassette(calc, "adds")
    assert data["version"] == 1 and len(data["runs"]) == 2
    for run in data["runs"]:
        ask, answer = run["turns"]
        assert ask["tool_calls"] == [{"name": "add", "arguments": {"a": 4, "b": 6}}]
        assert answer["content"] == '{"sum": 10}'
        for turn in (ask, answer):
            request = turn["request"]
            assert request["model"] == "openai/gpt-4o-mini"
            assert re.fullmatch(r"[0-9a-f]{64}", request["digest"])
            assert re.fullmatch(r"[0-9a-f]{12}", request["system"])
            assert set(request["tools"]) == {"add", "multiply"}
        assert len(ask["request"]["messages"]) == 1  # the user's message
        assert len(answer["request"]["messages"]) == 3  # + the tool call and its result
    assert cassette(calc, "wrong sum")["runs"][0]["turns"][1]["content"] == '{"sum": 10}'

    # the server is gone and every connect is refused: replay (the default mode) needs neither
    with no_network(monkeypatch) as attempts:
        replayed = calc.run()
    assert attempts == []
    replayed.assert_outcomes(passed=1, failed=1)
    assert replayed.ret == 1
    replayed.stdout.fnmatch_lines(["*case 'wrong sum' (calc) failed", "*output.sum == 11*"])
    replayed.stdout.no_fnmatch_line("*infrastructure error*")


def test_a_changed_system_prompt_fails_each_case_until_re_recorded(
    calc: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving(monkeypatch, calculator):
        calc.run("--connic-record-mode", "once").assert_outcomes(passed=1, failed=1)
    calc.agent("calc", tools=["calc.add", "calc.multiply"], retry_options=FAST_RETRIES,
               system_prompt="You are a careful calculator.")

    # strict replay (the default): the recorded answers were made for another prompt, so each
    # case fails with what changed and the command that re-records it
    with no_network(monkeypatch):
        strict = calc.run("--connic-json", "report.json")
    strict.assert_outcomes(failed=2)
    strict.stdout.fnmatch_lines([
        ("*0/2 runs passed*: replay diverged: the system prompt of agent 'calc' changed: recorded → now: "
         "…You are [[]-calc.-[]]{+a careful calculator.+}; the model's recorded answers were made for the "
         "request before that change (cassettes/calc/adds.yaml: runs[[]0].turns[[]0], system prompt differs). "
         "Re-record this case: pytest tests/calc.yaml::adds --connic-record-mode=all"),
    ])
    strict.stdout.no_fnmatch_line("*CassetteDivergenceWarning*")
    report = json.loads((calc.root / "report.json").read_text("utf-8"))
    assert all(c["failure_reason"].startswith("replay diverged: the system prompt of agent 'calc' changed")
               for c in report["cases"])

    # lenient replay (the opt-out): the recorded answers still replay: a note and a warning, not
    # a failure; one warning per case although both runs of 'adds' diverge
    with no_network(monkeypatch):
        diverged = calc.run("-o", "connic_replay=lenient", "--connic-json", "report.json")
    diverged.assert_outcomes(passed=1, failed=1, warnings=2)
    diverged.stdout.fnmatch_lines(
        [
            "*CassetteDivergenceWarning: *adds.yaml: runs?0?.turns?0?: the request of 'calc' in run ? differs"
            + " from the recorded one: system prompt differs: recorded → now: *(and 1 more difference(s));*"
            + "--connic-record-mode=all",
        ]
    )
    # located at the suite file and line of the case, not at the plugin's source
    diverged.stdout.fnmatch_lines(["  tests/calc.yaml:2: CassetteDivergenceWarning: *"])
    diverged.stdout.no_fnmatch_line("*pytest_connic*.py:[0-9]*: CassetteDivergenceWarning*")
    # the failing case's trace shows the note
    diverged.stdout.fnmatch_lines(["*Trace:*", "*note: *wrong sum.yaml*system prompt differs*"])
    report = json.loads((calc.root / "report.json").read_text("utf-8"))
    notes = [e["text"] for e in _events(report) if e.get("type") == "note"]
    assert notes and all("system prompt differs" in n for n in notes)

    # lenient, made an error by -W: each case fails with the warning's message
    with no_network(monkeypatch):
        warned = calc.run("-o", "connic_replay=lenient", "-W", "error::pytest_connic.warnings.CassetteDivergenceWarning")
    warned.assert_outcomes(failed=2)
    warned.stdout.fnmatch_lines([
        "tests/calc.yaml:2: CassetteDivergenceWarning: *adds.yaml: runs?0?.turns?0?: *system prompt differs*",
    ])
    warned.stdout.no_fnmatch_line("*Traceback*")
    warned.stdout.no_fnmatch_line("*.py:[0-9]*")  # a message, not a traceback

    with serving(monkeypatch, calculator) as fp:
        calc.run("--connic-record-mode", "all").assert_outcomes(passed=1, failed=1, warnings=0)
    assert len(fp.requests) == 6  # 'all' re-records although the cassettes exist
    with no_network(monkeypatch):
        clean = calc.run()
    clean.assert_outcomes(passed=1, failed=1, warnings=0)
    clean.stdout.no_fnmatch_line("*differs*")


def _events(report: Any) -> Iterator[dict[str, Any]]:
    """Every event of every run in a --connic-json report, wherever it nests."""
    if isinstance(report, dict):
        for key, value in report.items():
            if key == "events" and isinstance(value, list):
                yield from (e for e in value if isinstance(e, dict))
            else:
                yield from _events(value)
    elif isinstance(report, list):
        for value in report:
            yield from _events(value)


GREETER = """
tests:
  - name: greets
    payload: hello
    runs: {runs}
"""


def numbered_answers() -> Any:
    count = iter(range(1, 100))
    return lambda body: text(f"answer {next(count)}")


def test_new_runs_appends_the_runs_a_cassette_lacks(calc: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    calc.agent("greeter", retry_options=FAST_RETRIES)
    calc.suite("greeter", GREETER.format(runs=1))
    path = calc.root / "cassettes" / "greeter" / "greets.yaml"
    with serving(monkeypatch, numbered_answers()) as fp:
        calc.run("--connic-record-mode", "once", "-k", "greets").assert_outcomes(passed=1)
        assert [r["turns"][0]["content"] for r in yaml.safe_load(path.read_text("utf-8"))["runs"]] == ["answer 1"]

        calc.suite("greeter", GREETER.format(runs=3))
        # 'once' keeps an existing cassette: run i replays runs[i % 1], nothing is recorded
        calc.run("--connic-record-mode", "once", "-k", "greets").assert_outcomes(passed=1)
        assert len(fp.requests) == 1
        calc.run("--connic-record-mode", "new_runs", "-k", "greets").assert_outcomes(passed=1)
        assert len(fp.requests) == 3

    contents = [r["turns"][0]["content"] for r in yaml.safe_load(path.read_text("utf-8"))["runs"]]
    assert contents[0] == "answer 1"  # the recorded run is kept, the two new ones appended
    assert sorted(contents[1:]) == ["answer 2", "answer 3"]


def test_live_calls_the_provider_and_never_writes_cassettes(
    calc: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a cassette that would fail the case: live mode must not read it, nor rewrite it
    stale = calc.replies("calc", "adds", [("add", {"a": 4, "b": 6})], '{"sum": 99}')
    before = stale.read_bytes()
    with serving(monkeypatch, calculator) as fp:
        result = calc.run("--connic-live", "-k", "adds")
    result.assert_outcomes(passed=1)
    assert len(fp.requests) == 4
    assert stale.read_bytes() == before
    assert sorted(p.name for p in (calc.root / "cassettes" / "calc").iterdir()) == ["adds.yaml"]

    with serving(monkeypatch, calculator) as fp:
        calc.run("--connic-live", "-k", "wrong").assert_outcomes(failed=1)
    assert len(fp.requests) == 2
    assert not (calc.root / "cassettes" / "calc" / "wrong sum.yaml").exists()


HAND_WRITTEN = """\
# written by hand: the sum the model reports
version: 1
runs:
  - turns:
      - tool_calls:
          - {name: add, arguments: {a: 4, b: 6}}   # flow style, as written
        request:
          model: openai/gpt-4o-mini
          digest: 0000000000000000000000000000000000000000000000000000000000000000
          messages: [aaaaaaaaaaaa]
      - content:          # a mapping, sent as its JSON
          sum: 10
        x-note: 'kept'
"""


def test_digests_refreshes_stale_digests_and_keeps_what_was_written_by_hand(
    calc: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = calc.write("cassettes/calc/adds.yaml", HAND_WRITTEN)
    calc.suite("calc", SUITE.split("  - name: wrong sum")[0])
    with no_network(monkeypatch):
        calc.run().assert_outcomes(failed=1)  # the stale digest diverges: strict replay fails
        calc.run("--connic-record-mode", "digests").assert_outcomes(passed=1)
        text_after = path.read_text("utf-8")
        calc.run().assert_outcomes(passed=1, warnings=0)
        calc.run("--connic-record-mode", "digests").assert_outcomes(passed=1)
    assert path.read_text("utf-8") == text_after  # current digests: the file is not rewritten
    data = yaml.safe_load(text_after)
    ask, answer = data["runs"][0]["turns"]
    assert ask["request"]["digest"] != "0" * 64 and len(ask["request"]["messages"]) == 1
    assert set(answer["request"]) == {"model", "digest", "system", "messages", "tools", "volatile", "text"}
    assert answer["content"] == {"sum": 10}  # still a mapping, not a JSON string
    assert answer["x-note"] == "kept"
    assert text_after.startswith("# written by hand: the sum the model reports\nversion: 1\n")
    assert "- {name: add, arguments: {a: 4, b: 6}}   # flow style, as written\n" in text_after
    assert "      - content:          # a mapping, sent as its JSON\n          sum: 10\n" in text_after
