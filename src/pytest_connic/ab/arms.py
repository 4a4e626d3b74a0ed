"""One arm of an A/B comparison: its binary outcomes and its descriptive metrics.

Pure standard library except :func:`wilson_interval`, which takes its normal
quantile from SciPy (imported when called, never at import time).
"""

from __future__ import annotations

import math
import operator
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


def _z_two_sided(confidence: float) -> float:
    """The standard-normal quantile ``z`` with ``P(|Z| <= z) = confidence``."""
    from scipy.stats import norm

    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1); got {confidence!r}")
    return float(norm.isf((1.0 - confidence) / 2.0))


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (Wilson 1927, no continuity correction).

    Returns ``(0.0, 1.0)`` when ``n == 0``: no runs carry no information.
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n; got successes={successes}, n={n}")
    z = _z_two_sided(confidence)
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n)) / denom
    # The exact bounds at 0 and n are 0 and 1; rounding must not move them.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


def newcombe_interval(
    control: ArmStats, variant: ArmStats, confidence: float = 0.95
) -> tuple[float, float]:
    """Newcombe's hybrid score interval (method 10, 1998) for ``variant - control`` pass rate.

    Built from the two Wilson intervals; unadjusted for repeated looks, so it is
    descriptive only. Returns ``(-1.0, 1.0)`` when either arm has no runs.
    """
    if control.runs == 0 or variant.runs == 0:
        return (-1.0, 1.0)
    p1, p2 = variant.successes / variant.runs, control.successes / control.runs
    l1, u1 = wilson_interval(variant.successes, variant.runs, confidence)
    l2, u2 = wilson_interval(control.successes, control.runs, confidence)
    d = p1 - p2
    low = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return (max(-1.0, low), min(1.0, high))


def _mean(values: Sequence[float]) -> float | None:
    return float(statistics.fmean(values)) if values else None


def _percentile(values: Sequence[float], q: int) -> float | None:
    """The ``q``-th percentile with linear interpolation (NumPy's default, Hyndman–Fan type 7)."""
    if not values:
        return None
    if len(values) == 1:
        return float(values[0])
    return float(statistics.quantiles(values, n=100, method="inclusive")[q - 1])


@dataclass(frozen=True)
class ArmSummary:
    """A JSON-friendly snapshot of one arm; metrics are ``None`` when there is no data."""

    runs: int
    successes: int
    pass_rate: float | None
    wilson: tuple[float, float]
    mean_latency_ms: float | None
    p50_latency_ms: float | None
    p95_latency_ms: float | None
    mean_tokens: float | None
    mean_cost: float | None


@dataclass
class ArmStats:
    """Outcomes of the finished runs of one arm (control = base agent, or the variant).

    ``runs``/``successes`` drive every test; the metric lists are descriptive and
    may be shorter than ``runs`` (a run that recorded no latency adds nothing).
    """

    runs: int
    successes: int
    latencies_ms: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Counts often arrive as NumPy integers; keep plain ints (JSON, reprs).
        self.runs, self.successes = operator.index(self.runs), operator.index(self.successes)
        if self.runs < 0 or not 0 <= self.successes <= self.runs:
            raise ValueError(f"need 0 <= successes <= runs; got successes={self.successes}, runs={self.runs}")

    @classmethod
    def from_outcomes(cls, passed: Iterable[bool]) -> ArmStats:
        """Counts from a sequence of pass/fail outcomes (no metrics)."""
        outcomes = [bool(p) for p in passed]
        return cls(runs=len(outcomes), successes=sum(outcomes))

    @property
    def pass_rate(self) -> float | None:
        """Share of runs that passed, ``None`` without runs."""
        return self.successes / self.runs if self.runs else None

    @property
    def wilson(self) -> tuple[float, float]:
        """95% Wilson interval of the pass rate (descriptive, not adjusted for looks)."""
        return wilson_interval(self.successes, self.runs)

    @property
    def mean_latency_ms(self) -> float | None:
        """Mean latency in milliseconds."""
        return _mean(self.latencies_ms)

    @property
    def p50_latency_ms(self) -> float | None:
        """Median latency in milliseconds."""
        return _percentile(self.latencies_ms, 50)

    @property
    def p95_latency_ms(self) -> float | None:
        """95th-percentile latency in milliseconds (linear interpolation)."""
        return _percentile(self.latencies_ms, 95)

    @property
    def mean_tokens(self) -> float | None:
        """Mean tokens per run."""
        return _mean(self.tokens)

    @property
    def mean_cost(self) -> float | None:
        """Mean cost per run."""
        return _mean(self.costs)

    def summary(self) -> ArmSummary:
        """Freeze the counts and descriptive metrics into an :class:`ArmSummary`."""
        return ArmSummary(
            runs=self.runs,
            successes=self.successes,
            pass_rate=self.pass_rate,
            wilson=self.wilson,
            mean_latency_ms=self.mean_latency_ms,
            p50_latency_ms=self.p50_latency_ms,
            p95_latency_ms=self.p95_latency_ms,
            mean_tokens=self.mean_tokens,
            mean_cost=self.mean_cost,
        )
