"""Volatile values: what changes from run to run in a request without the agent behaving otherwise.

A recording made today and a replay made tomorrow send requests that differ in the values user
code makes itself: a ``uuid4()`` a tool returns, a token in hex, the time a middleware writes into
the prompt, today's date. Matching them exactly would fail every replay; leaving them out by
hand takes one matching rule per kind of value. So a recorded request's digests are of the
request with these values replaced by placeholders (the kinds applied are listed in the
fingerprint's ``volatile`` key, and a replay applies the same kinds):

- ``uuid``: a UUID (any version) -> ``<uuid-1>``, ``<uuid-2>``, ... numbered in the order they
  first appear in the request, so the request still says which value went where;
- ``hex``: a run of 16 or more hex digits holding both a digit and a letter (a token, an object
  id, a digest) -> ``<hex-1>``, ...;
- ``time``: a time near the run's start (ISO 8601, RFC 2822, or epoch seconds or milliseconds
  within 36 hours of it, as text or as a number) -> ``<time>``, and a date (ISO ``YYYY-MM-DD``)
  within a day of the run's date -> ``<today>``, ``<today-1>``, ``<today+1>``.

Everything else is compared exactly. A fixed value far from the run's start (an order's date in a
tool's data) is never a placeholder, so a change to it is seen. The run's start is its own: the
recording's when recording, the replay's real one when replaying, so a prompt that holds
``datetime.now()`` matches on any later day.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

#: the kinds of volatile value, in the order they are replaced
KINDS = ("uuid", "hex", "time")
#: how far from the run's start a time is taken as "now" (a long run, a time zone written as UTC)
TIME_WINDOW = dt.timedelta(hours=36)
_DAY = dt.timedelta(days=1)

_UUID = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
                   r"(?![0-9A-Za-z])")
_HEX = re.compile(r"(?<![0-9A-Za-z_-])[0-9a-fA-F]{16,}(?![0-9A-Za-z_-])")
_ISO = re.compile(
    r"(?<![0-9])(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?"
    r"(Z|[+-]\d{2}(?::?\d{2})?)?(?![0-9])"
)
_RFC = re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{1,2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
                  r"\d{4} \d{2}:\d{2}(?::\d{2})? (?:GMT|UTC|UT|[+-]\d{4})")
_EPOCH = re.compile(r"(?<![0-9.])(\d{13}|\d{10}(?:\.\d{1,9})?)(?![0-9])")
_DATE = re.compile(r"(?<![0-9])(\d{4})-(\d{2})-(\d{2})(?![0-9])")


@dataclass
class Found:
    """What one request's volatile values were replaced by: the placeholder of each value (uuid
    and hex), and each placeholder's value (the first one seen)."""

    placeholders: dict[str, str] = field(default_factory=dict)  #: value -> placeholder
    values: dict[str, str] = field(default_factory=dict)  #: placeholder -> value
    counts: dict[str, int] = field(default_factory=dict)

    def name(self, kind: str, value: str) -> str:
        key = value.lower()
        if key not in self.placeholders:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            placeholder = f"<{kind}-{self.counts[kind]}>"
            self.placeholders[key] = placeholder
            self.values[placeholder] = value
        return self.placeholders[key]


class Volatile:
    """Replaces the volatile values of the ``kinds`` in text and data, relative to ``start`` (the
    run's start, aware)."""

    def __init__(self, kinds: Sequence[str], start: dt.datetime) -> None:
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise ValueError(f"unknown kinds of volatile value: {', '.join(unknown)}; known: {', '.join(KINDS)}")
        self.kinds = tuple(k for k in KINDS if k in kinds)
        self.start = start if start.tzinfo is not None else start.replace(tzinfo=dt.timezone.utc)
        self.found = Found()
        local = self.start.astimezone()
        self._days = {self.start.astimezone(dt.timezone.utc).date(), local.date()}

    def text(self, value: str) -> str:
        """``value`` with its volatile values replaced."""
        if "uuid" in self.kinds and "-" in value:
            value = _UUID.sub(lambda m: self.found.name("uuid", m.group()), value)
        if "hex" in self.kinds:
            value = _HEX.sub(self._hex, value)
        if "time" in self.kinds and any(c.isdigit() for c in value):
            value = _ISO.sub(self._iso, value)
            value = _RFC.sub(self._rfc, value)
            value = _EPOCH.sub(self._epoch, value)
            value = _DATE.sub(self._date, value)
        return value

    def number(self, value: float) -> object:
        """A number that is an epoch time near the start is ``<time>``; any other stays as it is."""
        if "time" in self.kinds and self._near_epoch(float(value)):
            return "<time>"
        return value

    def data(self, value: object) -> object:
        """``value`` (JSON-like data) with every string and number seen by ``text``/``number``."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, (int, float)):
            return self.number(value)
        if isinstance(value, Mapping):
            return {k: self.data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value

    # -- one kind each ---------------------------------------------------------

    def _hex(self, match: re.Match[str]) -> str:
        token = match.group()
        if not any(c.isdigit() for c in token) or not any(c.isalpha() for c in token):
            return token
        return self.found.name("hex", token)

    def _near(self, when: dt.datetime) -> bool:
        return abs(when - self.start) <= TIME_WINDOW

    def _iso(self, match: re.Match[str]) -> str:
        year, month, day, hour, minute, second, fraction, zone = match.groups()
        try:
            naive = dt.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second or 0),
                                int((fraction or "0")[:6].ljust(6, "0")))
        except ValueError:
            return match.group()
        if zone is None:  # local time or UTC: either near the start makes it "now"
            local = naive.replace(tzinfo=self.start.astimezone().tzinfo)
            near = self._near(naive.replace(tzinfo=dt.timezone.utc)) or self._near(local)
        else:
            near = self._near(naive.replace(tzinfo=_zone(zone)))
        return "<time>" if near else match.group()

    def _rfc(self, match: re.Match[str]) -> str:
        try:
            when = email.utils.parsedate_to_datetime(match.group())
        except (TypeError, ValueError, IndexError):
            return match.group()
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc)
        return "<time>" if self._near(when) else match.group()

    def _near_epoch(self, value: float) -> bool:
        seconds = value / 1000 if value >= 1e12 else value
        if not 1e9 <= seconds < 1e11:
            return False
        return abs(seconds - self.start.timestamp()) <= TIME_WINDOW.total_seconds()

    def _epoch(self, match: re.Match[str]) -> str:
        return "<time>" if self._near_epoch(float(match.group())) else match.group()

    def _date(self, match: re.Match[str]) -> str:
        try:
            day = dt.date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
        except ValueError:
            return match.group()
        offsets = sorted((day - today).days for today in self._days)
        near = [d for d in offsets if abs(d) <= 1]
        if not near:
            return match.group()
        offset = near[0] if 0 not in near else 0
        return "<today>" if offset == 0 else f"<today{offset:+d}>"


def _zone(text: str) -> dt.tzinfo:
    if text == "Z":
        return dt.timezone.utc
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
    return dt.timezone(sign * dt.timedelta(hours=hours, minutes=minutes))


def substitute(value: object, replace: Callable[[str], str]) -> object:
    """``value`` with ``replace`` applied to every string in it (at any depth)."""
    if isinstance(value, str):
        return replace(value)
    if isinstance(value, Mapping):
        return {k: substitute(v, replace) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, replace) for v in value]
    return value
