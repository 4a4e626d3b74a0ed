"""``retry_options`` as values (``runtime/retries.py``): Connic's defaults, the backoff between
operation attempts, and the tool-failure reflection budget of an LLM agent counted per model turn.
The lifecycle that applies them is tests/unit/lifecycle/test_retries.py's."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from pytest_connic.project.sdk import AgentConfig
from pytest_connic.records.run import ToolCallRecord
from pytest_connic.runtime.retries import ReflectionBudget, RetrySettings, check_reflection_budget
from pytest_connic.runtime.signals import RunFailed


def config(name: str = "bot", **retry: object) -> AgentConfig:
    options = {"retry_options": retry} if retry else {}
    return AgentConfig(version="1.0", name=name, description="d", type="llm", model="openai/gpt-4o-mini",
                       system_prompt="p", **options)


def test_connic_defaults_where_retry_options_are_unset() -> None:
    assert RetrySettings.of(config()) == RetrySettings(attempts=3, initial_delay=10.0, max_delay=30.0,
                                                       rerun_middleware=False)
    assert RetrySettings.of(config(attempts=5, rerun_middleware=True)) == RetrySettings(
        attempts=5, initial_delay=10.0, max_delay=30.0, rerun_middleware=True)
    assert RetrySettings.of(config(attempts=1, initial_delay=0, max_delay=2)) == RetrySettings(
        attempts=1, initial_delay=0.0, max_delay=2.0)


@pytest.mark.parametrize(("initial", "maximum", "delays"), [
    (10.0, 30.0, [10.0, 20.0, 30.0, 30.0]),  # doubling, capped at max_delay
    (1.0, 100.0, [1.0, 2.0, 4.0, 8.0]),
    (5.0, 3.0, [3.0, 3.0, 3.0, 3.0]),  # a cap below the first delay caps it too
    (0.0, 30.0, [0.0, 0.0, 0.0, 0.0]),
])
def test_the_delay_before_each_retry(initial: float, maximum: float, delays: list[float]) -> None:
    settings = RetrySettings(initial_delay=initial, max_delay=maximum)
    assert [settings.delay(retry) for retry in (1, 2, 3, 4)] == delays


def call(seq: int, ref: str, error: str | None = None, *, agent: str = "bot", aborted: bool = False,
         approval: str | None = None) -> ToolCallRecord:
    return ToolCallRecord(seq=seq, name=ref.rpartition(".")[2], ref=ref, params={}, error=error, agent=agent,
                          aborted=aborted, approval=approval)  # type: ignore[arg-type]


def turns(agent: AgentConfig, *model_turns: Iterable[ToolCallRecord]) -> ReflectionBudget:
    """Check the budget after each model turn, the run's calls growing as a run's do."""
    budget = ReflectionBudget()
    calls: list[ToolCallRecord] = []
    for turn in model_turns:
        calls.extend(turn)
        check_reflection_budget(agent, calls, budget)
    return budget


def test_the_run_fails_once_a_tool_has_failed_attempts_turns_in_a_row() -> None:
    agent = config(attempts=2)
    budget = turns(agent, [call(1, "t.lookup", "boom 1")])
    assert budget.streaks == {"t.lookup": 1}
    with pytest.raises(RunFailed) as failed:
        turns(agent, [call(1, "t.lookup", "boom 1")], [call(2, "t.lookup", "boom 2")])
    assert str(failed.value) == ("tool t.lookup failed in 2 model turn(s) in a row, the retry_options.attempts "
                                 "budget (2) of agent 'bot': boom 2")


def test_a_successful_turn_starts_the_count_again() -> None:
    budget = turns(config(attempts=2), [call(1, "t.lookup", "boom")], [call(2, "t.lookup")],
                   [call(3, "t.lookup", "boom")])
    assert budget.streaks == {"t.lookup": 1}
    assert budget.checked == 3


def test_calls_of_one_tool_in_one_turn_are_one_attempt() -> None:
    # two failures in one turn count once; a failure and a success in one turn do not count
    budget = turns(config(attempts=2), [call(1, "t.lookup", "a"), call(2, "t.lookup", "b")],
                   [call(3, "t.lookup", "c"), call(4, "t.lookup")])
    assert budget.streaks == {"t.lookup": 0}
    assert budget.errors == {"t.lookup": "c"}


def test_aborts_decisions_and_other_agents_calls_are_not_failures() -> None:
    turns(config(attempts=1), [
        call(1, "t.lookup", "aborted by its before hook", aborted=True),
        call(2, "t.delete", "approval rejected", approval="rejected"),
        call(3, "t.delete", "approval timeout", approval="timeout"),
        call(4, "t.lookup", "the child's own failure", agent="child"),
    ])  # attempts=1: any counted failure would fail the run
    with pytest.raises(RunFailed, match="tool t.lookup failed in 1 model turn"):
        turns(config(attempts=1), [call(1, "t.lookup", "boom")])
