"""The score statistic for a difference of two pass rates.

The z statistic for ``H0: p_variant - p_control = d0`` divides the observed
difference minus ``d0`` by a standard error evaluated at the maximum-likelihood
rates restricted to ``H0`` (Farrington & Manning 1990). For ``d0 = 0`` that is
the pooled two-proportion z; for ``d0 = -margin`` the non-inferiority score
test. Unlike a Wald statistic it stays finite when an arm passes every run.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray


def restricted_variant_rate(
    p1: NDArray[np.float64], p2: NDArray[np.float64], ratio: NDArray[np.float64], d0: float
) -> NDArray[np.float64]:
    """Closed-form restricted MLE of the variant rate under ``p1 - p2 = d0`` (cubic root).

    ``p1``/``p2`` are the observed variant/control rates, ``ratio = n_control / n_variant``.
    """
    import numpy as np

    a = 1.0 + ratio
    b = -(1.0 + ratio + p1 + ratio * p2 + d0 * (ratio + 2.0))
    c = d0 * d0 + d0 * (2.0 * p1 + ratio + 1.0) + p1 + ratio * p2
    d = -p1 * d0 * (1.0 + d0)
    v = b**3 / (27.0 * a**3) - b * c / (6.0 * a**2) + d / (2.0 * a)
    u = np.where(v >= 0, 1.0, -1.0) * np.sqrt(np.maximum(b * b / (9.0 * a * a) - c / (3.0 * a), 0.0))
    cos_arg = np.divide(v, u**3, out=np.zeros_like(v), where=u != 0)
    w = (math.pi + np.arccos(np.clip(cos_arg, -1.0, 1.0))) / 3.0
    rate: NDArray[np.float64] = np.clip(2.0 * u * np.cos(w) - b / (3.0 * a), max(0.0, d0), min(1.0, 1.0 + d0))
    return rate


def score_z(
    control_successes: ArrayLike,
    control_runs: ArrayLike,
    variant_successes: ArrayLike,
    variant_runs: ArrayLike,
    null_difference: float = 0.0,
) -> NDArray[np.float64]:
    """Score z for ``H0: p_variant - p_control = null_difference``; broadcasts over arrays.

    Positive z favours the variant. Returns 0 where the variance is 0 (both arms
    all-pass or all-fail under ``d0 = 0``: no evidence either way).
    """
    import numpy as np

    xc, nc = np.asarray(control_successes, float), np.asarray(control_runs, float)
    xv, nv = np.asarray(variant_successes, float), np.asarray(variant_runs, float)
    p1, p2 = xv / nv, xc / nc
    if null_difference == 0.0:
        pooled = (xc + xv) / (nc + nv)
        var = pooled * (1.0 - pooled) * (1.0 / nc + 1.0 / nv)
    else:
        r1 = restricted_variant_rate(p1, p2, nc / nv, null_difference)
        r2 = r1 - null_difference
        var = r1 * (1.0 - r1) / nv + r2 * (1.0 - r2) / nc
    diff = p1 - p2 - null_difference
    se = np.sqrt(np.maximum(var, 0.0))
    return np.asarray(np.divide(diff, se, out=np.zeros_like(diff), where=se > 0))


