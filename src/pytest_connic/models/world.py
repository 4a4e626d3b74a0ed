"""The recorded world of a run: the ids the runtime made for it and the seed of ``random``.

A cassette run may carry a ``world:`` section (docs/models.md, "The recorded world")::

    world:
      started_at: "2026-12-01T10:00:00.123456+00:00"  # when the recording's run started
      run_ids: [<the case's run id>, <each child's or stage's, in start order>]
      ids: [<other ids the runtime made for user code, in order>]   # trigger_agent_at, send_connector
      seed: 1234567           # Python's random, seeded in the worker before the run's user code

Every key is optional; a run without ``world:`` replays as before the section existed. A recording
writes it; a replay reads it back (:class:`RunWorld`), so the run ids and ``random`` are the
recorded ones on any later day. A run replayed beyond the recorded runs (``runs: 3`` over a one-run
cassette) gets ids of its own, derived from the recorded ones and its copy number, so no two runs
of a case share an id.

The clock is not replayed: user code reads the real time (a tool that signs a request for a real
service must), and the times a request holds are compared as volatile values
(``models/volatile.py``). ``started_at`` says when the recording was made; ``elapsed`` (the
seconds of each call of user code, written by older versions) is read, checked and unused.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeGuard

WORLD_KEYS = ("started_at", "run_ids", "ids", "elapsed", "seed")
#: the times a ``started_at`` may hold (naive UTC), and the longest ``elapsed`` (a run's 3600 s
#: bound, many times over)
_EARLIEST = dt.datetime(1970, 1, 1)
_LATEST = dt.datetime(9000, 1, 1)
_MAX_ELAPSED = 86400.0 * 366
#: a function raising the cassette's located error: ``fail(key under world, message)``
Fail = Callable[[str | None, str], Exception]
_SEEDS = random.SystemRandom()  # a recording's seed never consumes the user's own random stream


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
        if not _EARLIEST <= started.astimezone(dt.timezone.utc).replace(tzinfo=None) <= _LATEST:
            raise fail("started_at", f"expected a time between {_EARLIEST.year} and {_LATEST.year}, "
                                     f"found {started.isoformat()}")
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
        raise fail("elapsed", f"expected a list of seconds (numbers from 0 to {_MAX_ELAPSED:g}), "
                              f"found {_short(elapsed)}")
    world.elapsed = [float(v) for v in seconds]
    seed = raw.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise fail("seed", f"expected an integer >= 0, found {seed!r}")
    world.seed = seed
    return world


def _seconds(value: object) -> TypeGuard[int | float]:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and 0 <= value <= _MAX_ELAPSED)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


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
    """One run's world while it executes: recorded (``recording``) or replayed from ``world``;
    ``copy``: the run replays the cassette's runs for the ``copy``-th time over (0: the first),
    and its ids are derived from the recorded ones (``derived``)."""

    def __init__(self, world: World | None, *, recording: bool, now: float, copy: int = 0) -> None:
        self.recording = recording
        self.world = world if world is not None else World()
        self.copy = 0 if recording else copy
        if recording:
            self.world.started_at = dt.datetime.now(dt.timezone.utc).astimezone()
            self.world.seed = _SEEDS.randrange(2**32)
            self.world.elapsed = []
        self._lock = threading.Lock()
        self._taken = {"run_ids": 0, "ids": 0}

    def _next(self, name: str, make: Callable[[], str]) -> str:
        """The next recorded value of ``name`` (replay; made fresh past the recorded ones, derived
        in a copy), or a fresh one that is recorded."""
        with self._lock:
            values: list[str] = getattr(self.world, name)
            if self.recording:
                values.append(make())
                return values[-1]
            k = self._taken[name]
            self._taken[name] = k + 1
            if k >= len(values):
                return make()
            return derived(values[k], self.copy) if self.copy else values[k]

    def run_id(self) -> str:
        """The run id of the next invocation (the case's, then each child's, in start order)."""
        return self._next("run_ids", lambda: str(uuid.uuid4()))

    def new_id(self) -> str:
        """An id the runtime hands to user code (a scheduled run's, a connector run's)."""
        return self._next("ids", lambda: str(uuid.uuid4()))

    def wall_now(self, now: float) -> dt.datetime:
        """The wall clock an invocation starting now reads (``context["timestamp"]``): the real
        one, in a replay too (``now``, the run's clock, is unused)."""
        return dt.datetime.now(dt.timezone.utc)

    def for_call(self, now: float) -> tuple[str | None, int | None]:
        """What a call of user code carries to its worker: no clock (user code reads the real
        one) and the run's seed."""
        return None, self.world.seed


#: the namespace of the ids a copy of a recorded run derives
_COPIES = uuid.UUID("6f1c3e0a-3c1b-5d4e-9a57-1d2c0ffee000")


def derived(recorded: str, copy: int) -> str:
    """The id the ``copy``-th replay over a recorded run gets for the recorded id ``recorded``:
    the same for every replay (deterministic), distinct for each copy, a UUID when the recorded
    one is."""
    return str(uuid.uuid5(_COPIES, f"{recorded}/{copy}"))
