"""Statistics for comparing a control agent and a variant on pass/fail runs.

Importing this package imports neither NumPy nor SciPy (the ``stats`` extra);
they load on the first call that needs them. See ``docs/ab-testing.md``.
"""

from __future__ import annotations

from pytest_connic.ab.arms import ArmStats, ArmSummary, newcombe_interval, wilson_interval
from pytest_connic.ab.boundaries import inflation_factor, obf_boundaries, obf_spending
from pytest_connic.ab.plan import Objective, Plan, fixed_sample_size, make_plan
from pytest_connic.ab.safety import SafetyMonitor
from pytest_connic.ab.score import restricted_variant_rate, score_z
from pytest_connic.ab.sequential import (
    LookResult,
    Recommendation,
    analyze_look,
    conditional_power,
    run_sequential,
)
from pytest_connic.ab.simulate import Simulation, simulate
from pytest_connic.ab.stats import (
    McNemarResult,
    exploratory_summary,
    mcnemar,
    sign_test,
    two_proportion_test,
)

__all__ = [
    "ArmStats",
    "ArmSummary",
    "LookResult",
    "McNemarResult",
    "Objective",
    "Plan",
    "Recommendation",
    "SafetyMonitor",
    "Simulation",
    "analyze_look",
    "conditional_power",
    "exploratory_summary",
    "fixed_sample_size",
    "inflation_factor",
    "make_plan",
    "mcnemar",
    "newcombe_interval",
    "obf_boundaries",
    "obf_spending",
    "restricted_variant_rate",
    "run_sequential",
    "score_z",
    "sign_test",
    "simulate",
    "two_proportion_test",
    "wilson_interval",
]
