"""Regular expressions the user writes, applied in pytest's process with a bound on their time.

A backtracking pattern (``(a|aa)+$`` against sixty ``a`` and a ``!``) can take longer than the
universe has; applied with Python's ``re`` in pytest's process it would hang the session where
no ``timeout_s`` can end it (the loop that enforces it is the thread that is stuck). So every
user pattern (a matching rule, a guardrail's ``pattern``, a ``$regex`` of the local database) runs
on the ``regex`` package, whose matcher takes a timeout: past it, :class:`PatternTimeout`, which
each caller turns into a located error naming the pattern.

The syntax is Python's (``regex`` in its ``re``-compatible mode).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pytest_connic.errors import ConnicError

#: how long one application of a pattern to one text may take, at most (seconds)
DEFAULT_BUDGET_S = 1.0


class PatternError(ConnicError):
    """A pattern that does not compile; the message is ``regex``'s."""


class PatternTimeout(ConnicError):
    """A pattern ran past its time on one text (it backtracks)."""


class Bounded:
    """A compiled user pattern whose every use is bounded in time."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        import regex

        self.source = pattern
        try:
            self._compiled: Any = regex.compile(pattern, flags | regex.VERSION0)
        except regex.error as exc:
            raise PatternError(str(exc)) from None
        except (OverflowError, RecursionError, MemoryError) as exc:
            raise PatternError(f"{type(exc).__name__}: the pattern is too large or too deep") from None

    @property
    def flags(self) -> int:
        return int(self._compiled.flags)

    def search(self, text: str, deadline: Deadline | None = None) -> Any:
        """The first match in ``text`` (a match object) or None; ``PatternTimeout`` past the
        ``deadline`` (by default, ``DEFAULT_BUDGET_S`` from now)."""
        return self._bounded(lambda timeout: self._compiled.search(text, timeout=timeout), deadline)

    def sub(self, replace: str | Callable[[Any], str], text: str, deadline: Deadline | None = None) -> str:
        """``text`` with every match replaced; ``PatternTimeout`` past the ``deadline``."""
        return str(self._bounded(lambda timeout: self._compiled.sub(replace, text, timeout=timeout), deadline))

    def _bounded(self, apply: Callable[[float], Any], deadline: Deadline | None) -> Any:
        deadline = deadline or Deadline()
        try:
            return apply(max(deadline.left(), 0.001))
        except TimeoutError:
            raise PatternTimeout(f"the regular expression {_shown(self.source)} ran past its bound of "
                                 f"{deadline.budget_s:g}s and was stopped (it backtracks: avoid nested repetition "
                                 "such as (a|aa)+ or (x+)*)") from None


class Deadline:
    """A time bound shared by several applications of patterns (the texts of one request)."""

    def __init__(self, budget_s: float = DEFAULT_BUDGET_S) -> None:
        self.budget_s = budget_s
        self._end = time.monotonic() + budget_s

    def left(self) -> float:
        """Seconds left (negative once past)."""
        return self._end - time.monotonic()


def _shown(pattern: str) -> str:
    return repr(pattern if len(pattern) <= 80 else pattern[:77] + "...")
