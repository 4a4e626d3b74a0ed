"""Unit and simulation tests for the A/B statistics library (``pytest_connic.ab``)."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.stats import binomtest, chi2_contingency, norm

from pytest_connic.ab import (
    ArmStats,
    SafetyMonitor,
    analyze_look,
    conditional_power,
    exploratory_summary,
    fixed_sample_size,
    inflation_factor,
    make_plan,
    mcnemar,
    newcombe_interval,
    obf_boundaries,
    obf_spending,
    restricted_variant_rate,
    run_sequential,
    score_z,
    sign_test,
    simulate,
    two_proportion_test,
    wilson_interval,
)
from pytest_connic.ab.simulate import decide

QUARTERS = (0.25, 0.5, 0.75, 1.0)
#: Lan–DeMets OBF-type spending, K = 4 equally spaced, two-sided alpha = 0.05
#: (Jennison & Turnbull 2000; gsDesign ``sfLDOF``; ldbounds). The classical
#: O'Brien–Fleming constants (4.049, 2.863, 2.337, 2.024) are a different design.
LAN_DEMETS_OBF_K4 = (4.3326, 2.9631, 2.3590, 2.0141)


def mc_se(p: float, n: int) -> float:
    return math.sqrt(p * (1.0 - p) / n)


# --- Wilson and Newcombe intervals -------------------------------------------------


@pytest.mark.parametrize(
    ("successes", "n", "expected"),
    [  # Newcombe (1998), Statistics in Medicine 17:857, Table I, method 3
        (81, 263, (0.2553, 0.3662)),
        (15, 148, (0.0624, 0.1605)),
        (0, 20, (0.0, 0.1611)),
        (1, 29, (0.0061, 0.1718)),
    ],
)
def test_wilson_matches_published_values(successes: int, n: int, expected: tuple[float, float]) -> None:
    assert wilson_interval(successes, n) == pytest.approx(expected, abs=5e-5)


@pytest.mark.parametrize(("successes", "n"), [(0, 5), (3, 7), (7, 7), (512, 1000), (999, 1000)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_matches_scipy(successes: int, n: int, confidence: float) -> None:
    ci = binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    assert wilson_interval(successes, n, confidence) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_wilson_edges_and_errors() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(10, 10)[1] == 1.0
    with pytest.raises(ValueError, match="successes <= n"):
        wilson_interval(5, 4)
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(1, 4, confidence=1.0)


@pytest.mark.parametrize(
    ("variant", "control", "expected"),
    [  # Newcombe (1998), Statistics in Medicine 17:873, Table II, method 10
        ((56, 70), (48, 80), (0.0524, 0.3339)),
        ((9, 10), (3, 10), (0.1705, 0.8090)),
        ((5, 56), (0, 29), (-0.0381, 0.1926)),
        ((10, 10), (0, 20), (0.6791, 1.0)),
        ((10, 10), (0, 10), (0.6075, 1.0)),
    ],
)
def test_newcombe_difference_interval(
    variant: tuple[int, int], control: tuple[int, int], expected: tuple[float, float]
) -> None:
    v, c = ArmStats(runs=variant[1], successes=variant[0]), ArmStats(runs=control[1], successes=control[0])
    assert newcombe_interval(c, v) == pytest.approx(expected, abs=5e-5)


# --- ArmStats ------------------------------------------------------------------------


def test_arm_descriptives_match_numpy() -> None:
    latencies = [120.0, 80.0, 300.0, 95.5, 101.0, 250.0, 99.0]
    arm = ArmStats(runs=7, successes=5, latencies_ms=latencies, tokens=[10, 20, 30], costs=[0.1, 0.3])
    assert arm.pass_rate == pytest.approx(5 / 7)
    assert arm.wilson == wilson_interval(5, 7)
    assert arm.mean_latency_ms == pytest.approx(np.mean(latencies))
    assert arm.p50_latency_ms == pytest.approx(np.percentile(latencies, 50))
    assert arm.p95_latency_ms == pytest.approx(np.percentile(latencies, 95))
    assert (arm.mean_tokens, arm.mean_cost) == pytest.approx((20.0, 0.2))
    assert arm.summary().p95_latency_ms == arm.p95_latency_ms


def test_arm_without_data() -> None:
    arm = ArmStats(runs=0, successes=0)
    summary = arm.summary()
    assert (summary.pass_rate, summary.mean_latency_ms, summary.p95_latency_ms, summary.mean_cost) == (
        None,
        None,
        None,
        None,
    )
    assert ArmStats(runs=1, successes=1, latencies_ms=[42.0]).p95_latency_ms == 42.0


def test_arm_validation_and_from_outcomes() -> None:
    with pytest.raises(ValueError, match="successes <= runs"):
        ArmStats(runs=3, successes=4)
    with pytest.raises(TypeError):
        ArmStats(runs=3.5, successes=1)  # type: ignore[arg-type]
    arm = ArmStats.from_outcomes(np.array([True, False, True]))
    assert (arm.runs, arm.successes, type(arm.successes)) == (3, 2, int)


# --- the score statistic -------------------------------------------------------------


def _numeric_restricted_rate(xv: int, nv: int, xc: int, nc: int, d0: float) -> float:
    def nll(r: float) -> float:
        rc, tiny = r - d0, 1e-300
        return -(
            xv * math.log(max(r, tiny))
            + (nv - xv) * math.log(max(1 - r, tiny))
            + xc * math.log(max(rc, tiny))
            + (nc - xc) * math.log(max(1 - rc, tiny))
        )

    return float(minimize_scalar(nll, bounds=(max(0, d0), min(1, 1 + d0)), method="bounded").x)


@pytest.mark.parametrize(
    ("xv", "nv", "xc", "nc", "d0"),
    [
        (45, 50, 47, 50, -0.05),
        (50, 50, 50, 50, -0.05),
        (0, 30, 3, 40, -0.1),
        (17, 20, 9, 30, 0.1),
        (60, 100, 70, 80, -0.2),
    ],
)
def test_restricted_rate_is_the_constrained_mle(xv: int, nv: int, xc: int, nc: int, d0: float) -> None:
    closed = float(restricted_variant_rate(np.asarray(xv / nv), np.asarray(xc / nc), np.asarray(nc / nv), d0))
    assert closed == pytest.approx(_numeric_restricted_rate(xv, nv, xc, nc, d0), abs=1e-5)


def test_score_z_is_finite_when_every_run_passes() -> None:
    assert float(score_z(50, 50, 50, 50)) == 0.0
    z = float(score_z(50, 50, 50, 50, -0.05))
    assert 0.0 < z < 10.0  # a Wald statistic would be infinite here


# --- unpaired and paired tests -------------------------------------------------------


@pytest.mark.parametrize(
    ("xc", "nc", "xv", "nv"), [(50, 100, 60, 100), (12, 40, 25, 45), (190, 200, 170, 210)]
)
def test_two_proportion_test_equals_uncorrected_chi_square(xc: int, nc: int, xv: int, nv: int) -> None:
    table = [[xc, nc - xc], [xv, nv - xv]]
    expected = chi2_contingency(table, correction=False).pvalue
    assert two_proportion_test(ArmStats(nc, xc), ArmStats(nv, xv)) == pytest.approx(expected, rel=1e-10)


def test_two_proportion_test_hand_value() -> None:
    z = 0.1 / math.sqrt(0.55 * 0.45 * 2 / 100)
    assert two_proportion_test(ArmStats(100, 50), ArmStats(100, 60)) == pytest.approx(2 * norm.sf(z))
    assert two_proportion_test(ArmStats(100, 50), ArmStats(100, 60)) == pytest.approx(0.1552, abs=1e-4)


def test_mcnemar_exact_hand_value() -> None:
    # 1 pair only the control passed, 9 only the variant: p = 2 * (1 + 10) / 2**10.
    pairs = [(True, False)] + [(False, True)] * 9 + [(True, True)] * 30 + [(False, False)] * 5
    statistic, p_value = mcnemar(pairs)
    assert statistic == 1.0
    assert p_value == pytest.approx(22 / 1024)


def test_mcnemar_without_discordant_pairs_is_one() -> None:
    assert tuple(mcnemar([(True, True), (False, False)])) == (0.0, 1.0)


def test_sign_test_hand_value_drops_ties() -> None:
    control = [0.5, 0.6, 0.7, 0.8, 0.2, 0.4, 0.9]
    variant = [0.7, 0.9, 0.8, 1.0, 0.3, 0.6, 0.9]  # 6 improvements, 1 tie
    assert sign_test(control, variant) == pytest.approx(2 / 2**6)
    assert sign_test(variant, control) == pytest.approx(2 / 2**6)
    assert sign_test([0.5, 0.5], [0.5, 0.5]) == 1.0
    with pytest.raises(ValueError, match="one rate per case"):
        sign_test([0.5], [0.5, 0.6])


def test_sign_test_matches_scipy_binomtest() -> None:
    control = [0.2, 0.4, 0.4, 0.6, 0.8, 1.0, 0.0, 0.5, 0.5, 0.3]
    variant = [0.4, 0.2, 0.6, 0.8, 0.8, 0.8, 0.2, 0.7, 0.9, 0.6]
    assert sign_test(control, variant) == pytest.approx(binomtest(7, 9, 0.5).pvalue)


def test_exploratory_summary_flags_insufficient_runs() -> None:
    control = ArmStats(30, 21, latencies_ms=[100.0, 200.0], costs=[0.01, 0.03])
    variant = ArmStats(12, 10, latencies_ms=[90.0, 150.0], costs=[0.02, 0.02])
    summary = exploratory_summary(control, variant, min_runs=20)
    assert summary["insufficient_runs"] is True
    assert summary["difference"]["pass_rate"] == pytest.approx(10 / 12 - 21 / 30)
    assert summary["difference"]["mean_latency_ms"] == pytest.approx(-30.0)
    assert summary["difference"]["pass_rate_interval_95"] == newcombe_interval(control, variant)
    assert summary["variant"]["runs"] == 12
    assert exploratory_summary(control, variant, min_runs=12)["insufficient_runs"] is False


# --- the plan: spending, boundaries, sample size ------------------------------------


def test_spending_function_spends_alpha_by_the_end() -> None:
    assert obf_spending(1.0, 0.025) == pytest.approx(0.025)
    assert obf_spending(0.0, 0.025) == 0.0
    spent = [obf_spending(t, 0.025) for t in QUARTERS]
    assert spent == sorted(spent)


def test_two_sided_boundaries_match_lan_demets_table() -> None:
    assert obf_boundaries(QUARTERS, 0.05, 2) == pytest.approx(LAN_DEMETS_OBF_K4, abs=2e-4)


def test_one_sided_boundaries_for_non_inferiority() -> None:
    # One-sided 0.025 spends the same per side; the only difference is the
    # negligible chance of crossing both sides, so the values agree closely.
    one_sided = obf_boundaries(QUARTERS, 0.025, 1)
    assert one_sided == pytest.approx(LAN_DEMETS_OBF_K4, abs=5e-4)
    assert make_plan(0.9, objective="non_inferiority", margin=0.05).boundaries == list(one_sided)


def test_boundaries_and_drift_by_independent_monte_carlo() -> None:
    """Brownian-motion check of the multivariate-normal integration, with 400k paths."""
    bounds = np.asarray(obf_boundaries(QUARTERS, 0.05, 2))
    rng = np.random.default_rng(7)
    increments = rng.standard_normal((400_000, 4)) * math.sqrt(0.25)
    z = np.cumsum(increments, axis=1) / np.sqrt(QUARTERS)
    assert (np.abs(z) >= bounds).any(axis=1).mean() == pytest.approx(0.05, abs=3 * mc_se(0.05, 400_000))
    drift = math.sqrt(inflation_factor(QUARTERS, 0.05, 0.8, 2)) * (norm.isf(0.025) + norm.isf(0.2))
    shifted = z + drift * np.sqrt(QUARTERS)
    assert (shifted >= bounds).any(axis=1).mean() == pytest.approx(0.8, abs=3 * mc_se(0.8, 400_000))


def test_inflation_factor_for_four_obf_looks() -> None:
    r = inflation_factor(QUARTERS, 0.05, 0.8, 2)
    assert 1.015 <= r <= 1.03  # 1.0196: four OBF looks cost about 2% more runs
    assert inflation_factor((1.0,), 0.05, 0.8, 2) == pytest.approx(1.0, abs=1e-6)


def test_fixed_sample_size_matches_classical_formula() -> None:
    p1, p2, za, zb = 0.5, 0.6, norm.isf(0.025), norm.isf(0.2)
    classical = (za * math.sqrt(2 * 0.55 * 0.45) + zb * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))) ** 2 / 0.01
    assert fixed_sample_size(0.5, 0.1, alpha=0.05, power=0.8) == pytest.approx(classical)
    assert math.ceil(classical) == 388  # textbook value for 50% vs 60%


def test_make_plan_superiority() -> None:
    plan = make_plan(0.5, 0.1)
    assert plan.fixed_runs_per_arm == 388
    assert plan.runs_per_arm >= plan.fixed_runs_per_arm
    assert plan.runs_per_arm == math.ceil(fixed_sample_size(0.5, 0.1, alpha=0.05, power=0.8) * plan.inflation)
    assert plan.runs_per_arm / 387.34 == pytest.approx(plan.inflation, abs=0.003)
    assert plan.looks == [99, 198, 297, 395]
    assert plan.boundaries == pytest.approx(LAN_DEMETS_OBF_K4, abs=2e-4)
    assert (plan.sides, plan.null_difference, plan.total_runs) == (2, 0.0, 790)


def test_make_plan_non_inferiority_defaults_to_no_true_difference() -> None:
    plan = make_plan(0.9, objective="non_inferiority", margin=0.05)
    assert (plan.mde, plan.sides, plan.null_difference) == (0.0, 1, -0.05)
    blackwelder = (norm.isf(0.025) + norm.isf(0.2)) ** 2 * 2 * 0.9 * 0.1 / 0.05**2
    assert plan.fixed_runs_per_arm >= math.ceil(blackwelder)  # score variance under H0 is larger
    assert plan.looks[-1] == plan.runs_per_arm


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"baseline": 0.5}, "mde is required"),
        ({"baseline": 1.2, "mde": 0.1}, "baseline"),
        ({"baseline": 0.95, "mde": 0.1}, "must not exceed 1"),
        ({"baseline": 0.5, "mde": -0.1}, "mde must be > 0"),
        ({"baseline": 0.5, "mde": 0.1, "margin": 0.05}, "margin applies"),
        ({"baseline": 0.9, "objective": "non_inferiority"}, "margin"),
        ({"baseline": 0.5, "mde": 0.1, "objective": "equivalence"}, "objective"),
        ({"baseline": 0.5, "mde": 0.1, "looks": 9}, "looks"),
        ({"baseline": 0.5, "mde": 0.1, "alpha": 0.7}, "alpha"),
        ({"baseline": 0.5, "mde": 0.1, "futility": 1.5}, "futility"),
    ],
)
def test_make_plan_rejects_bad_inputs(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_plan(**kwargs)  # type: ignore[arg-type]


# --- looks and recommendations -------------------------------------------------------


def test_analyze_look_recommends_variant_with_adjusted_interval() -> None:
    plan = make_plan(0.5, 0.1)
    result = analyze_look(plan, 1, ArmStats(198, 99), ArmStats(198, 130))
    se = math.sqrt(0.5 * 0.5 / 198 + (130 / 198) * (68 / 198) / 198)
    assert result.look == 2
    assert result.recommendation == "variant"
    assert result.z == pytest.approx(float(score_z(99, 198, 130, 198)))
    half = result.boundary * se
    assert result.adjusted_interval == pytest.approx((result.effect - half, result.effect + half))
    assert result.adjusted_interval[0] > 0.0
    assert result.reason == "look 2 of 4: z = 3.15 >= 2.96; variant passes more often than control"
    assert result.to_dict()["variant"]["successes"] == 130


@pytest.mark.parametrize(
    ("look_index", "control", "variant", "expected"),
    [
        (0, 50, 78, "continue"),  # z = 4.16 misses 4.33 at the first look
        (0, 50, 85, "variant"),
        (0, 80, 45, "control"),
        (2, 150, 160, "continue"),
        (3, 200, 215, "inconclusive"),
        (3, 200, 230, "variant"),
    ],
)
def test_superiority_recommendations(look_index: int, control: int, variant: int, expected: str) -> None:
    plan = make_plan(0.5, 0.1)
    n = plan.looks[look_index]
    result = analyze_look(plan, look_index, ArmStats(n, control), ArmStats(n, variant))
    assert result.recommendation == expected


@pytest.mark.parametrize(
    ("look_index", "control", "variant", "expected"),
    [
        (3, 534, 534, "variant"),  # equal pass rates at the end: lower bound above -margin
        (1, 267, 220, "control"),  # variant clearly worse than the margin allows
        (1, 267, 250, "continue"),
        (3, 534, 520, "inconclusive"),
    ],
)
def test_non_inferiority_recommendations(look_index: int, control: int, variant: int, expected: str) -> None:
    plan = make_plan(0.9, objective="non_inferiority", margin=0.05)
    n = plan.looks[look_index]
    result = analyze_look(plan, look_index, ArmStats(n, control), ArmStats(n, variant))
    assert result.recommendation == expected
    low, high = result.adjusted_interval
    assert (low > -0.05) == (expected == "variant")
    assert (high < -0.05) == (expected == "control")
    if expected == "control":
        assert result.reason.endswith("z = -3.49 <= -2.96; variant is more than 0.05 worse than control")


def test_analyze_look_needs_the_planned_runs() -> None:
    plan = make_plan(0.5, 0.1)
    with pytest.raises(ValueError, match="look 2 needs 198 runs per arm; variant has 150"):
        analyze_look(plan, 1, ArmStats(198, 99), ArmStats(150, 80))
    with pytest.raises(ValueError, match="look_index"):
        analyze_look(plan, 4, ArmStats(395, 99), ArmStats(395, 80))


def test_conditional_power_hand_value() -> None:
    # A trend that lands exactly on the final boundary gives one half.
    assert float(conditional_power(1.0, 0.5, 2.0, 2.0 * (2.0 - math.sqrt(0.5)))) == pytest.approx(0.5)
    expected = norm.cdf((0.5 * 0.5 + 2.8 * 0.75 - 2.0) / math.sqrt(0.75))
    assert float(conditional_power(0.5, 0.25, 2.0, 2.8)) == pytest.approx(expected)
    assert float(conditional_power(2.1, 1.0, 2.0, 2.8)) == 1.0


def test_futility_stops_early_as_inconclusive() -> None:
    plan = make_plan(0.5, 0.1, futility=0.1)
    assert plan.drift == pytest.approx(2.829, abs=2e-3)
    result = analyze_look(plan, 1, ArmStats(198, 110), ArmStats(198, 100))
    assert result.recommendation == "inconclusive"
    assert result.conditional_power is not None and result.conditional_power < 0.1
    assert "futility threshold 10.0%" in result.reason
    kept = analyze_look(plan, 1, ArmStats(198, 100), ArmStats(198, 105))
    assert kept.recommendation == "continue" and kept.conditional_power is not None


# --- run_sequential and the safety monitor ------------------------------------------


def _replay(outcomes: np.ndarray) -> Callable[[int], list[bool]]:
    """A draw function that hands out ``outcomes`` in order."""
    position = 0

    def draw(n: int) -> list[bool]:
        nonlocal position
        position += n
        return list(outcomes[position - n : position])

    return draw


def test_run_sequential_agrees_with_vectorised_simulation() -> None:
    plan = make_plan(0.8, 0.1)
    rng = np.random.default_rng(3)
    control = rng.random((150, plan.runs_per_arm)) < 0.8
    variant = rng.random((150, plan.runs_per_arm)) < 0.87
    at_looks = np.asarray(plan.looks) - 1
    sim = decide(plan, np.cumsum(control, axis=1)[:, at_looks], np.cumsum(variant, axis=1)[:, at_looks])
    labels = ("continue", "variant", "control", "inconclusive")
    for i in range(150):
        result, runs = run_sequential(plan, _replay(control[i]), _replay(variant[i]))
        assert (result.recommendation, runs) == (labels[sim.codes[i]], sim.runs_per_arm[i])
    assert len({int(code) for code in sim.codes}) >= 2  # the replay covers more than one outcome


def test_run_sequential_checks_batch_sizes() -> None:
    plan = make_plan(0.8, 0.1)
    with pytest.raises(ValueError, match=r"draw_variant\(51\) returned 3 outcomes"):
        run_sequential(plan, lambda n: [True] * n, lambda n: [True] * 3)


def test_run_sequential_pauses_on_safety_breach() -> None:
    plan = make_plan(0.5, 0.1)
    monitor = SafetyMonitor(window=20, max_failure_rate=0.5)
    result, runs = run_sequential(plan, lambda n: [True] * n, lambda n: [False] * n, safety=monitor)
    assert (result.recommendation, runs, monitor.paused) == ("inconclusive", plan.looks[0], True)
    assert result.reason.startswith("safety pause: variant failed 20 of its last 20")


def test_safety_monitor_needs_a_complete_window() -> None:
    monitor = SafetyMonitor(window=5, max_failure_rate=0.5)
    for _ in range(4):
        monitor.observe(False)
    assert (monitor.paused, monitor.failure_rate, monitor.reason) == (False, None, None)
    monitor.observe(False)
    assert monitor.paused and monitor.reason is not None and "5 of its last 5" in monitor.reason


def test_safety_monitor_threshold_is_strict_and_rolling() -> None:
    monitor = SafetyMonitor(window=4, max_failure_rate=0.5)
    for passed in [False, False, True, True, True, False, False]:  # never 3 failures in 4
        monitor.observe(passed)
    assert not monitor.paused and monitor.failure_rate == 0.5
    monitor.observe(False)  # last four: True, False, False, False
    assert monitor.paused
    for _ in range(10):
        monitor.observe(True)
    assert monitor.paused  # a safety pause is final


def test_safety_monitor_validation() -> None:
    with pytest.raises(ValueError, match="window"):
        SafetyMonitor(window=0)
    with pytest.raises(ValueError, match="max_failure_rate"):
        SafetyMonitor(max_failure_rate=1.0)


# --- operating characteristics by simulation ----------------------------------------

N_AA = 20_000
N_POWER = 10_000


@pytest.mark.parametrize(("baseline", "mde"), [(0.5, 0.1), (0.8, 0.1), (0.9, 0.05), (0.95, 0.04)])
def test_aa_experiments_rarely_pick_a_winner(baseline: float, mde: float) -> None:
    plan = make_plan(baseline, mde)
    sim = simulate(plan, baseline, baseline, N_AA, seed=20_001)
    winners = sim.rate("variant") + sim.rate("control")
    assert winners <= plan.alpha + 3 * mc_se(plan.alpha, N_AA)
    assert sim.rate("continue") == 0.0


@pytest.mark.parametrize(("baseline", "mde"), [(0.5, 0.1), (0.8, 0.1), (0.9, 0.05)])
def test_planned_effect_is_found_with_planned_power(baseline: float, mde: float) -> None:
    plan = make_plan(baseline, mde)
    sim = simulate(plan, baseline, baseline + mde, N_POWER, seed=20_002)
    assert sim.rate("variant") >= plan.power - 3 * mc_se(plan.power, N_POWER)
    assert sim.rate("control") == 0.0
    assert sim.mean_runs_per_arm < plan.runs_per_arm  # early stopping pays for the inflation


def test_better_control_is_found_with_planned_power() -> None:
    plan = make_plan(0.5, 0.1)  # symmetric around 0.55, so the mirrored design has the same power
    sim = simulate(plan, 0.6, 0.5, N_POWER, seed=20_003)
    assert sim.rate("control") >= plan.power - 3 * mc_se(plan.power, N_POWER)


@pytest.mark.parametrize(("baseline", "margin"), [(0.9, 0.05), (0.8, 0.1)])
def test_non_inferiority_error_rates(baseline: float, margin: float) -> None:
    plan = make_plan(baseline, objective="non_inferiority", margin=margin)
    at_margin = simulate(plan, baseline, baseline - margin, N_AA, seed=20_004)
    one_sided = plan.alpha / 2
    assert at_margin.rate("variant") <= one_sided + 3 * mc_se(one_sided, N_AA)
    equal = simulate(plan, baseline, baseline, N_POWER, seed=20_005)
    assert equal.rate("variant") >= plan.power - 3 * mc_se(plan.power, N_POWER)


def test_futility_keeps_error_rates_and_saves_runs() -> None:
    plain, futile = make_plan(0.5, 0.1), make_plan(0.5, 0.1, futility=0.1)
    null = simulate(futile, 0.5, 0.5, N_AA, seed=20_006)
    assert null.rate("variant") + null.rate("control") <= plain.alpha + 3 * mc_se(plain.alpha, N_AA)
    assert null.mean_runs_per_arm < 0.8 * simulate(plain, 0.5, 0.5, N_AA, seed=20_006).mean_runs_per_arm
    # Non-binding curtailment at conditional power f costs at most beta / (1 - f) type II error.
    effect = simulate(futile, 0.5, 0.6, N_POWER, seed=20_007)
    bound = 1 - (1 - plain.power) / (1 - 0.1)
    assert effect.rate("variant") >= bound - 3 * mc_se(bound, N_POWER)


# --- import hygiene -------------------------------------------------------------------


def test_importing_the_package_loads_neither_scipy_nor_numpy() -> None:
    code = "import sys, pytest_connic.ab; print('scipy' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
