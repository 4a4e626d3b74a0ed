"""The resolved A/B settings of a session and its Confidence-mode plan (no pytest here)."""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

from pytest_connic.ab.plan import Plan, make_plan
from pytest_connic.errors import ConnicError


class ABOptionsError(ConnicError, ValueError):
    """A combination of A/B settings that makes no plan (the message names the settings)."""


@dataclass(frozen=True)
class ABOptions:
    """What ``--connic-ab*`` asked for; rates are fractions here (the options take percent)."""

    variant: str
    mode: str = "exploratory"  #: exploratory | confidence
    min_runs: int = 10
    baseline: float = 0.9
    mde: float | None = None  #: None: 0.10 for superiority, 0 for non-inferiority
    margin: float | None = None  #: set: the objective is non-inferiority
    alpha: float = 0.05
    power: float = 0.8
    futility: float | None = None
    safety_window: int = 10
    safety_max_failure_rate: float = 0.5

    @property
    def confidence(self) -> bool:
        return self.mode == "confidence"

    @property
    def objective(self) -> str:
        return "superiority" if self.margin is None else "non_inferiority"

    def plan(self) -> Plan | None:
        """The locked Confidence-mode plan (the same in every process), None in Exploratory mode."""
        if not self.confidence:
            return None
        mde = self.mde if self.mde is not None else (0.10 if self.margin is None else 0.0)
        return _plan(self.baseline, mde, self.alpha, self.power, self.margin, self.futility)

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["objective"] = self.objective
        return data


@functools.lru_cache(maxsize=16)
def _plan(baseline: float, mde: float, alpha: float, power: float, margin: float | None,
          futility: float | None) -> Plan:
    objective = "superiority" if margin is None else "non_inferiority"
    try:
        return make_plan(baseline, mde, alpha=alpha, power=power, objective=objective,  # type: ignore[arg-type]
                         margin=margin, futility=futility)
    except ValueError as exc:
        raise ABOptionsError(str(exc)) from None


def plan_dict(plan: Plan) -> dict[str, object]:
    """The plan as the reports show it."""
    return {
        "objective": plan.objective,
        "baseline": plan.baseline,
        "mde": plan.mde,
        "margin": plan.margin,
        "alpha": plan.alpha,
        "confidence": 1.0 - plan.alpha,
        "power": plan.power,
        "futility": plan.futility,
        "fixed_runs_per_arm": plan.fixed_runs_per_arm,
        "inflation": plan.inflation,
        "runs_per_arm": plan.runs_per_arm,
        "looks": list(plan.looks),
        "fractions": list(plan.fractions),
        "boundaries": list(plan.boundaries),
    }
