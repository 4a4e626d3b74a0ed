"""Single-shot tests and the Exploratory-mode summary.

These p values are *not* adjusted for repeated looks: use them once, on a
sample size fixed in advance, or as description. Sequential decisions belong to
:func:`pytest_connic.ab.analyze_look`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple

from pytest_connic.ab.arms import ArmStats, newcombe_interval
from pytest_connic.ab.score import score_z


class McNemarResult(NamedTuple):
    """Exact McNemar test: ``statistic`` is the smaller discordant count (statsmodels' convention)."""

    statistic: float
    p_value: float


def _binomial_p(k: int, n: int) -> float:
    """Two-sided exact binomial p value for ``k`` of ``n`` at ``p = 1/2`` (1.0 when ``n == 0``)."""
    from scipy.stats import binomtest

    return 1.0 if n == 0 else float(binomtest(k, n, 0.5, alternative="two-sided").pvalue)


def mcnemar(pairs: Sequence[tuple[bool, bool]]) -> McNemarResult:
    """Exact McNemar test on paired ``(control_passed, variant_passed)`` outcomes.

    Only discordant pairs carry information; under H0 the variant-only count is
    Binomial(discordant, 1/2). Pair runs that share a case and seed/cassette.
    """
    control_only = sum(1 for c, v in pairs if c and not v)
    variant_only = sum(1 for c, v in pairs if v and not c)
    p = _binomial_p(variant_only, control_only + variant_only)
    return McNemarResult(float(min(control_only, variant_only)), p)


def sign_test(control_rates: Sequence[float], variant_rates: Sequence[float]) -> float:
    """Two-sided sign test on per-case pass rates; ties are dropped (1.0 if all tie)."""
    if len(control_rates) != len(variant_rates):
        counts = f"{len(control_rates)} and {len(variant_rates)}"
        raise ValueError(f"need one rate per case in each arm; got {counts}")
    diffs = [v - c for c, v in zip(control_rates, variant_rates)]
    wins = sum(1 for d in diffs if d > 0)
    losses = sum(1 for d in diffs if d < 0)
    return _binomial_p(wins, wins + losses)


def two_proportion_test(control: ArmStats, variant: ArmStats) -> float:
    """Two-sided p value of the unpaired pooled two-proportion z test (= chi-square, no correction)."""
    from scipy.stats import norm

    if control.runs == 0 or variant.runs == 0:
        raise ValueError("both arms need at least one run")
    z = float(score_z(control.successes, control.runs, variant.successes, variant.runs))
    return float(2.0 * norm.sf(abs(z)))


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def exploratory_summary(control: ArmStats, variant: ArmStats, min_runs: int) -> dict[str, Any]:
    """Descriptive comparison for Exploratory mode; nothing here is a decision.

    ``insufficient_runs`` is true while either arm has fewer than ``min_runs``
    finished runs. Differences are variant minus control; the pass-rate interval
    is Newcombe's hybrid score interval, unadjusted for peeking.
    """
    if min_runs < 0:
        raise ValueError(f"min_runs must be >= 0; got {min_runs!r}")
    c, v = control.summary(), variant.summary()
    return {
        "control": dataclasses.asdict(c),
        "variant": dataclasses.asdict(v),
        "min_runs": min_runs,
        "insufficient_runs": control.runs < min_runs or variant.runs < min_runs,
        "difference": {
            "pass_rate": _delta(c.pass_rate, v.pass_rate),
            "pass_rate_interval_95": newcombe_interval(control, variant),
            "mean_latency_ms": _delta(c.mean_latency_ms, v.mean_latency_ms),
            "p95_latency_ms": _delta(c.p95_latency_ms, v.p95_latency_ms),
            "mean_tokens": _delta(c.mean_tokens, v.mean_tokens),
            "mean_cost": _delta(c.mean_cost, v.mean_cost),
        },
    }
