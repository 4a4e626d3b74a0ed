"""The models of one case: replay its cassette, record it, or call providers live.

One ``CaseModels`` per case; ``for_run(i)`` gives run ``i`` its own ``RunModels``.
Runs share nothing but the configuration (and, for recording, the file they end
up in): they may execute concurrently, in different threads of one process.

The cassette is read on the first model call of any run, never before: a case
whose runs never call a model needs no cassette.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import yaml

from pytest_connic.models.base import (
    CassetteError,
    Model,
)
from pytest_connic.models.cassette import (
    DEFAULT_SIZE_LIMIT,
    Cassette,
    Turn,
    load_cassette,
    read_regular_file,
    relative_path,
    undigested_note,
)
from pytest_connic.models.cassette_paths import legacy_cassette_path
from pytest_connic.models.cassette_write import (
    cassette_to_data,
    dump_cassette_data,
    secret_field,
    write_text_atomic,
)
from pytest_connic.models.matching import MatchRule
from pytest_connic.models.runs import REPLAY_ONLY, Plan, RunModelsImpl
from pytest_connic.models.volatile import KINDS
from pytest_connic.secrets import Masker, secret_values_from_env

MODES = ("none", "once", "new_runs", "all", "digests", "live")
LiveFactory = Callable[[str], Model]


class UnrecordedNotes(Protocol):
    """Why a recording session wrote no cassette at a path, kept for the next replay's message
    (the plugin keeps them in pytest's cache; keys are the cassettes' absolute paths)."""

    def why(self, path: str) -> str | None: ...

    def remember(self, path: str, why: str) -> None: ...

    def forget(self, path: str) -> None: ...


class CaseModels:
    """Model source for every run of one case (see the module docstring)."""

    def __init__(self, path: Path, *, mode: str, live: LiveFactory | None, masker: Masker,
                 root: Path | None = None, size_limit: int = DEFAULT_SIZE_LIMIT,
                 taken: Callable[[], frozenset[str]] = frozenset,
                 warn: Callable[[str, Path], None] | None = None, rules: Sequence[MatchRule] = (),
                 unrecorded: UnrecordedNotes | None = None, strict: bool = True,
                 volatile: Sequence[str] = KINDS) -> None:
        """``root``: the project (a cassette that is a link must stay inside it); ``size_limit``:
        the largest cassette read, in bytes; ``taken()``: the file names of the other cases'
        cassettes in the folder (an old file name one of them has now is theirs, not this case's),
        computed only when an old file name exists; ``rules``: the session's matching rules (ini
        ``connic_match_rules``), applied before the cassette's own ``match:``; ``unrecorded``: why
        earlier recording sessions wrote no cassette (named when a replay finds none); ``strict``: a
        replayed request that differs from its recording fails its run (``connic_replay``), else it
        is a note; ``volatile``: the kinds of volatile value a recording replaces before its
        digests (``connic_volatile``, models/volatile.py)."""
        if mode not in MODES:
            raise ValueError(f"unknown record mode {mode!r}; expected one of {', '.join(MODES)}")
        if mode == "live" and live is None:
            raise ValueError("mode 'live' needs a live model factory")
        self.path = Path(path)
        self.mode = mode
        self.masker = masker
        self.root = root
        self.size_limit = size_limit
        self.taken = taken
        self.ini_rules = tuple(rules)
        self.strict = strict
        self.volatile = tuple(volatile)
        self._live = live
        #: ``warn(message, path)``: a notice located at ``path`` (the hand-written cassette's), given
        #: once per case; pytest's summary shows identical ones once
        self.warn = warn
        #: ``digests`` mode: the fresh digests of replayed turns whose ``request`` was missing or
        #: stale, by ``id(turn)`` (the turns live as long as the cassette)
        self.refreshed: dict[int, dict[str, object]] = {}
        self.unrecorded_notes = unrecorded
        #: why this session's recording wrote no cassette (set by ``save``): an error of the case
        self.unrecorded: str | None = None
        self._lock = threading.RLock()
        self._loaded = False
        self._cassette: Cassette | None = None
        self._load_error: CassetteError | None = None
        self._runs: dict[int, RunModelsImpl] = {}

    def for_run(self, run_index: int) -> RunModelsImpl:
        """The models of run ``run_index`` (0-based). No file access happens here."""
        run = RunModelsImpl(self, run_index)
        with self._lock:
            self._runs[run_index] = run
        return run

    @property
    def notes(self) -> list[str]:
        """Divergence notes of every run so far, without duplicates, in run order."""
        with self._lock:
            runs = [self._runs[i] for i in sorted(self._runs)]
        return list(dict.fromkeys(note for run in runs for note in run.notes))

    @property
    def shown_path(self) -> str:
        """The cassette's path as messages show it: relative to the project when inside it."""
        return relative_path(self.path, self.root) or str(self.path)

    def rules(self) -> tuple[MatchRule, ...]:
        """The matching rules of this case's requests: the ini's, then the cassette's ``match:``
        (in mode ``all`` the block of the file being replaced, which the new file keeps)."""
        return self.ini_rules + tuple(self._carried_match())

    def _carried_match(self) -> list[MatchRule]:
        with self._lock:
            if self.mode != "all":
                return self._cassette.match if self._loaded and self._cassette is not None else []
            if not self._loaded:  # the file is replaced, never replayed: only its rules are read
                try:
                    old = load_cassette(self.path, root=self.root, size_limit=self.size_limit)
                except FileNotFoundError:
                    old = None
                except CassetteError as exc:
                    if ": match[" in str(exc):  # a rule the user wrote is never dropped in silence
                        raise
                    old = None
                except OSError:
                    old = None
                self._cassette, self._loaded = old, True
            return self._cassette.match if self._cassette is not None else []

    def live_model(self, agent_name: str) -> Model:
        """A provider-backed model for ``agent_name`` (recording and live mode)."""
        if self._live is None:
            raise CassetteError(
                f"{self.shown_path}: record mode {self.mode!r} needs to call a model provider to record this "
                "cassette, but no live model is available (install pytest-connic[live])"
            )
        return self._live(agent_name)

    def plan(self, run_index: int) -> Plan:
        """Replay or record run ``run_index``, as the mode and the cassette on disk say."""
        if self.mode == "all":
            return Plan("record")
        cassette = self._load()
        if cassette is None:
            if self.mode in REPLAY_ONLY:
                raise CassetteError(
                    f"no cassette for this case: expected {self.shown_path}; record one with "
                    "--connic-record-mode=once (needs provider credentials) or write it by hand "
                    f"(docs/models.md){self._why_missing()}"
                )
            return Plan("record")
        count = len(cassette.runs)
        if self.mode == "new_runs" and run_index >= count:
            return Plan("record")
        position = run_index % count
        return Plan("replay", cassette.runs[position], position, run_index // count)

    @property
    def replayed(self) -> tuple[int, int] | None:
        """``(runs replayed, runs the cassette holds)`` (None: no run replayed the cassette)."""
        with self._lock:
            replayed = sum(1 for r in self._runs.values() if r._plan is not None and r._plan.kind == "replay")
            if not replayed or self._cassette is None:
                return None
            return replayed, len(self._cassette.runs)

    def _why_missing(self) -> str:
        """Why the last recording session wrote no cassette here, when it said so."""
        notes = self.unrecorded_notes
        why = notes.why(str(self.path)) if notes is not None else None
        return f"; the last recording session wrote none: {why}" if why else ""

    def _load(self) -> Cassette | None:
        with self._lock:
            if not self._loaded:
                try:
                    self._cassette = load_cassette(self.path, root=self.root, size_limit=self.size_limit)
                except FileNotFoundError:
                    self._cassette = None
                    self._load_error = self._legacy_error()
                except CassetteError as exc:
                    self._load_error = exc
                except OSError as exc:  # a directory, no permission, ...
                    self._load_error = CassetteError(f"{self.shown_path}: cannot read the cassette: {exc.strerror}")
                self._loaded = True
                note = undigested_note(self._cassette, self.shown_path) if self._cassette is not None else None
                if note is not None and self.warn is not None and self.mode != "digests":
                    # a notice, never the run's error: with -W error it is dropped, not raised mid-run
                    with contextlib.suppress(Warning):
                        self.warn(note, Path(self.shown_path))
            if self._load_error is not None:
                raise CassetteError(str(self._load_error))
            return self._cassette

    def _legacy_error(self) -> CassetteError | None:
        """A cassette under the name an older version gave this case (one it could share with
        other cases): never read as this case's, but named, with how to rename it."""
        legacy = legacy_cassette_path(self.path)
        if legacy is None or not os.path.lexists(legacy) or legacy.name in self.taken():
            return None
        return CassetteError(
            f"{legacy}: this cassette has the file name older versions of pytest-connic gave this case "
            f"(a name distinct cases could share), so it is not read as this case's; the case's "
            f"cassette is now {self.path.name!r}: if the file holds this case's recording, rename it "
            f"(git mv {shlex.quote(str(legacy))} {shlex.quote(str(self.path))}); otherwise record a new "
            "one with --connic-record-mode=all (docs/models.md, \"Where cassettes live\")"
        )

    def save(self, *, interrupted: str | None = None) -> Path | None:
        """Write the recorded runs (ordered by run index); None when nothing was recorded.

        ``new_runs`` appends to the runs the file had; ``once`` and ``all`` write only
        the recorded runs. A recording that is not complete (a run whose model call or outside
        call failed for a reason no replay can give back, or ``interrupted``: the session was
        stopped) writes nothing: ``unrecorded`` says why, and so will the next replay's "no
        cassette" message. Secrets are masked with the masker plus the secret-looking
        environment values of this moment.
        """
        with self._lock:
            if self.mode == "digests":
                return self._save_digests()
            recording = [r for i, r in sorted(self._runs.items()) if r.recording]
            if recording and self._incomplete(recording, interrupted):
                return None
            recorded = [r for r in recording if not r.broken]
            if not recorded:
                return None
            runs = list(self._cassette.runs) if self.mode == "new_runs" and self._cassette else []
            runs += [r.to_cassette_run() for r in recorded]
            masker = Masker(self.masker.values | secret_values_from_env())
            written = Cassette(runs, match=self._carried_match())
            text = dump_cassette_data(masker.data(cassette_to_data(written)))
            # what would be read back: a secret that masking could not reach (a number, a form
            # the YAML writer escapes) is refused, never written
            found = secret_field(yaml.safe_load(text), masker)
            if found is not None:
                raise CassetteError(
                    f"{self.shown_path}: {found}: the recording holds a secret (a value of a secret-looking "
                    "environment variable or of the --connic-env file) that masking could not remove; "
                    "the cassette was not written (docs/models.md, \"Secrets\")"
                )
            if not self._written(text):
                return None
            if self.unrecorded_notes is not None:
                self.unrecorded_notes.forget(str(self.path))
            return self.path

    def _incomplete(self, recording: list[RunModelsImpl], interrupted: str | None) -> bool:
        """Whether the recording misses something (then ``unrecorded`` says what and how to fix it)."""
        broken = [r for r in recording if r.broken]
        if broken:
            run = broken[0]
            cause = f"run {run.index + 1}: {run.why_broken or 'a call failed while recording'}"
        elif interrupted:
            cause = f"the session was {interrupted} before the case's runs finished"
        else:
            return False
        kept = "the cassette already there was left as it was" if self.path.exists() else "no cassette was written"
        self.unrecorded = (
            f"{self.shown_path}: the recording is incomplete, so {kept} (a cassette without that answer "
            f"would not replay): {cause}; fix the cause, then record again (--connic-record-mode={self.mode}; "
            "docs/models.md, \"A recording never fails in silence\")"
        )
        if self.unrecorded_notes is not None:
            self.unrecorded_notes.remember(str(self.path), f"{cause} (--connic-record-mode={self.mode})")
        return True

    def _save_digests(self) -> Path | None:
        """``digests`` mode: the cassette's own text with the digests of this replay's requests set on
        the turns whose ``request`` was missing or stale (models/rewrite.py says what is kept);
        None when every turn's digests were current."""
        if not self.refreshed or self._cassette is None:
            return None
        from pytest_connic.models.rewrite import refresh_digests

        data = read_regular_file(self.path, root=self.root, size_limit=self.size_limit, what="cassette",
                                 setting="connic_cassette_size_limit", error=CassetteError)
        text = refresh_digests(data.decode("utf-8"), self._cassette, self.refreshed, self.shown_path)
        return self.path if self._written(text) else None

    def _written(self, text: str) -> bool:
        """Write the cassette; a file system that refuses (a full disk, no permission) is the case's
        error in one located line (``unrecorded``), never a traceback."""
        try:
            write_text_atomic(self.path, text)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            self.unrecorded = (f"{self.shown_path}: the cassette could not be written ({reason}); the file "
                               "already there, if any, was left as it was")
            return False
        return True

    def refresh(self, turn: Turn, fingerprint: dict[str, object]) -> None:
        """``digests`` mode: remember the ``request`` section of the request that ``turn``
        answered, when the turn has none or another one."""
        with self._lock:
            if turn.request != fingerprint:
                turn.request = fingerprint
                self.refreshed[id(turn)] = fingerprint
