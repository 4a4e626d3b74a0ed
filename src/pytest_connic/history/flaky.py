"""Flaky cases: the verdict flipped in the recent sessions while the case's cassette and its
configuration (everything its verdict depends on: suite, agents, tools, middleware, hooks,
guardrails, builders, mocks, schemas, settings; plugin/digests.py) stayed the same.

One flip is a change (``compare.py``: newly failing, newly passing); a case is flaky when its
verdict flipped at least twice (it went both ways) within the last ``window`` sessions that ran
with the cassette and agent configuration of the current session. A change of either starts the
count afresh: a case that fails after its cassette was re-recorded is newly failing, not flaky.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_connic.history.compare import VERDICTS
from pytest_connic.history.store import CaseRow

#: flips within the window that make a case flaky
MIN_FLIPS = 2


@dataclass(frozen=True)
class Flaky:
    flips: int
    sessions: int  #: the sessions counted (with the same cassette and agent configuration)

    @property
    def text(self) -> str:
        return f"flaky: {self.flips} flips in the last {self.sessions} sessions"


def flakiness(rows: Sequence[CaseRow], window: int) -> Flaky | None:
    """``rows``: one case over the sessions, oldest first, the current session last."""
    if not rows:
        return None
    current = rows[-1]
    same: list[CaseRow] = []
    for row in reversed(rows):
        if len(same) >= window:
            break
        if (row.cassette_digest, row.config_digest) != (current.cassette_digest, current.config_digest):
            break
        same.append(row)
    verdicts = [r.verdict for r in reversed(same) if r.verdict in VERDICTS]
    flips = sum(1 for a, b in itertools.pairwise(verdicts) if a != b)
    return Flaky(flips, len(same)) if flips >= MIN_FLIPS else None
