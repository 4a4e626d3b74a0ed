"""The A/B section of the reports, from the per-case results of ``experiment.py``.

Runs on the controller (or the only process), after every case's comparison has
arrived: per case the arms' descriptive metrics and the looks, per comparison
(base agent vs variant) the pooled arms, the unpaired test, the paired tests
across cases, the safety state and, in Confidence mode, the overall recommendation.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pytest_connic.ab.arms import ArmStats
from pytest_connic.ab.options import ABOptions, plan_dict
from pytest_connic.ab.plan import Plan
from pytest_connic.ab.stats import exploratory_summary, mcnemar, sign_test, two_proportion_test

#: the latency keys of the section: the only numbers that differ between two identical runs
LATENCY_KEYS = ("mean_latency_ms", "p50_latency_ms", "p95_latency_ms")


def arm_stats(observations: Iterable[dict[str, Any]]) -> ArmStats:
    """An ``ArmStats`` with the metrics of every run."""
    obs = list(observations)
    return ArmStats(
        runs=len(obs),
        successes=sum(1 for o in obs if o["passed"]),
        latencies_ms=[float(o["duration_ms"]) for o in obs],
        tokens=[int(o["tokens"]) for o in obs],
        costs=[float(o["cost"]) for o in obs],
    )


def describe(control: ArmStats, variant: ArmStats, min_runs: int) -> dict[str, Any]:
    """Both arms and the differences (variant − control), the p50 latency difference added."""
    summary = exploratory_summary(control, variant, min_runs)
    c, v = summary["control"], summary["variant"]
    diff = summary["difference"]
    p50 = None if c["p50_latency_ms"] is None or v["p50_latency_ms"] is None else (
        v["p50_latency_ms"] - c["p50_latency_ms"])
    summary["difference"] = {**diff, "p50_latency_ms": p50}
    return summary


def _case(entry: dict[str, Any], min_runs: int) -> dict[str, Any]:
    out = {k: entry[k] for k in ("nodeid", "suite", "line", "test_name", "error")}
    if entry["error"] is None:
        out.update(describe(arm_stats(entry["runs"]["control"]), arm_stats(entry["runs"]["variant"]), min_runs))
    out.update({k: entry[k] for k in ("looks", "recommendation", "reason", "paused", "pause_reason", "notes")})
    return out


def _pairs(entries: list[dict[str, Any]]) -> list[tuple[bool, bool]]:
    """(control, variant) outcomes of the same run index of the same case."""
    pairs = []
    for entry in entries:
        variant = {o["index"]: o["passed"] for o in entry["runs"]["variant"]}
        pairs += [(o["passed"], variant[o["index"]]) for o in entry["runs"]["control"] if o["index"] in variant]
    return pairs


def paired(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The sign test on per-case pass rates and McNemar's test on paired runs."""
    rates: list[tuple[float, float]] = []
    for entry in entries:
        c, v = arm_stats(entry["runs"]["control"]).pass_rate, arm_stats(entry["runs"]["variant"]).pass_rate
        if c is not None and v is not None:
            rates.append((c, v))
    pairs = _pairs(entries)
    result = mcnemar(pairs)
    return {
        "sign_test": {
            "cases": len(rates),
            "variant_better": sum(1 for c, v in rates if v > c),
            "control_better": sum(1 for c, v in rates if v < c),
            "ties": sum(1 for c, v in rates if v == c),
            "p_value": sign_test([c for c, _ in rates], [v for _, v in rates]),
        },
        "mcnemar": {
            "pairs": len(pairs),
            "control_only": sum(1 for c, v in pairs if c and not v),
            "variant_only": sum(1 for c, v in pairs if v and not c),
            "statistic": result.statistic,
            "p_value": result.p_value,
        },
    }


def overall_recommendation(plan: Plan, cases: list[dict[str, Any]]) -> tuple[str, str]:
    """The comparison's recommendation from its cases' final looks, family-wise at ``alpha``.

    A case counts for a side only if its z also crosses the boundary of the plan
    spent at ``alpha / m`` (Bonferroni over the ``m`` compared cases) at the look
    where it stopped. Control wins if a case counts for control; for superiority,
    the variant wins if a case counts for it and none for control; for
    non-inferiority, only if every case recommends the variant (an intersection-union
    test: no adjustment needed). A safety pause stops the comparison without a winner.
    """
    paused = [c for c in cases if c["paused"]]
    if paused:
        names = ", ".join(c["test_name"] for c in paused)
        return "inconclusive", f"safety pause on {len(paused)} case(s) ({names}): {paused[0]['pause_reason']}"
    decided = [c for c in cases if c["looks"]]
    if not decided:
        return "inconclusive", "no case was compared"
    strict = _strict_boundaries(plan, len(decided))
    m = len(decided)
    adjusted = f"the boundary adjusted for {m} cases (Bonferroni)" if m > 1 else "the plan's boundary"
    for_control = [c for c in decided if c["looks"][-1]["z"] <= -strict[c["looks"][-1]["look"] - 1]]
    for_variant = [c for c in decided if c["looks"][-1]["z"] >= strict[c["looks"][-1]["look"] - 1]]
    if for_control:
        return "control", (f"{_names(for_control)} favour control beyond {adjusted} "
                           f"({_zs(for_control, strict)})")
    if plan.objective == "non_inferiority":
        if all(c["recommendation"] == "variant" for c in decided):
            return "variant", f"all {m} case(s): variant is no more than {plan.margin:g} worse than control"
        shown = sum(c["recommendation"] == "variant" for c in decided)
        return "inconclusive", f"{shown} of {m} case(s) show non-inferiority; all must"
    if for_variant:
        return "variant", f"{_names(for_variant)} favour the variant beyond {adjusted} ({_zs(for_variant, strict)})"
    return "inconclusive", f"no case crossed {adjusted}"


def _strict_boundaries(plan: Plan, cases: int) -> tuple[float, ...]:
    if cases <= 1:
        return tuple(plan.boundaries)
    from pytest_connic.ab.boundaries import obf_boundaries

    level = plan.alpha if plan.sides == 2 else plan.alpha / 2.0
    return obf_boundaries(plan.fractions, level / cases, plan.sides)


def _names(cases: list[dict[str, Any]]) -> str:
    return f"{len(cases)} case(s) (" + ", ".join(c["test_name"] for c in cases) + ")"


def _zs(cases: list[dict[str, Any]], strict: tuple[float, ...]) -> str:
    parts = []
    for c in cases:
        look = c["looks"][-1]
        parts.append(f"{c['test_name']}: z = {look['z']:.2f} at look {look['look']}, "
                     f"boundary {strict[look['look'] - 1]:.2f}")
    return "; ".join(parts)


def comparison(base: str, variant: str, entries: list[dict[str, Any]], options: ABOptions) -> dict[str, Any]:
    """One base agent against one variant: every case, then the whole."""
    plan = options.plan()
    min_runs = plan.looks[0] if plan is not None else options.min_runs
    cases = [_case(e, min_runs) for e in entries]
    good = [e for e in entries if e["error"] is None and e["runs"]["control"] and e["runs"]["variant"]]
    overall: dict[str, Any] = {"cases": len(entries), "compared": len(good), "errors": len(entries) - len(good)}
    if good:
        control = arm_stats(o for e in good for o in e["runs"]["control"])
        var = arm_stats(o for e in good for o in e["runs"]["variant"])
        overall.update(describe(control, var, min_runs))
        overall["unpaired"] = {"test": "two_proportion_z", "p_value": two_proportion_test(control, var)}
        overall["paired"] = paired(good)
    paused = [c for c in cases if c["paused"]]
    overall["paused"] = bool(paused)
    overall["paused_cases"] = [c["nodeid"] for c in paused]
    rec, reason = overall_recommendation(plan, cases) if plan is not None else (None, None)
    overall["recommendation"], overall["reason"] = rec, reason
    return {"base": base, "variant": variant, "cases": cases, "overall": overall}


def build_section(entries: Iterable[dict[str, Any]], options: ABOptions) -> dict[str, Any]:
    """The ``ab`` section of the JSON report."""
    ordered = sorted(entries, key=lambda e: (e["base"], e["variant"], e["suite"], e["line"], e["nodeid"]))
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for entry in ordered:
        groups.setdefault((entry["base"], entry["variant"]), []).append(entry)
    plan = options.plan()
    settings = options.to_dict()
    settings.pop("variant")
    return {
        "variant": options.variant,
        "mode": options.mode,
        "settings": settings,
        "plan": plan_dict(plan) if plan is not None else None,
        "comparisons": [comparison(b, v, group, options) for (b, v), group in groups.items()],
    }
