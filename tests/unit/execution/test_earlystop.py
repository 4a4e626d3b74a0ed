"""Early stop never changes a verdict: every order of pass/fail for small N."""

from __future__ import annotations

import itertools

import pytest

from pytest_connic.execution.earlystop import decision, needed_passes


def simulate(outcomes: tuple[bool, ...], threshold: int, concurrency: int) -> tuple[bool, int]:
    """Start runs in order, at most ``concurrency`` in flight, finishing in start order;
    a run starts only while the verdict is open. Returns (verdict, runs started)."""
    runs = len(outcomes)
    started, finished, passed, failed = 0, 0, 0, 0
    while finished < runs:
        while started < runs and started - finished < concurrency and decision(passed, failed, runs, threshold) is None:
            started += 1
        if finished == started:
            break
        ok = outcomes[finished]
        finished += 1
        passed, failed = passed + ok, failed + (not ok)
    return passed * 100 >= threshold * runs, started


@pytest.mark.parametrize("runs", range(1, 9))
@pytest.mark.parametrize("threshold", [1, 33, 50, 66, 80, 99, 100])
@pytest.mark.parametrize("concurrency", [1, 2, 3])
def test_early_stop_never_changes_the_verdict(runs: int, threshold: int, concurrency: int) -> None:
    for outcomes in itertools.product((True, False), repeat=runs):
        full = sum(outcomes) * 100 >= threshold * runs
        early, started = simulate(outcomes, threshold, concurrency)
        assert early == full, (outcomes, threshold, concurrency)
        assert started <= runs


def test_early_stop_saves_runs_when_decided_early() -> None:
    # 10 runs at 50%: five passes in a row decide it
    verdict, started = simulate((True,) * 10, 50, 1)
    assert verdict and started == 5
    verdict, started = simulate((False,) * 10, 100, 1)
    assert not verdict and started == 1


@pytest.mark.parametrize(("runs", "threshold", "needed"), [(5, 80, 4), (3, 80, 3), (3, 66, 2), (1, 1, 1), (100, 1, 1)])
def test_needed_passes_is_integer_exact(runs: int, threshold: int, needed: int) -> None:
    assert needed_passes(runs, threshold) == needed
