"""Monte-Carlo operating characteristics of a plan, vectorised over experiments.

Each simulated experiment draws Binomial success counts for the runs added
between looks, so the cumulative counts at every look come from one
``cumsum``; the looks are then classified with the same :func:`classify` and
:func:`score_z` that :func:`analyze_look` uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_connic.ab.plan import Plan
from pytest_connic.ab.score import score_z
from pytest_connic.ab.sequential import CONTINUE, RECOMMENDATIONS, Recommendation, classify

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


@dataclass(frozen=True)
class Simulation:
    """Per-experiment outcomes: ``codes`` index :data:`RECOMMENDATIONS`; ``looks`` are 1-based."""

    codes: NDArray[np.int_]
    looks: NDArray[np.int_]
    runs_per_arm: NDArray[np.int_]

    def rate(self, recommendation: Recommendation) -> float:
        """Share of experiments that ended with ``recommendation``."""
        return float((self.codes == RECOMMENDATIONS.index(recommendation)).mean())

    @property
    def mean_runs_per_arm(self) -> float:
        """Average runs per arm spent before stopping."""
        return float(self.runs_per_arm.mean())


def cumulative_successes(
    plan: Plan, pass_rate: float, n_sims: int, rng: np.random.Generator
) -> NDArray[np.int_]:
    """Cumulative successes of one arm at each look, shape ``(n_sims, looks)``."""
    import numpy as np

    increments = np.diff(np.asarray([0, *plan.looks]))
    return np.cumsum(rng.binomial(increments, pass_rate, size=(n_sims, len(plan.looks))), axis=1)


def decide(plan: Plan, control: NDArray[np.int_], variant: NDArray[np.int_]) -> Simulation:
    """Apply the look rules to cumulative success counts of shape ``(n_sims, looks)``."""
    import numpy as np

    n_sims = control.shape[0]
    codes = np.full(n_sims, CONTINUE, dtype=int)
    stop = np.zeros(n_sims, dtype=int)
    for k, runs in enumerate(plan.looks):
        active = codes == CONTINUE
        z = score_z(control[active, k], runs, variant[active, k], runs, plan.null_difference)
        codes[active] = classify(plan, k, z)
        stop[active] = k
    looks = np.asarray(plan.looks)
    return Simulation(codes=codes, looks=stop + 1, runs_per_arm=looks[stop])


def simulate(
    plan: Plan, control_rate: float, variant_rate: float, n_sims: int, seed: int | None = None
) -> Simulation:
    """Simulate ``n_sims`` experiments with true pass rates ``control_rate`` and ``variant_rate``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    control = cumulative_successes(plan, control_rate, n_sims, rng)
    variant = cumulative_successes(plan, variant_rate, n_sims, rng)
    return decide(plan, control, variant)
