"""Shards' ``--connic-json`` reports back into case outcomes, so that a merge renders the same
reports (JSON, HTML, JUnit, coverage) with the same builders as a single run (docs/ci.md)."""

from __future__ import annotations

import glob
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_connic.errors import ConnicError
from pytest_connic.files import IrregularFileError, read_bounded
from pytest_connic.jsonsafe import JsonBoundsError, load_bounded
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.serialize import outcome_from_dict

#: the top-level keys of a report a merge rebuilds; anything else (an A/B section) is not merged
KNOWN_KEYS = frozenset({"status", "test_run_id", "deployment_id", "environment_id", "cases", "summary"})
#: the largest shard read, and the deepest nesting: a report of a real session is far below both
MAX_BYTES = 256 << 20
MAX_DEPTH = 200


class MergeError(ConnicError):
    """A shard report that cannot be merged (missing, not a report, a case in two shards)."""


@dataclass
class Shards:
    """The cases of every shard, in the order the shards were given."""

    outcomes: list[CaseOutcome] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    environment_id: str | None = None
    #: what the merge leaves out, one line each (shown at the start of the session)
    notes: list[str] = field(default_factory=list)
    #: the shard each case came from, by node id
    sources: dict[str, Path] = field(default_factory=dict)

    def foreign(self, root: Path) -> list[tuple[Path, int, str]]:
        """The shards holding cases whose suite file is not in the checkout at ``root`` (pytest's
        root dir, which node ids are relative to): ``(shard, how many, the first such node id)``."""
        found: dict[Path, list[str]] = {}
        suites: dict[str, bool] = {}
        for outcome in self.outcomes:
            suite = outcome.nodeid.partition("::")[0]
            if suite not in suites:
                suites[suite] = (root / suite).is_file()
            if not suites[suite]:
                found.setdefault(self.sources[outcome.nodeid], []).append(outcome.nodeid)
        return [(shard, len(nodeids), nodeids[0]) for shard, nodeids in found.items()]


def shard_files(patterns: Iterable[str], base: Path) -> list[Path]:
    """Every file the patterns name (a path, or a glob expanded here: CI shells and Windows leave
    quoted globs alone), relative to ``base``, each once, in sorted order per pattern."""
    found: list[Path] = []
    for pattern in patterns:
        full = pattern if Path(pattern).is_absolute() else str(base / pattern)
        matches = sorted(glob.glob(full)) if glob.has_magic(pattern) else [full]
        if not matches:
            raise MergeError(f"--connic-merge {pattern}: no file matches")
        for match in matches:
            path = Path(match)
            if path not in found:
                found.append(path)
    return found


def load_shards(paths: Iterable[Path]) -> Shards:
    """Read the reports; every case once across the shards, one environment for all."""
    shards = Shards()
    seen: dict[str, Path] = {}
    environments: dict[str | None, Path] = {}
    for path in paths:
        report = _read(path)
        shards.files.append(path)
        environments.setdefault(report.get("environment_id"), path)
        extra = sorted(set(report) - KNOWN_KEYS)
        if extra:
            shards.notes.append(f"{path}: not merged: {', '.join(extra)} (only the cases are)")
        for index, case in enumerate(report["cases"]):
            outcome = _outcome(path, index, case)
            if outcome.nodeid in seen:
                raise MergeError(f"{path}: case {outcome.nodeid} is also in {seen[outcome.nodeid]}: "
                                 "shards must not overlap (the same --splits for every shard)")
            seen[outcome.nodeid] = path
            shards.sources[outcome.nodeid] = path
            shards.outcomes.append(outcome)
    if len(environments) > 1:
        names = ", ".join(f"{env!r} ({p})" for env, p in environments.items())
        raise MergeError(f"the shards ran in different environments (--connic-env): {names}")
    shards.environment_id = next(iter(environments), None)
    return shards


def _read(path: Path) -> dict[str, Any]:
    """A shard's report: a regular file of at most ``MAX_BYTES``, JSON nested at most ``MAX_DEPTH``
    deep, a mapping with a ``cases`` list of mappings (each case is checked in :func:`_outcome`)."""
    try:
        data = load_bounded(read_bounded(path, "shard report", MAX_BYTES), max_depth=MAX_DEPTH)
    except FileNotFoundError:
        raise MergeError(f"{path}: no such file") from None
    except IrregularFileError as exc:
        raise MergeError(str(exc)) from None
    except OSError as exc:
        raise MergeError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    except JsonBoundsError as exc:
        raise MergeError(f"{path}: not a --connic-json report: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise MergeError(f"{path}: not a --connic-json report (no \"cases\" list)")
    return data


#: a case entry's keys a merge needs, with the JSON types each must have
_CASE_TYPES: dict[str, tuple[type, ...]] = {
    "nodeid": (str,), "suite": (str,), "line": (int,), "agent_name": (str,), "test_name": (str,),
    "runs": (int,), "success_threshold": (int, float), "runs_detail": (list, type(None)),
}


def _outcome(path: Path, index: int, case: Any) -> CaseOutcome:
    """A case entry of the JSON report (``case_entry``: the outcome's keys, its runs under
    ``runs_detail``) as the outcome it was written from, checked to render as a single run's does."""
    where = f"{path}: cases[{index}]"
    _check_types(where, case, _CASE_TYPES)
    missing = [key for key, kinds in _CASE_TYPES.items() if key not in case and type(None) not in kinds]
    if missing:
        raise MergeError(f"{where}: not a case of a --connic-json report ({', '.join(map(repr, missing))} missing)")
    for number, run in enumerate(case.get("runs_detail") or []):
        _check_types(f"{where}.runs_detail[{number}]", run, _RUN_TYPES)
        if not all(isinstance(f, str) for f in run.get("failures") or []):
            raise MergeError(f"{where}.runs_detail[{number}].failures: not a --connic-json report (not a list of strings)")
    if "::" not in case["nodeid"] or case["runs"] < 0 or case["line"] < 0:
        raise MergeError(f"{where}: not a case of a --connic-json report (node id, line or runs out of range)")
    try:
        outcome = outcome_from_dict({**case, "records": case.get("runs_detail") or []})
        _renders(outcome)
    except Exception as exc:  # noqa: BLE001 - whatever a malformed entry breaks, it is this entry's
        raise MergeError(f"{where}: not a case of a --connic-json report ({type(exc).__name__}: {exc})") from None
    return outcome


_JSON_NAMES = {str: "a string", int: "an integer", float: "a number", list: "a list", dict: "an object",
               bool: "true or false", type(None): "null"}
_NUMBER = (int, float)
_TEXT = (str, type(None))
#: a run's keys (``runs_detail``) and the JSON types each may have
_RUN_TYPES: dict[str, tuple[type, ...]] = {
    "run_id": (str,), "agent_name": (str,), "index": (int,), "status": (str,), "error": _TEXT,
    "run_context": (dict, type(None)), "duration_ms": _NUMBER, "failures": (list, type(None)),
    "infrastructure_error": _TEXT, "skipped": (bool, type(None)), "tool_calls": (list, type(None)),
    "model_turns": (list, type(None)), "triggers": (list, type(None)), "guardrails": (list, type(None)),
    "approvals": (list, type(None)), "outbound": (list, type(None)), "events": (list, type(None)),
}


def _check_types(where: str, entry: object, types: dict[str, tuple[type, ...]]) -> None:
    """Each key of ``types`` that ``entry`` has holds one of its JSON types (a bool is no number)."""
    if not isinstance(entry, dict):
        raise MergeError(f"{where}: not an entry of a --connic-json report (a {type(entry).__name__}, "
                         "not an object)")
    for key, kinds in types.items():
        if key not in entry:
            continue
        value = entry[key]
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            raise MergeError(f"{where}.{key}: not a --connic-json report ({value!r} is not "
                             f"{' or '.join(_JSON_NAMES[k] for k in kinds)})")


def _renders(outcome: CaseOutcome) -> None:
    """Render ``outcome`` as every merged report will (JSON, JUnit properties, failure text), so
    a malformed entry (a run whose fields have the wrong types) fails here, not after the merge."""
    from pytest_connic.reports.failure import failure_text
    from pytest_connic.reports.json_report import case_entry, report_text
    from pytest_connic.reports.junit import junit_properties
    from pytest_connic.secrets import Masker

    masker = Masker()
    report_text({"case": case_entry(outcome, masker=masker)})
    junit_properties(outcome)
    failure_text(outcome, masker)
