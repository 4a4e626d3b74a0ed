"""What changed since the previous session of the same selection: a case that newly fails, one
that newly passes, and one whose pass rate moved outside the interval it had last time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pytest_connic.history.behaviour import MAX_CHARS
from pytest_connic.history.store import CaseRow
from pytest_connic.jsonsafe import JsonBoundsError, load_bounded

#: verdicts that say something about the case (the others: it did not get one)
VERDICTS = ("passed", "failed")
#: the verdicts of a case that did not pass, for what changed (flakiness counts only ``VERDICTS``)
_NOT_PASSING = ("failed", "error")


@dataclass(frozen=True)
class Change:
    """One case's change since the session it is compared with."""

    kind: str  #: newly-failing | newly-passing | rate-moved
    text: str  #: for people: ``newly failing (passed before)``, ``pass rate 90% → 40%``


def percent(rate: float | None) -> str:
    return "—" if rate is None else f"{rate * 100:.0f}%"


def change(current: CaseRow, previous: CaseRow | None) -> Change | None:
    """How ``current`` differs from ``previous`` (the same case in the session compared with). An
    error counts as not passing: a case that passes after an error is newly passing."""
    if previous is None:
        return None
    now, before = current.verdict, previous.verdict
    if before == "passed" and now in _NOT_PASSING:
        return Change("newly-failing", "newly failing (passed last time)" if now == "failed"
                      else "newly an error (passed last time)")
    if before in _NOT_PASSING and now == "passed":
        return Change("newly-passing", "newly passing (failed last time)" if before == "failed"
                      else "newly passing (an error last time)")
    if now not in VERDICTS or before not in VERDICTS:
        return None
    low, high, rate = previous.rate_low, previous.rate_high, current.pass_rate
    if low is None or high is None or rate is None or low <= rate <= high:
        return None
    return Change("rate-moved", f"pass rate moved {percent(previous.pass_rate)} → {percent(rate)} "
                                f"(outside {percent(low)}–{percent(high)})")


def changes(current: Mapping[str, CaseRow], previous: Mapping[str, CaseRow]) -> dict[str, Change]:
    """The changed cases of ``current`` (node id -> change) against ``previous``."""
    found = {}
    for nodeid, row in current.items():
        found_change = change(row, previous.get(nodeid))
        if found_change is not None:
            found[nodeid] = found_change
    return found


def changed_parts(current: str | None, previous: str | None) -> list[str]:
    """The parts whose digest differs between two stored ``config_parts`` (JSON ``{part: digest}``;
    added and removed parts too); ``[]`` when either is unknown (a row of an older version) or not
    such a value."""
    if not current or not previous:
        return []
    try:
        now = load_bounded(current, max_depth=2, max_chars=MAX_CHARS)
        before = load_bounded(previous, max_depth=2, max_chars=MAX_CHARS)
    except JsonBoundsError:
        return []
    if not isinstance(now, dict) or not isinstance(before, dict):
        return []
    return sorted(k for k in now.keys() | before.keys() if now.get(k) != before.get(k))
