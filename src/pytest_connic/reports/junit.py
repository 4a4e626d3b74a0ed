"""JUnit XML ``<property>`` pairs for one case (``record_property`` / ``user_properties``).

Values are strings: JUnit XML has no other type. An absent value (no run executed, so no pass
rate) is the empty string, so every testcase has the same property names.
"""

from __future__ import annotations

from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.reports.stats import case_wilson, pass_rate


def junit_properties(outcome: CaseOutcome) -> list[tuple[str, str]]:
    """``runs, successes, success_threshold, pass_rate, wilson_low, wilson_high,
    median_latency_ms, input_tokens, output_tokens, cost, run_ids, skipped_runs, recorded_runs, replay``
    in this order (``recorded_runs``: the runs the replayed cassette holds; ``replay``: ``3 runs
    replayed from 1 recorded run`` when some runs are copies)."""
    wilson = case_wilson(outcome)
    return [
        ("runs", str(outcome.runs)),
        ("successes", str(outcome.successes)),
        ("success_threshold", str(outcome.success_threshold)),
        ("pass_rate", _number(pass_rate(outcome))),
        ("wilson_low", _number(wilson[0] if wilson else None)),
        ("wilson_high", _number(wilson[1] if wilson else None)),
        ("median_latency_ms", _number(outcome.median_latency_ms, digits=1)),
        ("input_tokens", str(outcome.input_tokens)),
        ("output_tokens", str(outcome.output_tokens)),
        ("cost", _number(outcome.cost, digits=8)),
        ("run_ids", ",".join(r.run_id for r in outcome.executed)),
        ("skipped_runs", str(outcome.skipped_runs)),
        ("recorded_runs", "" if outcome.recorded_runs is None else str(outcome.recorded_runs)),
        ("replay", outcome.replay_note or ""),
    ]


def _number(value: float | None, digits: int = 6) -> str:
    """Fixed-point without trailing zeros (``0.6``, ``12.5``, ``0``); never scientific notation."""
    if value is None:
        return ""
    text = f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text
