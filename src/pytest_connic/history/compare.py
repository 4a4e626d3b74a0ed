"""What changed since the previous session of the same selection: a case that newly fails, one
that newly passes, and one whose pass rate moved outside the interval it had last time."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from pytest_connic.history.store import CaseRow

#: verdicts that say something about the case (the others: it did not get one)
VERDICTS = ("passed", "failed")


@dataclass(frozen=True)
class Change:
    """One case's change since the session it is compared with."""

    kind: str  #: newly-failing | newly-passing | rate-moved
    text: str  #: for people: ``newly failing (passed before)``, ``pass rate 90% → 40%``


def percent(rate: float | None) -> str:
    return "—" if rate is None else f"{rate * 100:.0f}%"


def change(current: CaseRow, previous: CaseRow | None) -> Change | None:
    """How ``current`` differs from ``previous`` (the same case in the session compared with)."""
    if previous is None or current.verdict not in VERDICTS or previous.verdict not in VERDICTS:
        return None
    if previous.verdict == "passed" and current.verdict == "failed":
        return Change("newly-failing", "newly failing (passed last time)")
    if previous.verdict == "failed" and current.verdict == "passed":
        return Change("newly-passing", "newly passing (failed last time)")
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
    added and removed parts too); ``[]`` when either is unknown (a row of an older version)."""
    if not current or not previous:
        return []
    try:
        now, before = json.loads(current), json.loads(previous)
    except ValueError:
        return []
    if not isinstance(now, dict) or not isinstance(before, dict):
        return []
    return sorted(k for k in now.keys() | before.keys() if now.get(k) != before.get(k))
