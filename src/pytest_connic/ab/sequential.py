"""Analysing the planned looks of a Confidence-mode comparison.

The decision statistic is :func:`.score.score_z` against ``d0 = 0``
(superiority) or ``d0 = -margin`` (non-inferiority).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pytest_connic.ab.arms import ArmStats, ArmSummary
from pytest_connic.ab.plan import Plan
from pytest_connic.ab.safety import SafetyMonitor
from pytest_connic.ab.score import score_z

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray

Recommendation = Literal["variant", "control", "continue", "inconclusive"]
#: Integer codes used by the vectorised classifier, in this order.
RECOMMENDATIONS: tuple[Recommendation, ...] = ("continue", "variant", "control", "inconclusive")
CONTINUE, VARIANT, CONTROL, INCONCLUSIVE = range(4)


def conditional_power(
    z: ArrayLike, fraction: float, final_boundary: float, drift: float
) -> NDArray[np.float64]:
    """Chance of ending above the final boundary ``c_K`` if the planned effect is true.

    B-value form (Lan & Wittes 1988) with the design drift ``theta`` (the expected
    final z under the planned effect): ``Phi((z sqrt(t) + theta (1 - t) - c_K) / sqrt(1 - t))``.
    Intermediate looks are ignored, so it slightly understates the chance.
    """
    import numpy as np
    from scipy.stats import norm

    zz = np.asarray(z, float)
    if fraction >= 1.0:
        return np.asarray(zz >= final_boundary, float)
    rest = 1.0 - fraction
    arg = (zz * math.sqrt(fraction) + drift * rest - final_boundary) / math.sqrt(rest)
    return np.asarray(norm.cdf(arg), float)


def _conditional_power(plan: Plan, look_index: int, z: ArrayLike) -> NDArray[np.float64]:
    return conditional_power(z, plan.fractions[look_index], plan.boundaries[-1], plan.drift)


def classify(plan: Plan, look_index: int, z: ArrayLike) -> NDArray[np.int_]:
    """Recommendation codes (indices into :data:`RECOMMENDATIONS`) for z values at one look.

    Order of the rules: variant (``z >= c_k``), then control (``z <= -c_k``), then at
    the last look inconclusive, then the optional non-binding futility stop
    (conditional power < ``plan.futility``) as inconclusive, else continue.
    """
    import numpy as np

    zz = np.asarray(z, float)
    c = plan.boundaries[look_index]
    last = look_index == len(plan.looks) - 1
    codes = np.full(zz.shape, INCONCLUSIVE if last else CONTINUE, dtype=int)
    if not last and plan.futility is not None:
        cp = _conditional_power(plan, look_index, zz)
        codes = np.where(cp < plan.futility, INCONCLUSIVE, codes)
    codes = np.where(zz <= -c, CONTROL, codes)
    return np.where(zz >= c, VARIANT, codes)


@dataclass(frozen=True)
class LookResult:
    """The analysis at one planned look; ``look`` is 1-based (``look_index + 1``).

    ``effect`` is variant minus control pass rate. ``adjusted_interval`` is the
    repeated confidence interval ``effect +/- boundary * se`` (unpooled Wald SE),
    approximately valid jointly over all looks at level ``1 - alpha``. ``z`` is
    the score statistic against ``null_difference`` that drives ``recommendation``;
    ``conditional_power`` (under the planned effect) is ``None`` at the last look.
    """

    look: int
    control: ArmSummary
    variant: ArmSummary
    effect: float
    z: float
    boundary: float
    adjusted_interval: tuple[float, float]
    recommendation: Recommendation
    null_difference: float
    conditional_power: float | None
    reason: str

    def to_dict(self) -> dict[str, object]:
        """JSON-friendly form (nested dataclasses become dicts)."""
        return dataclasses.asdict(self)


def _wald_se(control: ArmStats, variant: ArmStats) -> float:
    p1, p2 = variant.successes / variant.runs, control.successes / control.runs
    return math.sqrt(p1 * (1.0 - p1) / variant.runs + p2 * (1.0 - p2) / control.runs)


def _verdicts(plan: Plan) -> tuple[str, str]:
    """What crossing the upper and the lower boundary means, in words."""
    if plan.margin is None:
        return "variant passes more often than control", "control passes more often than variant"
    m = f"{plan.margin:g}"
    return f"variant is no more than {m} worse than control", f"variant is more than {m} worse than control"


def _reason(plan: Plan, look: int, z: float, rec: Recommendation, cp: float | None) -> str:
    where = f"look {look} of {len(plan.looks)}"
    c = plan.boundaries[look - 1]
    upper, lower = _verdicts(plan)
    if rec == "variant":
        return f"{where}: z = {z:.2f} >= {c:.2f}; {upper}"
    if rec == "control":
        return f"{where}: z = {z:.2f} <= -{c:.2f}; {lower}"
    if rec == "inconclusive" and cp is not None:
        return f"{where}: conditional power {cp:.1%} < futility threshold {plan.futility:.1%}"
    if rec == "inconclusive":
        return f"{where} (final): |z| = {abs(z):.2f} < {c:.2f}; no boundary crossed"
    return f"{where}: |z| = {abs(z):.2f} < {c:.2f}; continue to look {look + 1}"


def analyze_look(plan: Plan, look_index: int, control: ArmStats, variant: ArmStats) -> LookResult:
    """Analyse planned look ``look_index`` (0-based) and recommend what to do.

    Each arm needs at least ``plan.looks[look_index]`` runs: fewer would test with
    less information than the boundary was spent for.
    """
    if not 0 <= look_index < len(plan.looks):
        raise ValueError(f"look_index must be in 0..{len(plan.looks) - 1}; got {look_index}")
    need = plan.looks[look_index]
    for name, arm in (("control", control), ("variant", variant)):
        if arm.runs < need:
            raise ValueError(f"look {look_index + 1} needs {need} runs per arm; {name} has {arm.runs}")
    d0 = plan.null_difference
    z = float(score_z(control.successes, control.runs, variant.successes, variant.runs, d0))
    code = int(classify(plan, look_index, z))
    last = look_index == len(plan.looks) - 1
    cp = None if last else float(_conditional_power(plan, look_index, z))
    effect = variant.successes / variant.runs - control.successes / control.runs
    half = plan.boundaries[look_index] * _wald_se(control, variant)
    rec = RECOMMENDATIONS[code]
    return LookResult(
        look=look_index + 1,
        control=control.summary(),
        variant=variant.summary(),
        effect=effect,
        z=z,
        boundary=plan.boundaries[look_index],
        adjusted_interval=(max(-1.0, effect - half), min(1.0, effect + half)),
        recommendation=rec,
        null_difference=d0,
        conditional_power=cp,
        reason=_reason(plan, look_index + 1, z, rec, cp),
    )


def _draw(draw: Callable[[int], list[bool]], n: int, arm: str) -> list[bool]:
    outcomes = [bool(passed) for passed in draw(n)]
    if len(outcomes) != n:
        raise ValueError(f"draw_{arm}({n}) returned {len(outcomes)} outcomes")
    return outcomes


def run_sequential(
    plan: Plan,
    draw_control: Callable[[int], list[bool]],
    draw_variant: Callable[[int], list[bool]],
    *,
    safety: SafetyMonitor | None = None,
) -> tuple[LookResult, int]:
    """Run the arms look by look until a look decides; returns ``(result, runs_per_arm_used)``.

    ``draw_*(n)`` must return the pass/fail outcomes of ``n`` new runs of that arm.
    Every variant outcome is fed to ``safety``; if it pauses, the comparison stops
    after that batch with recommendation ``"inconclusive"`` and the monitor's reason.
    """
    control, variant, done = ArmStats(0, 0), ArmStats(0, 0), 0
    for index, target in enumerate(plan.looks):
        c_out = _draw(draw_control, target - done, "control")
        v_out = _draw(draw_variant, target - done, "variant")
        control = ArmStats(control.runs + len(c_out), control.successes + sum(c_out))
        variant = ArmStats(variant.runs + len(v_out), variant.successes + sum(v_out))
        done = target
        result = analyze_look(plan, index, control, variant)
        if safety is not None:
            for passed in v_out:
                safety.observe(passed)
            if safety.paused:
                return _paused(result, safety), done
        if result.recommendation != "continue":
            return result, done
    raise AssertionError("the last look always decides")  # pragma: no cover


def _paused(result: LookResult, safety: SafetyMonitor) -> LookResult:
    return dataclasses.replace(result, recommendation="inconclusive", reason=f"safety pause: {safety.reason}")
