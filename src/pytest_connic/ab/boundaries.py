"""Group-sequential boundaries: Lan–DeMets O'Brien–Fleming-type alpha spending.

The sequential z statistics ``Z_1 .. Z_K`` observed at information fractions
``t_1 < .. < t_K = 1`` are (asymptotically) jointly normal with
``corr(Z_i, Z_j) = sqrt(t_i / t_j)`` for ``i <= j`` and mean ``theta * sqrt(t_k)``,
where ``theta`` is the drift (the expected z statistic at full information).

Per side, the OBF-type spending function (Lan & DeMets 1983) is
``alpha(t) = 2 - 2 * Phi(z_{1 - a/2} / sqrt(t))`` with ``a`` the one-sided level.
Boundaries are solved look by look (Brent's method) so the probability of a
first crossing by look ``k`` under ``theta = 0`` equals the alpha spent by
``t_k``. Rectangle probabilities come from ``scipy.stats.multivariate_normal.cdf``
(Genz's randomised quasi-Monte-Carlo) with a fixed generator, so results are
reproducible; the absolute integration error is ~1e-6, which moves a boundary
by less than 1e-4.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

_ABSEPS = 1e-6
_MAXPTS = 4_000_000
_SEED = 20240229  # a fixed QMC generator makes every boundary reproducible
MAX_LOOKS = 5


def information_fractions(looks: int) -> tuple[float, ...]:
    """Equally spaced information fractions ``1/K, 2/K, .., 1``."""
    if not 1 <= looks <= MAX_LOOKS:
        raise ValueError(f"looks must be between 1 and {MAX_LOOKS}; got {looks!r}")
    return tuple((k + 1) / looks for k in range(looks))


def obf_spending(t: float, one_sided_alpha: float) -> float:
    """Lan–DeMets OBF-type alpha spent on one side by information fraction ``t``."""
    from scipy.stats import norm

    if t <= 0.0:
        return 0.0
    return float(2.0 - 2.0 * norm.cdf(norm.isf(one_sided_alpha / 2.0) / math.sqrt(min(t, 1.0))))


def _correlation(fractions: tuple[float, ...]) -> NDArray[np.float64]:
    import numpy as np

    t = np.asarray(fractions, dtype=float)
    correlation: NDArray[np.float64] = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    return correlation


def _fixed_generator(cdf: Callable[..., object]) -> dict[str, object]:
    """``rng``, the fixed QMC generator, where SciPy's ``multivariate_normal.cdf`` takes one (1.16
    and later); before, it integrates with Genz's Fortran routine, which takes none."""
    import inspect

    import numpy as np

    return {"rng": np.random.default_rng(_SEED)} if "rng" in inspect.signature(cdf).parameters else {}


def _box_probability(
    lower: list[float], upper: list[float], fractions: tuple[float, ...], drift: float
) -> float:
    """``P(lower_k < Z_k < upper_k for every k)`` for the first ``len(upper)`` looks."""
    import numpy as np
    from scipy.stats import multivariate_normal, norm

    k = len(upper)
    mean = drift * np.sqrt(np.asarray(fractions[:k], dtype=float))
    if k == 1:
        return float(norm.cdf(upper[0] - mean[0]) - norm.cdf(lower[0] - mean[0]))
    value = multivariate_normal.cdf(
        np.asarray(upper, dtype=float),
        mean=mean,
        cov=_correlation(fractions[:k]),
        lower_limit=np.asarray(lower, dtype=float),
        maxpts=_MAXPTS,
        abseps=_ABSEPS,
        releps=0.0,
        **_fixed_generator(multivariate_normal.cdf),
    )
    return float(np.clip(value, 0.0, 1.0))


def _lower(bounds: list[float], sides: int) -> list[float]:
    return [-b for b in bounds] if sides == 2 else [-math.inf] * len(bounds)


@functools.lru_cache(maxsize=64)
def obf_boundaries(fractions: tuple[float, ...], alpha: float, sides: int) -> tuple[float, ...]:
    """Critical z values per look for total level ``alpha``.

    ``sides=2``: symmetric two-sided boundaries ``|Z_k| >= c_k``, ``alpha/2`` per side.
    ``sides=1``: upper boundaries ``Z_k >= c_k`` at one-sided level ``alpha``.
    ``fractions`` must be a tuple: results are cached per argument set.
    """
    from scipy.optimize import brentq
    from scipy.stats import norm

    if sides not in (1, 2):
        raise ValueError(f"sides must be 1 or 2; got {sides!r}")
    per_side = alpha / sides
    bounds: list[float] = []
    for k, t in enumerate(fractions):
        target = sides * obf_spending(t, per_side)  # cumulative exit probability under H0
        if k == 0:
            bounds.append(float(norm.isf(target / sides)))
            continue

        def excess(c: float, target: float = target) -> float:
            trial = [*bounds, c]
            return 1.0 - _box_probability(_lower(trial, sides), trial, fractions, 0.0) - target

        bounds.append(float(brentq(excess, 0.5, 12.0, xtol=1e-7)))
    return tuple(bounds)


def upper_crossing_probability(
    bounds: tuple[float, ...], fractions: tuple[float, ...], drift: float, sides: int
) -> float:
    """Probability that the first boundary crossed is an upper one (power when ``drift > 0``)."""
    total = 0.0
    for k in range(len(bounds)):
        earlier = list(bounds[:k])
        lower = _lower(earlier, sides)
        reach = _box_probability([*lower, -math.inf], [*earlier, math.inf], fractions, drift)
        stay_below = _box_probability([*lower, -math.inf], [*earlier, bounds[k]], fractions, drift)
        total += reach - stay_below
    return total


@functools.lru_cache(maxsize=64)
def design_drift(fractions: tuple[float, ...], alpha: float, power: float, sides: int) -> float:
    """The drift ``theta`` at which the design crosses the upper boundary with probability ``power``."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    bounds = obf_boundaries(fractions, alpha, sides)
    fixed = float(norm.isf(alpha / sides) + norm.isf(1.0 - power))

    def shortfall(theta: float) -> float:
        return upper_crossing_probability(bounds, fractions, theta, sides) - power

    return float(brentq(shortfall, fixed - 1.0, fixed + 3.0, xtol=1e-6))


def inflation_factor(fractions: tuple[float, ...], alpha: float, power: float, sides: int) -> float:
    """Ratio of the group-sequential maximum sample size to the fixed-design one.

    ``R = (theta_GS / (z_{1-alpha/sides} + z_{power}))**2`` (Jennison & Turnbull 2000, §2.5).
    """
    from scipy.stats import norm

    fixed = float(norm.isf(alpha / sides) + norm.isf(1.0 - power))
    return (design_drift(fractions, alpha, power, sides) / fixed) ** 2
