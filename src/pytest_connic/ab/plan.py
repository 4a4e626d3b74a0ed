"""The Confidence-mode plan: sample size, planned looks and their boundaries."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from pytest_connic.ab.boundaries import (
    design_drift,
    inflation_factor,
    information_fractions,
    obf_boundaries,
)

Objective = Literal["superiority", "non_inferiority"]
OBJECTIVES: tuple[Objective, ...] = ("superiority", "non_inferiority")


@dataclass(frozen=True)
class Plan:
    """A locked Confidence-mode design for comparing pass rates (higher is better).

    ``looks`` are cumulative runs per arm at which the data are analysed;
    ``boundaries`` the critical z value at each look; ``drift`` the expected z at
    the last look under the planned effect; ``futility`` an optional
    conditional-power threshold for a non-binding stop at interim looks. Superiority uses symmetric
    two-sided boundaries at level ``alpha``; non-inferiority uses one-sided
    boundaries at level ``alpha / 2``, so both report a ``1 - alpha`` interval.
    """

    baseline: float
    mde: float
    alpha: float
    power: float
    objective: Objective
    margin: float | None
    runs_per_arm: int
    looks: list[int]
    boundaries: list[float]
    futility: float | None = None
    fractions: tuple[float, ...] = ()
    fixed_runs_per_arm: int = 0
    inflation: float = 1.0
    drift: float = 0.0

    @property
    def null_difference(self) -> float:
        """The variant-minus-control difference tested against: 0, or ``-margin``."""
        return -self.margin if self.margin is not None else 0.0

    @property
    def sides(self) -> int:
        """2 for superiority (both arms can win), 1 for non-inferiority."""
        return 2 if self.objective == "superiority" else 1

    @property
    def total_runs(self) -> int:
        """Maximum runs over both arms."""
        return 2 * self.runs_per_arm


def _check_inputs(
    baseline: float, mde: float, alpha: float, power: float, objective: str, margin: float | None
) -> None:
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}; got {objective!r}")
    if not 0.0 < baseline < 1.0:
        raise ValueError(f"baseline must be a pass rate in (0, 1); got {baseline!r}")
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5); got {alpha!r}")
    if not 0.5 <= power < 1.0:
        raise ValueError(f"power must be in [0.5, 1); got {power!r}")
    if baseline + mde > 1.0:
        raise ValueError(f"baseline + mde must not exceed 1; got {baseline} + {mde}")
    if objective == "superiority":
        if margin is not None:
            raise ValueError("margin applies to objective='non_inferiority' only")
        if mde <= 0.0:
            raise ValueError(f"mde must be > 0 for superiority; got {mde!r}")
        return
    if margin is None or not 0.0 < margin < baseline:
        raise ValueError(f"non_inferiority needs 0 < margin < baseline; got margin={margin!r}")
    if mde <= -margin:
        raise ValueError(f"mde (assumed true effect) must exceed -margin; got mde={mde!r}")


def fixed_sample_size(
    baseline: float, mde: float, *, alpha: float, power: float, margin: float | None = None
) -> float:
    """Runs per arm for a single-look score test, before rounding.

    ``n = (z_a * s0 + z_b * s1)**2 / (mde - d0)**2`` with ``s1**2`` the summed
    Bernoulli variances at the assumed rates and ``s0**2`` those at the rates
    restricted to ``H0: difference = d0`` (Farrington & Manning 1990). For
    superiority ``d0 = 0``, ``z_a = z_{1-alpha/2}`` and ``s0`` uses the average
    rate: the classical pooled (Fleiss, uncorrected) formula. For
    non-inferiority ``d0 = -margin`` at one-sided level ``alpha / 2``.
    """
    import numpy as np
    from scipy.stats import norm

    from pytest_connic.ab.score import restricted_variant_rate

    d0 = 0.0 if margin is None else -margin
    z_a, z_b = float(norm.isf(alpha / 2.0)), float(norm.isf(1.0 - power))
    p_c, p_v = baseline, baseline + mde
    r_v = float(restricted_variant_rate(np.asarray(p_v), np.asarray(p_c), np.asarray(1.0), d0))
    r_c = r_v - d0
    s0 = math.sqrt(r_v * (1.0 - r_v) + r_c * (1.0 - r_c))
    s1 = math.sqrt(p_v * (1.0 - p_v) + p_c * (1.0 - p_c))
    return ((z_a * s0 + z_b * s1) / (mde - d0)) ** 2


def _cumulative_looks(runs_per_arm: int, fractions: tuple[float, ...]) -> list[int]:
    looks = [max(1, math.ceil(runs_per_arm * t - 1e-9)) for t in fractions]
    looks[-1] = runs_per_arm
    return looks


def make_plan(
    baseline: float,
    mde: float | None = None,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    objective: Objective = "superiority",
    margin: float | None = None,
    looks: int = 4,
    futility: float | None = None,
) -> Plan:
    """Plan a group-sequential comparison of pass rates.

    ``mde`` is the minimum detectable improvement for superiority (required) and
    the assumed true effect for non-inferiority (default 0). ``futility``, if
    given, is a threshold in (0, 1) on the conditional power under the planned
    effect below which an interim look stops (non-binding). The fixed-design
    size is multiplied by the OBF inflation factor, found numerically (see
    :mod:`.boundaries`), and rounded up.
    """
    effect = 0.0 if mde is None and objective == "non_inferiority" else mde
    if effect is None:
        raise ValueError("mde is required for objective='superiority'")
    _check_inputs(baseline, effect, alpha, power, objective, margin)
    if futility is not None and not 0.0 < futility < 1.0:
        raise ValueError(f"futility (a conditional-power threshold) must be in (0, 1); got {futility!r}")
    fractions = information_fractions(looks)
    level, sides = (alpha, 2) if objective == "superiority" else (alpha / 2.0, 1)
    fixed = fixed_sample_size(baseline, effect, alpha=alpha, power=power, margin=margin)
    inflation = inflation_factor(fractions, level, power, sides)
    runs = math.ceil(fixed * inflation - 1e-9)
    return Plan(
        baseline=baseline,
        mde=effect,
        alpha=alpha,
        power=power,
        objective=objective,
        margin=margin,
        runs_per_arm=runs,
        looks=_cumulative_looks(runs, fractions),
        boundaries=list(obf_boundaries(fractions, level, sides)),
        futility=futility,
        fractions=fractions,
        fixed_runs_per_arm=math.ceil(fixed - 1e-9),
        inflation=inflation,
        drift=design_drift(fractions, level, power, sides),
    )
