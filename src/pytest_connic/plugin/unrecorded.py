"""Why a recording session wrote no cassette, kept in pytest's cache for the next replay: its
"no cassette for this case" message then says what went wrong while recording (models/replay.py)."""

from __future__ import annotations

import hashlib

import pytest

#: the cache folder of the notes (one key per cassette, so xdist workers never write the same key)
PREFIX = "connic/unrecorded/"


class CacheNotes:
    """``UnrecordedNotes`` over pytest's cache (``config.cache``)."""

    def __init__(self, cache: pytest.Cache) -> None:
        self.cache = cache

    @staticmethod
    def _key(path: str) -> str:
        return PREFIX + hashlib.sha256(path.encode("utf-8", "surrogatepass")).hexdigest()[:24]

    def why(self, path: str) -> str | None:
        """The cause the last recording session gave for ``path``, if any."""
        entry = self.cache.get(self._key(path), None)
        if isinstance(entry, dict) and entry.get("path") == path and isinstance(entry.get("why"), str):
            return str(entry["why"])
        return None

    def remember(self, path: str, why: str) -> None:
        self.cache.set(self._key(path), {"path": path, "why": why})

    def forget(self, path: str) -> None:
        if self.why(path) is not None:
            self.cache.set(self._key(path), None)


def notes_for(config: pytest.Config) -> CacheNotes | None:
    """The session's notes; None with ``-p no:cacheprovider``."""
    cache = getattr(config, "cache", None)
    return CacheNotes(cache) if cache is not None else None
