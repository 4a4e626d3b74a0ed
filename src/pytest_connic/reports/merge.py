"""Shards' ``--connic-json`` reports back into case outcomes, so that a merge renders the same
reports (JSON, HTML, JUnit, coverage) with the same builders as a single run (docs/ci.md)."""

from __future__ import annotations

import glob
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_connic.errors import ConnicError
from pytest_connic.records.run import CaseOutcome
from pytest_connic.records.serialize import outcome_from_dict

#: the top-level keys of a report a merge rebuilds; anything else (an A/B section) is not merged
KNOWN_KEYS = frozenset({"status", "test_run_id", "deployment_id", "environment_id", "cases", "summary"})


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
            shards.outcomes.append(outcome)
    if len(environments) > 1:
        names = ", ".join(f"{env!r} ({p})" for env, p in environments.items())
        raise MergeError(f"the shards ran in different environments (--connic-env): {names}")
    shards.environment_id = next(iter(environments), None)
    return shards


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise MergeError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise MergeError(f"{path}: not a --connic-json report: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise MergeError(f"{path}: not a --connic-json report (no \"cases\" list)")
    return data


def _outcome(path: Path, index: int, case: Any) -> CaseOutcome:
    """A case entry of the JSON report (``case_entry``: the outcome's keys, its runs under
    ``runs_detail``) as the outcome it was written from."""
    try:
        return outcome_from_dict({**case, "records": case.get("runs_detail") or []})
    except (KeyError, TypeError, AttributeError) as exc:
        raise MergeError(f"{path}: cases[{index}]: not a case of a --connic-json report ({exc!r} missing "
                         "or malformed)") from None
