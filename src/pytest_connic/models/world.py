"""The recorded world of a run: what its user code saw of the clock, the ids and ``random``.

A cassette run may carry a ``world:`` section (docs/models.md, "The recorded world")::

    world:
      started_at: "2026-12-01T10:00:00.123456+00:00"  # the run's wall clock at its start
      run_ids: [<the case's run id>, <each child's or stage's, in start order>]
      ids: [<other ids the runtime made for user code, in order>]   # trigger_agent_at, send_connector
      elapsed: [0.004, 1.52]  # seconds since the start at each call of user code, in start order
      seed: 1234567           # Python's random, seeded in the worker before the run's user code

Every key is optional; a run without ``world:`` replays as before the section existed. A recording
writes it; a replay reads it back (:class:`RunWorld`), so the run ids, ``context["timestamp"]`` and
the wall clock user code reads in its worker process are the recorded ones on any later day.
"""

from __future__ import annotations

import datetime as dt
import random
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeGuard, TypeVar

WORLD_KEYS = ("started_at", "run_ids", "ids", "elapsed", "seed")
#: a function raising the cassette's located error: ``fail(key under world, message)``
Fail = Callable[[str | None, str], Exception]
_SEEDS = random.SystemRandom()  # a recording's seed never consumes the user's own random stream
_V = TypeVar("_V")


@dataclass
class World:
    """The ``world:`` section of one cassette run (every field optional)."""

    started_at: dt.datetime | None = None
    run_ids: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    elapsed: list[float] = field(default_factory=list)
    seed: int | None = None


def world_from_data(raw: Mapping[str, object], fail: Fail) -> World:
    """A validated ``World`` from the section's mapping (its keys already checked)."""
    world = World()
    started = raw.get("started_at")
    if isinstance(started, str):
        try:
            started = dt.datetime.fromisoformat(started)
        except ValueError:
            raise fail("started_at", f"expected an ISO 8601 time with an offset, found {started!r}") from None
    if started is not None:
        if not isinstance(started, dt.datetime) or started.tzinfo is None:
            raise fail("started_at", f"expected an ISO 8601 time with an offset (e.g. "
                                     f"2026-12-01T10:00:00+00:00), found {started!r}")
        world.started_at = started
    for name in ("run_ids", "ids"):
        values = raw.get(name) or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise fail(name, f"expected a list of strings, found {values!r}")
        setattr(world, name, [str(v) for v in values])
    elapsed = raw.get("elapsed") or []
    if not isinstance(elapsed, list):
        raise fail("elapsed", f"expected a list of seconds (numbers >= 0), found {elapsed!r}")
    seconds = [v for v in elapsed if _seconds(v)]
    if len(seconds) != len(elapsed):
        raise fail("elapsed", f"expected a list of seconds (numbers >= 0), found {elapsed!r}")
    world.elapsed = [float(v) for v in seconds]
    seed = raw.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise fail("seed", f"expected an integer >= 0, found {seed!r}")
    world.seed = seed
    return world


def _seconds(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def world_to_data(world: World) -> dict[str, object]:
    """The section as plain data (keys in the documented order, empty ones left out)."""
    out: dict[str, object] = {}
    if world.started_at is not None:
        out["started_at"] = world.started_at.isoformat()
    for name in ("run_ids", "ids"):
        if getattr(world, name):
            out[name] = list(getattr(world, name))
    if world.elapsed:
        out["elapsed"] = [round(v, 6) for v in world.elapsed]
    if world.seed is not None:
        out["seed"] = world.seed
    return out


class RunWorld:
    """One run's world while it executes: recorded (``recording``) or replayed from ``world``.

    ``now`` is the run's clock reading (``RunClock.now()``) at its start; offsets are measured on
    that clock, so a retry delay the virtual clock skipped moves the recorded world forward too."""

    def __init__(self, world: World | None, *, recording: bool, now: float) -> None:
        self.recording = recording
        self.world = world if world is not None else World()
        if recording:
            self.world.started_at = dt.datetime.now(dt.timezone.utc).astimezone()
            self.world.seed = _SEEDS.randrange(2**32)
        self._start = now
        self._lock = threading.Lock()
        self._taken = {"run_ids": 0, "ids": 0, "elapsed": 0}
        #: the elapsed time the latest call of user code read (``wall_now``)
        self._last = 0.0

    def _next(self, name: str, make: Callable[[], _V]) -> _V:
        """The next recorded value of ``name`` (replay; made fresh past the recorded ones), or a
        fresh one that is recorded."""
        with self._lock:
            values: list[_V] = getattr(self.world, name)
            if self.recording:
                values.append(make())
                return values[-1]
            k = self._taken[name]
            self._taken[name] = k + 1
            return values[k] if k < len(values) else make()

    def run_id(self) -> str:
        """The run id of the next invocation (the case's, then each child's, in start order)."""
        return str(self._next("run_ids", lambda: str(uuid.uuid4())))

    def new_id(self) -> str:
        """An id the runtime hands to user code (a scheduled run's, a connector run's)."""
        return str(self._next("ids", lambda: str(uuid.uuid4())))

    def wall_now(self, now: float) -> dt.datetime:
        """The wall clock an invocation starting now reads (``context["timestamp"]``): the run's
        start plus the elapsed time of its latest call of user code, so that it is the same
        instant in the recording and in every replay (to the microsecond); the real clock when
        the cassette records no start. ``now`` is unused: kept for the clock-reading callers."""
        started = self.world.started_at
        if started is None:
            return dt.datetime.now(dt.timezone.utc)
        return (started + dt.timedelta(seconds=self._last)).astimezone(dt.timezone.utc)

    def for_call(self, now: float) -> tuple[str | None, int | None]:
        """What a call of user code carries to its worker: the wall clock it reads (the run's start
        plus the call's elapsed time, recorded to the microsecond: the worker holds the clock
        there for the call, in the recording and in a replay alike) and the run's seed."""
        elapsed = round(max(now - self._start, 0.0), 6)
        at = self._next("elapsed", lambda: elapsed)
        self._last = float(at)
        started = self.world.started_at
        if started is None:
            return None, self.world.seed
        return (started + dt.timedelta(seconds=float(at))).isoformat(), self.world.seed
