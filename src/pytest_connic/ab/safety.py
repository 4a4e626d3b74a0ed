"""The Confidence-mode failure auto-pause for the variant arm."""

from __future__ import annotations

from collections import deque


class SafetyMonitor:
    """Pauses when a complete rolling window of finished variant runs fails too often.

    Feed every finished (terminal) variant run, in completion order, to
    :meth:`observe`. The monitor pauses the first time the last ``window`` runs
    contain a failure share strictly above ``max_failure_rate``; a partly filled
    window never pauses. A pause is final: later observations do not resume it.
    """

    def __init__(self, window: int = 20, max_failure_rate: float = 0.5) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1; got {window!r}")
        if not 0.0 <= max_failure_rate < 1.0:
            raise ValueError(f"max_failure_rate must be in [0, 1); got {max_failure_rate!r}")
        self.window = window
        self.max_failure_rate = max_failure_rate
        self._recent: deque[bool] = deque(maxlen=window)
        self.observed = 0
        self.paused = False
        self.reason: str | None = None

    @property
    def failure_rate(self) -> float | None:
        """Failure share of the current window, ``None`` until the window is complete."""
        if len(self._recent) < self.window:
            return None
        return self._recent.count(False) / self.window

    def observe(self, passed: bool) -> None:
        """Record one finished variant run and pause if the complete window breaches the threshold."""
        self.observed += 1
        self._recent.append(bool(passed))
        if self.paused:
            return
        rate = self.failure_rate
        if rate is not None and rate > self.max_failure_rate:
            self.paused = True
            failures = self._recent.count(False)
            self.reason = (
                f"variant failed {failures} of its last {self.window} finished runs "
                f"({rate:.0%} > {self.max_failure_rate:.0%}) after {self.observed} runs"
            )
