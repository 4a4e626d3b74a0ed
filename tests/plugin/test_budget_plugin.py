"""``--connic-budget-tokens`` / ``--connic-budget-cost`` (docs/history.md#budgets): once the session's
runs spent the budget no run starts, across xdist workers; the cases that could not finish are
skipped with the reason, never failed."""

from __future__ import annotations

import importlib.util
import json

import pytest

from helpers.fake_provider import FakeProvider, text
from helpers.project import ConnicProject

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

CASES = 6
TOKENS_PER_RUN = 15  #: the fake provider's default usage: 10 in, 5 out


def suite(cases: int, runs: int, threshold: int = 100) -> str:
    return "agent: bot\ntests:\n" + "".join(
        f"  - name: case {i}\n    payload: 'hi {i}'\n    runs: {runs}\n    success_threshold: {threshold}\n"
        f"    expected_result: output.ok == true\n" for i in range(cases))


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="the [live] extra (litellm) is not installed")
@pytest.mark.skipif(importlib.util.find_spec("xdist") is None, reason="pytest-xdist is not installed")
@pytest.mark.usefixtures("wide_terminal")
def test_the_spend_stops_at_the_budget_across_two_workers(project: ConnicProject,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    project.agent("bot")
    project.suite("bot", suite(CASES, runs=2))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    budget = 4 * TOKENS_PER_RUN
    with FakeProvider(lambda body: text('{"ok": true}')) as fp:
        monkeypatch.setenv("OPENAI_API_BASE", fp.base_url)
        result = project.run("-n", "2", "--connic-live", "--connic-concurrency", "1",
                                        "--connic-budget-tokens", str(budget), "--connic-json", "report.json", "-rs")
    served = len(fp.requests)
    # each worker checks the ledger before a run starts: at most one run per worker is in flight
    # when the budget is crossed, so the spend passes it by at most one run
    assert budget <= served * TOKENS_PER_RUN <= budget + TOKENS_PER_RUN
    report = json.loads((project.root / "report.json").read_text("utf-8"))
    assert report["budget"]["tokens"] == served * TOKENS_PER_RUN
    assert report["budget"]["runs"] == served
    cases = {c["nodeid"]: c for c in report["cases"]}
    assert sum(len(c["agent_run_ids"]) for c in cases.values()) == served
    left_out = [n for n, c in cases.items() if c["left_out"] == "budget spent"]
    finished = [n for n, c in cases.items() if c["left_out"] is None]
    assert sorted(report["budget"]["left_out"]) == sorted(left_out)
    assert all(cases[n]["passed"] for n in finished) and len(finished) == served // 2
    assert len(left_out) == CASES - len(finished) >= 3
    result.assert_outcomes(passed=len(finished), skipped=len(left_out))
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*run(s) not started: budget spent"])
    result.stdout.fnmatch_lines(["*SKIPPED [[]*[]] tests/bot.yaml:*: budget spent"])
    result.stdout.fnmatch_lines([
        (f"*budget: spent {served * TOKENS_PER_RUN} of {budget} tokens over {served} run(s); left out "
        f"{len(left_out)} case(s): *"),
    ])
    result.stdout.fnmatch_lines(["* SKIP *bot::case *"])
    result.stdout.no_fnmatch_line("*FAIL*")
    assert report["status"] == "passed" and report["summary"]["skipped"] == len(left_out)


@pytest.mark.usefixtures("wide_terminal")
def test_a_budget_stop_keeps_a_verdict_the_finished_runs_decide(project: ConnicProject) -> None:
    """Replayed runs count their cassette's tokens: a budget also bounds what a replay would cost live."""
    project.agent("bot")
    project.suite("bot", suite(2, runs=3, threshold=50))
    for i in range(2):
        project.cassette("bot", f"case {i}", [{"turns": [
            {"content": '{"ok": true}', "usage": {"input_tokens": 10, "output_tokens": 5}}]}])
    result = project.run("--connic-concurrency", "1", "--connic-budget-tokens", "30", "--connic-json", "r.json",
                         "-p", "no:xdist")
    result.assert_outcomes(passed=1, skipped=1)
    report = json.loads((project.root / "r.json").read_text("utf-8"))
    first, second = sorted(report["cases"], key=lambda c: c["test_name"])
    # two of three runs passed: the 50% threshold is reached, the third run is not needed
    assert first["passed"] and first["successes"] == 2 and first["skipped_runs"] == 1
    assert first["early_stop_reason"] == "budget spent; threshold reached (2 of 2 needed runs passed)"
    assert second["left_out"] == "budget spent" and second["agent_run_ids"] == []
    result.stdout.fnmatch_lines([("*budget: spent 30 of 30 tokens over 2 run(s); left out 1 case(s): "
                                 "tests/bot.yaml::case 1*")])


@pytest.mark.parametrize("value", ["0", "-1", "nan", "lots"])
def test_a_bad_cost_budget_names_its_source(project: ConnicProject, value: str) -> None:
    project.agent("bot")
    result = project.run("--connic-budget-cost", value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*invalid value '{value}' from --connic-budget-cost:*"])


def test_a_case_left_out_is_listed_apart_from_the_failures(project: ConnicProject) -> None:
    project.agent("bot")
    project.suite("bot", suite(3, runs=1))
    for i, ok in enumerate(["true", "false", "true"]):
        project.cassette("bot", f"case {i}", [{"turns": [
            {"content": f'{{"ok": {ok}}}', "usage": {"input_tokens": 10, "output_tokens": 5}}]}])
    result = project.run("--connic-concurrency", "1", "--connic-budget-tokens", "30", "-p", "no:xdist",
                         "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    out = result.stdout.str()
    failures = out.split("→ Failure details: in the failure report of each case above")[1].split("→ Not run")[0]
    assert "bot::case 1" in failures and "bot::case 2" not in failures
    result.stdout.fnmatch_lines(["  → Not run to a verdict (no failure report):",
                                 "    - bot::case 2 (tests/bot.yaml:*): skipped, budget spent"])
