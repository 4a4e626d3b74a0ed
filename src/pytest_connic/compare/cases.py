"""One comparison: each case of the subject against the same case (node id) of the reference.
The result is the JSON-ready ``comparison`` section every output renders."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_connic.compare.diff import output_diff, tool_diff
from pytest_connic.compare.sides import CaseSide, Side
from pytest_connic.history.compare import changed_parts, percent


def _first_run(case: CaseSide) -> dict[str, Any] | None:
    runs = (case.behaviour or {}).get("runs") or []
    first = runs[0] if isinstance(runs, list) and runs else None
    return first if isinstance(first, dict) else None


def _decisions(run: dict[str, Any] | None) -> dict[str, str]:
    """``{"guardrail input no_pii": "passed", "approval refund #1": "approve", ...}``"""
    found: dict[str, str] = {}
    if run is None:
        return found
    for g in run.get("guardrails") or []:
        found[f"guardrail {g.get('direction')} {g.get('name')}"] = str(g.get("status"))
    seen: dict[str, int] = {}
    for a in run.get("approvals") or []:
        tool = str(a.get("tool"))
        seen[tool] = seen.get(tool, 0) + 1
        found[f"approval {tool}" + (f" #{seen[tool]}" if seen[tool] > 1 else "")] = str(a.get("decision") or "unanswered")
    return found


def decision_changes(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[dict[str, Any]]:
    a, b = _decisions(before), _decisions(after)
    return [{"what": key, "before": a.get(key), "after": b.get(key)}
            for key in sorted(a.keys() | b.keys()) if a.get(key) != b.get(key)]


def rate_change(before: CaseSide, after: CaseSide) -> dict[str, Any] | None:
    """A case with several runs on either side: its pass rate's change, and whether it is within
    noise (the subject's rate inside the reference's 95 % Wilson interval)."""
    if max(before.executed, after.executed) < 2 or before.pass_rate is None or after.pass_rate is None:
        return None
    low, high = before.interval or (None, None)
    noise = low is not None and high is not None and low <= after.pass_rate <= high
    text = f"pass rate {percent(before.pass_rate)} → {percent(after.pass_rate)}"
    if low is not None and high is not None:
        text += (f" (within noise: inside the reference's 95% interval {percent(low)}–{percent(high)})" if noise
                 else f" (outside the reference's 95% interval {percent(low)}–{percent(high)})")
    return {"before": before.pass_rate, "after": after.pass_rate, "interval_before": [low, high],
            "interval_after": list(after.interval) if after.interval else None, "noise": noise, "text": text,
            "runs_before": f"{before.successes}/{before.executed}", "runs_after": f"{after.successes}/{after.executed}"}


def case_change(before: CaseSide, after: CaseSide) -> dict[str, Any] | None:
    """What changed from ``before`` (the reference) to ``after`` (the subject); None: nothing
    (latency alone never counts: it differs on every run)."""
    run_a, run_b = _first_run(before), _first_run(after)
    kept = before.behaviour is not None and after.behaviour is not None
    output = output_diff(run_a.get("output"), run_b.get("output")) if kept and run_a and run_b else None
    tools = tool_diff((run_a or {}).get("tools") or [], (run_b or {}).get("tools") or []) if kept else []
    decisions = decision_changes(run_a, run_b) if kept else []
    rate = rate_change(before, after)
    tokens = (before.input_tokens + before.output_tokens, after.input_tokens + after.output_tokens)
    cost = (round(before.cost, 8), round(after.cost, 8))
    verdict = None if before.verdict == after.verdict else {"before": before.verdict, "after": after.verdict}
    moved = rate is not None and rate["before"] != rate["after"]
    # a cost of 0 is no price known (a model this machine has no price for), never a free call: a
    # cost that is priced on one side only is no change of behaviour
    cost_moved = cost[0] != cost[1] and cost[0] > 0 and cost[1] > 0
    if not (verdict or output or tools or decisions or moved or tokens[0] != tokens[1] or cost_moved):
        return None
    notes = []
    if not kept:
        notes.append("outputs and tool calls not compared: " + ("the reference" if before.behaviour is None else "the subject")
                     + " comes from a history written before pytest-connic kept them")
    if run_a and run_b and (before.executed > 1 or after.executed > 1):
        notes.append("the output and tool calls are those of each side's first run")
    return {
        "nodeid": after.nodeid,
        "name": after.name if "::" in after.name else before.name,
        "verdict": verdict,
        "output": output,
        "tools": tools,
        "decisions": decisions,
        "rate": rate,
        "tokens": list(tokens),
        "cost": list(cost),
        "latency_ms": [before.latency_ms, after.latency_ms],
        "configuration": changed_parts(after.config_parts, before.config_parts),
        "cassette_changed": bool(before.cassette_digest and after.cassette_digest
                                 and before.cassette_digest != after.cassette_digest),
        "notes": notes,
    }


def compare(subject: Side, reference: Side) -> dict[str, Any]:
    """The ``comparison`` section: ``subject`` compared with ``reference`` (what changed from the
    reference to the subject)."""
    changed = []
    unchanged = 0
    for nodeid in sorted(subject.cases.keys() & reference.cases.keys()):
        found = case_change(reference.cases[nodeid], subject.cases[nodeid])
        if found is None:
            unchanged += 1
        else:
            changed.append(found)
    # a verdict change first, then the others, each group in node id order
    changed.sort(key=lambda c: (c["verdict"] is None, c["nodeid"]))

    def listed(side: Side, other: Side) -> list[dict[str, Any]]:
        return [{"nodeid": n, "name": side.cases[n].name, "verdict": side.cases[n].verdict}
                for n in sorted(side.cases.keys() - other.cases.keys())]

    def total(side: Side) -> dict[str, Any]:
        return {"tokens": sum(c.input_tokens + c.output_tokens for c in side.cases.values()),
                "cost": round(sum(c.cost for c in side.cases.values()), 8)}

    section: dict[str, Any] = {
        "subject": subject.label,
        "reference": reference.label,
        "changed": changed,
        "only_subject": listed(subject, reference),
        "only_reference": listed(reference, subject),
        "unchanged": unchanged,
        "totals": {"reference": total(reference), "subject": total(subject)},
    }
    section["text"] = header(section)
    for change in changed:
        change["deltas"] = deltas(change)
    return section


# --------------------------------------------------------------------------- in words

def tokens_text(pair: Sequence[int]) -> str:
    before, after = pair
    return f"tokens {before:,} → {after:,} ({after - before:+,})"


def dollars(amount: float) -> str:
    """``$0.0123``; a small amount with the digits that tell it apart (``$0.000045``)."""
    amount = abs(amount)
    return "$0" if amount == 0 else f"${amount:.4f}" if amount >= 0.001 else f"${amount:.6f}"


def cost_text(pair: Sequence[float]) -> str | None:
    """``cost $0.0012 → $0.0020 (+$0.0008)``; None when neither side has a priced cost (no price
    known for its models: a comparison never says ``$0 → $0``)."""
    before, after = pair
    if not before and not after:
        return None
    sign = "+" if after >= before else "-"
    return f"cost {dollars(before)} → {dollars(after)} ({sign}{dollars(after - before)})"


def latency_text(pair: Sequence[float | None]) -> str | None:
    before, after = pair
    if before is None or after is None:
        return None
    a, b = round(before), round(after)
    return f"latency {a}ms → {b}ms ({b - a:+}ms)"


def deltas(change: dict[str, Any]) -> str:
    parts = [tokens_text(change["tokens"]), cost_text(change["cost"]), latency_text(change["latency_ms"])]
    return " · ".join(p for p in parts if p)


def verdict_text(verdict: dict[str, Any]) -> str:
    return f"verdict: {verdict['before']} → {verdict['after']}"


def header(section: dict[str, Any]) -> list[str]:
    counts = (f"{len(section['changed'])} case(s) changed, {section['unchanged']} unchanged"
              f", {len(section['only_subject'])} only in the subject, {len(section['only_reference'])} only in the reference")
    totals = section["totals"]
    pair_tokens = (totals["reference"]["tokens"], totals["subject"]["tokens"])
    pair_cost = (totals["reference"]["cost"], totals["subject"]["cost"])
    return [f"{section['subject']} compared with {section['reference']}", counts,
            "in all: " + " · ".join(p for p in (tokens_text(pair_tokens), cost_text(pair_cost)) if p)]
