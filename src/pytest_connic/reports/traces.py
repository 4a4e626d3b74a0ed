"""``--connic-traces DIR``: one JSON file per run, with the run record and its spans.

File names are ``<suite path>__<case>__run<index>.json``, reduced to a safe character set, unique
within a session, and always inside the directory. ``build_spans`` (re-exported here) derives
Connic's span list from a run record; see ``build_spans`` in :mod:`pytest_connic.records.run`.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from pytest_connic.files import write_text_file
from pytest_connic.jsonsafe import JsonObject, JsonValue, dumps, masked
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord, build_spans
from pytest_connic.reports.stats import sorted_outcomes
from pytest_connic.secrets import Masker

__all__ = ["build_spans", "safe_name_part", "trace_document", "trace_file_name", "write_traces"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)), *(f"LPT{i}" for i in range(1, 10))}
_PART_MAX = 60


def safe_name_part(text: str) -> str:
    """``text`` reduced to ``[A-Za-z0-9._-]`` (accents dropped, no ``..``, no leading dot), at most
    60 characters, never empty, never a reserved Windows device name."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    part = re.sub(r"\.{2,}", ".", _UNSAFE.sub("_", ascii_text)).strip("._") or "_"
    if len(part) > _PART_MAX:
        part = part[: _PART_MAX - 9] + "-" + _digest(text)
    if part.split(".")[0].upper() in _RESERVED:
        part = "_" + part
    return part


def trace_file_name(outcome: CaseOutcome, record: RunRecord) -> str:
    """``<suite path>__<case>__run<index>.json`` with both parts made safe for any file system."""
    parts = outcome.suite_path.removesuffix(".yaml").replace("\\", "/").split("/")
    suite = ".".join(p for p in parts if p not in ("", ".", ".."))
    return f"{safe_name_part(suite)}__{safe_name_part(outcome.case_name)}__run{record.index}.json"


def trace_document(outcome: CaseOutcome, record: RunRecord, *, masker: Masker) -> JsonObject:
    """What one trace file holds: where the run comes from, the run, and its spans."""
    return {
        "nodeid": masker.report_text(outcome.nodeid),
        "suite": outcome.suite_path,
        "line": outcome.line,
        "agent_name": outcome.agent_name,
        "test_name": masker.report_text(outcome.case_name),
        "run": masked(record.to_dict(), masker),
        "traces": list[JsonValue](build_spans(record, masker=masker)),
    }


def write_traces(directory: Path, outcomes: Iterable[CaseOutcome], *, masker: Masker) -> list[Path]:
    """Write one JSON file per run of every case into ``directory``; return the paths written.

    Names are unique within the call: when two cases reduce to the same name, the later one gets
    a short digest of its node id. Every path is checked to stay inside ``directory``, and each
    file is written anew and renamed into place, so a symbolic link already in ``directory`` is
    replaced, never followed.
    """
    directory.mkdir(parents=True, exist_ok=True)
    root = directory.resolve()
    written: list[Path] = []
    used: set[str] = set()
    for outcome in sorted_outcomes(outcomes):
        for record in outcome.records:
            name = trace_file_name(outcome, record)
            if name in used:
                name = name.removesuffix(".json") + f"-{_digest(outcome.nodeid)}.json"
            used.add(name)
            path = root / name
            if path.parent != root:  # cannot happen with the character set above; keep it that way
                raise ValueError(f"trace file name escapes {root}: {name!r}")
            # a new file renamed into place: a link already in the folder is replaced, not followed
            write_text_file(path, dumps(trace_document(outcome, record, masker=masker), indent=2) + "\n",
                            follow=False)
            written.append(path)
    return written


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
