"""The user's traceback in a case's failure report, as pytest shows a Python test's.

User code raised in a worker process (or in pytest's, with ``--connic-isolation=none``); the run
record holds that traceback as plain data (``usertb.for_record``). Here it becomes pytest's own
traceback entries (``ReprEntry``: source with the ``>`` marker, ``E`` lines, ``file:line``, locals
under ``-l``), so ``--tb=auto|long|short|native`` read as for any test, the chain of ``__cause__``
/ ``__context__`` reads as pytest prints it, and xdist carries it between processes like any
traceback. pytest-connic's, the SDK's and asyncio's frames are left out unless ``--full-trace``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_connic.plugin.pytest_private import (
    ReprEntry,
    ReprEntryNative,
    ReprFileLocation,
    ReprLocals,
    ReprTraceback,
)
from pytest_connic.usertb import TracebackData, case_traceback, traceback_text, user_frames

if TYPE_CHECKING:
    import pytest

Element = tuple[ReprTraceback, ReprFileLocation, str | None]
__all__ = ["Element", "TraceOptions", "case_traceback", "traceback_elements"]


@dataclass(frozen=True)
class TraceOptions:
    """How pytest was asked to show tracebacks."""

    style: str = "auto"  #: --tb
    showlocals: bool = False  #: -l
    full: bool = False  #: --full-trace

    @classmethod
    def of(cls, config: pytest.Config) -> TraceOptions:
        full = bool(config.getoption("fulltrace", False))
        style = "long" if full else str(config.getoption("tbstyle", "auto") or "auto")
        return cls(style, bool(config.getoption("showlocals", False)), full)


def shown(file: str) -> str:
    """``file`` as pytest names it: relative to the working directory when that is shorter."""
    try:
        rel = os.path.relpath(file)
    except ValueError:  # pragma: no cover - another drive on Windows
        return file
    return rel if len(rel) < len(file) else file


def _locals(frame: dict[str, Any]) -> ReprLocals:
    return ReprLocals([f"{name:<10} = {value}" for name, value in (frame.get("locals") or {}).items()])


def _entry(frame: dict[str, Any], style: str, error: list[str] | None, opts: TraceOptions) -> ReprEntry:
    source: list[str] = list(frame.get("source") or []) or ["???"]
    if style == "short":
        lines = ["    " + source[-1].strip()]
        message = f"in {frame['name']}"
    else:
        lines = ["    " + s for s in source[:-1]] + [">   " + source[-1]]
        message = error[0].split(":", 1)[0] if error else ""
    if error:
        lines += ["E   " + line for line in error]
    location = ReprFileLocation(shown(frame["file"]), int(frame["line"]), message)
    return ReprEntry(lines, None, _locals(frame) if opts.showlocals else None, location, style)  # type: ignore[arg-type]


def _error_lines(entry: dict[str, Any]) -> list[str]:
    text = entry.get("text") or ""
    head = f"{entry['type']}: {text}" if text else str(entry["type"])
    return head.splitlines() or [head]


def _element(entry: dict[str, Any], frames: list[dict[str, Any]], opts: TraceOptions) -> tuple[ReprTraceback, ReprFileLocation]:
    error = _error_lines(entry)
    entries = []
    for i, frame in enumerate(frames):
        style = opts.style
        if style == "auto":  # pytest's auto: the first and the last entry long, the rest short
            style = "long" if i in (0, len(frames) - 1) else "short"
        entries.append(_entry(frame, style, error if i == len(frames) - 1 else None, opts))
    last: dict[str, Any] = frames[-1] if frames else {"file": "?", "line": 0}
    crash = ReprFileLocation(shown(last["file"]), int(last["line"]), "\n".join(error))
    style = "short" if opts.style == "short" else "long"
    return ReprTraceback(entries, None, style), crash  # type: ignore[arg-type]


def traceback_elements(what: str, data: TracebackData, opts: TraceOptions) -> list[Element]:
    """pytest's chain elements for ``data``: one per exception, the first cause first; the first
    is announced by a line saying which call raised."""
    if opts.style == "native":
        text = traceback_text(data, None, full=opts.full, name=shown) + "\n"
        tb = ReprTraceback([ReprEntryNative([text])], None, "native")
        return [(tb, ReprFileLocation("", 0, what), None)]
    elements: list[Element] = []
    chain = [(e, f) for e, f in user_frames(data, full=opts.full) if f]
    for i, (entry, frames) in enumerate(chain):
        tb, crash = _element(entry, frames, opts)
        following = chain[i + 1][0].get("relation") if i + 1 < len(chain) else None
        elements.append((tb, crash, following))
    return elements

