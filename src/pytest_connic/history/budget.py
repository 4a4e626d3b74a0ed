"""``--connic-budget-tokens`` and ``--connic-budget-cost``: one session's spend, across processes.

The ledger is a small SQLite file in the session's temporary directory (the xdist controller
creates it and tells each worker where it is); every finished run charges its tokens and cost to
it in one transaction, and a run starts only while the ledger is below every bound. The runs
already in flight when the bound is crossed still finish (and are charged), so the spend can pass
the bound by what those runs cost; nothing starts after it.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

#: why a run did not start, and why a case that could not finish is skipped
BUDGET_SPENT = "budget spent"


@dataclass(frozen=True)
class Spend:
    tokens: int
    cost: float
    runs: int


class Budget:
    """The bounds and the shared ledger at ``path`` (created on first use)."""

    def __init__(self, path: Path, *, tokens: int | None = None, cost: float | None = None) -> None:
        self.path = path
        self.tokens = tokens
        self.cost = cost
        self._lock = threading.Lock()
        #: set once this process saw the budget spent (it only grows)
        self._spent = False

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        conn.execute("CREATE TABLE IF NOT EXISTS ledger (tokens INTEGER NOT NULL, cost REAL NOT NULL)")
        return conn

    def charge(self, tokens: int, cost: float) -> None:
        """Add one finished run's spend."""
        with self._lock, closing(self._connect()) as conn:
            conn.execute("INSERT INTO ledger (tokens, cost) VALUES (?, ?)", (int(tokens), float(cost)))

    def spend(self) -> Spend:
        """What every process of the session has charged so far."""
        with self._lock, closing(self._connect()) as conn:
            tokens, cost, runs = conn.execute(
                "SELECT coalesce(sum(tokens), 0), coalesce(sum(cost), 0.0), count(*) FROM ledger").fetchone()
        return Spend(int(tokens), float(cost), int(runs))

    def spent(self) -> bool:
        """Whether a bound is reached: then no further run starts."""
        if self._spent:
            return True
        spend = self.spend()
        self._spent = ((self.tokens is not None and spend.tokens >= self.tokens)
                       or (self.cost is not None and spend.cost >= self.cost))
        return self._spent

    def describe(self, spend: Spend) -> str:
        """``budget: spent 1,200 of 1,000 tokens, $0.0123 of $1.00``"""
        parts = []
        if self.tokens is not None:
            parts.append(f"{spend.tokens:,} of {self.tokens:,} tokens")
        if self.cost is not None:
            parts.append(f"${spend.cost:.4f} of ${self.cost:.2f}")
        return "budget: spent " + ", ".join(parts) + f" over {spend.runs} run(s)"
