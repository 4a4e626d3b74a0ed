"""The traceback of an exception raised by user code, as plain data that crosses processes.

User code runs in worker processes (``execution/isolation/``): a traceback object does not pickle,
and an exception loses its ``__cause__`` / ``__context__`` when it does. So the worker captures
what a report needs, frame by frame: file, line, function name, the function's source up to the
failing line, and the ``repr`` of its locals (bounded), for every exception of the chain. The same
capture serves in-process calls (``--connic-isolation=none``), so both read alike.

The data (a :data:`TracebackData` dict, JSON-safe) rides on the exception
(:func:`attach` / :func:`traceback_of`) and then in the run record; ``reports/`` render it as text
(:func:`traceback_text`), ``plugin/longrepr.py`` as pytest's own traceback entries. Frames of
pytest-connic, of the SDK, of pytest and of asyncio's machinery are marked ``hidden``: reports leave
them out as pytest leaves out its own frames, ``--full-trace`` shows them.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import linecache
import os
import re
import reprlib
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import CodeType, TracebackType
from typing import Any, TypeVar

#: {"chain": [{"type", "text", "frames": [frame...], "relation"}...]} (the first cause first);
#: frame = {"file", "line", "name", "first", "source": [lines], "locals": {name: repr}, "hidden"}
TracebackData = dict[str, Any]
_E = TypeVar("_E", bound=BaseException)

_ATTR = "_connic_traceback"
_MAX_FRAMES = 40  #: per exception: the innermost ones are kept
_MAX_CHAIN = 5
_MAX_SOURCE = 30  #: source lines shown before the failing line
_MAX_LOCALS = 30
_MAX_TEXT = 500
_REPR = reprlib.Repr()
_REPR.maxstring = 160
_REPR.maxother = 160
_REPR.maxlevel = 3
CAUSE = "The above exception was the direct cause of the following exception:"
CONTEXT = "During handling of the above exception, another exception occurred:"


def _hidden_dirs() -> tuple[str, ...]:
    """Folders whose frames are not the user's: pytest-connic, the SDK, pytest, pluggy, asyncio, importlib."""
    dirs = [Path(__file__).parent]
    for name in ("connic", "_pytest", "pluggy", "asyncio", "concurrent", "importlib"):
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None)
        if file:
            dirs.append(Path(file).parent)
    return tuple(str(d) + os.sep for d in dirs)


def _is_hidden(filename: str, local_names: Mapping[str, object], hidden: tuple[str, ...]) -> bool:
    if local_names.get("__tracebackhide__") or filename.startswith("<frozen "):  # importlib's own frames
        return True
    base = os.path.basename(filename)
    if base in ("threading.py", "contextvars.py", "functools.py") and "site-packages" not in filename:
        return True
    return filename.startswith(hidden)


def _safe_repr(value: object) -> str:
    try:
        return _REPR.repr(value)
    except BaseException:  # noqa: BLE001 -- a broken __repr__ must not cost the traceback
        return f"<unreprable {type(value).__name__} object>"


def _source(code: CodeType, line: int) -> tuple[int, list[str]]:
    """(first line number, the function's lines up to ``line``); (line, []) when unreadable."""
    try:
        if code.co_name == "<module>":  # a module's code: the file up to the line (inspect gives its first block)
            lines, first = linecache.getlines(code.co_filename), 1
        else:
            lines, first = inspect.getsourcelines(code)
    except (OSError, TypeError, IndexError):
        return line, []
    if not lines:
        return line, []
    first = max(first, 1)
    upto = [ln.rstrip("\n") for ln in lines[: line - first + 1]]
    if len(upto) > _MAX_SOURCE:
        cut = len(upto) - _MAX_SOURCE
        return first + cut, upto[cut:]
    return first, upto


def _frames(tb: TracebackType | None, hidden: tuple[str, ...]) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    while tb is not None:
        frame, line = tb.tb_frame, tb.tb_lineno
        try:
            local_vars = dict(frame.f_locals)
        except Exception:  # noqa: BLE001  # pragma: no cover - f_locals of an odd frame
            local_vars = {}
        first, source = _source(frame.f_code, line)
        shown = {k: _safe_repr(v) for k, v in list(local_vars.items())[:_MAX_LOCALS] if not k.startswith("__")}
        frames.append({"file": frame.f_code.co_filename, "line": line, "name": frame.f_code.co_name,
                       "first": first, "source": source, "locals": shown,
                       "hidden": _is_hidden(frame.f_code.co_filename, local_vars, hidden)})
        tb = tb.tb_next
    return frames[-_MAX_FRAMES:]


def _text(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:  # noqa: BLE001
        text = f"<unprintable {type(exc).__name__} object>"
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + "..."


def capture(exc: BaseException) -> TracebackData:
    """``exc``'s traceback and its ``__cause__`` / ``__context__`` chain, as plain data (an
    exception that came from a worker, re-raised here by pytest-connic alone, gives the worker's)."""
    hidden = _hidden_dirs()
    carried = traceback_of(exc)
    if carried is not None and not any(not f["hidden"] for f in _frames(exc.__traceback__, hidden)):
        return carried  # raised here only by the machinery that brought it from a worker
    chain: list[dict[str, Any]] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(chain) < _MAX_CHAIN:
        seen.add(id(current))
        carried = traceback_of(current) if current is not exc else None
        if carried is not None:  # a cause that came from a worker: its own chain, whole
            chain[:0] = [dict(e) for e in carried["chain"]]
            break
        # each entry says how it follows from the one before it (its cause), as Python prints it
        entry = {"type": type(current).__name__, "text": _text(current),
                 "frames": _frames(current.__traceback__, hidden), "relation": None}
        chain.insert(0, entry)
        if current.__cause__ is not None:
            current, entry["relation"] = current.__cause__, CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, entry["relation"] = current.__context__, CONTEXT
        else:
            current = None
    return {"chain": chain}


def attach(exc: _E, data: TracebackData | None) -> _E:
    """``exc`` carrying ``data`` (an exception that takes no attributes simply carries none)."""
    if data is not None:
        with contextlib.suppress(Exception):  # __slots__ or a frozen exception: no frames then
            setattr(exc, _ATTR, data)
    return exc


def traceback_of(exc: BaseException) -> TracebackData | None:
    """The traceback data ``exc`` carries, or None."""
    data = getattr(exc, _ATTR, None)
    return data if isinstance(data, dict) and isinstance(data.get("chain"), list) else None


def user_frames(data: TracebackData, *, full: bool = False) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each exception of the chain with the frames a report shows (all of them with ``full``)."""
    return [(entry, [f for f in entry["frames"] if full or not f.get("hidden")]) for entry in data["chain"]]


def shown_path(file: str, root: Path | None) -> str:
    """``file`` as reports name it: relative to ``root`` (POSIX) when inside it."""
    if root is not None:
        try:
            return Path(file).resolve().relative_to(root.resolve()).as_posix()
        except (ValueError, OSError):
            pass
    return file


def innermost(data: TracebackData, root: Path | None = None) -> str | None:
    """``tools/x.py:42``: the innermost shown frame of the last exception of the chain."""
    for _, frames in reversed(user_frames(data)):
        if frames:
            return f"{shown_path(frames[-1]['file'], root)}:{frames[-1]['line']}"
    return None


def traceback_text(data: TracebackData, root: Path | None = None, *, full: bool = False,
                   name: Callable[[str], str] | None = None) -> str:
    """The traceback as Python prints it, the user's frames only (all of them with ``full``); files
    named relative to ``root`` (or by ``name``)."""
    out: list[str] = []
    for entry, frames in user_frames(data, full=full):
        if entry.get("relation") and out:
            out += ["", entry["relation"], ""]
        out.append("Traceback (most recent call last):")
        for frame in frames:
            file = name(frame["file"]) if name is not None else shown_path(frame["file"], root)
            out.append(f'  File "{file}", line {frame["line"]}, in {frame["name"]}')
            source = frame.get("source") or []
            if source:
                out.append("    " + source[-1].strip())
        text = entry.get("text") or ""
        out.append(f"{entry['type']}: {text}" if text else entry["type"])
    return "\n".join(out)


def masked(data: TracebackData, mask: Callable[[str], str]) -> TracebackData:
    """``data`` with every text passed through ``mask`` (a ``str -> str``: the session's masker)."""
    def frame(f: dict[str, Any]) -> dict[str, Any]:
        return {**f, "source": [mask(s) for s in f.get("source") or []],
                "locals": {k: mask(v) for k, v in (f.get("locals") or {}).items()}}
    out = {**data, "chain": [{**e, "text": mask(e.get("text") or ""), "frames": [frame(f) for f in e["frames"]]}
                             for e in data["chain"]]}
    if isinstance(data.get("text"), str):  # a record's text as Python prints it
        out["text"] = mask(data["text"])
    return out


_MAX_RECORD_TEXT = 8000


def for_record(exc: BaseException, root: Path | None, mask: Callable[[str], str], origin: str | None = None) -> TracebackData | None:
    """What a run record keeps of ``exc``'s traceback: the chain (masked), its text as Python prints
    it (bounded), ``where`` (``tools/x.py:42``, the innermost user frame) and ``origin`` (what raised,
    in words: ``builder build()``, ``input guardrail 'g'``); None without a user frame."""
    try:
        data = masked(capture(exc), mask)
    except Exception:  # noqa: BLE001  # pragma: no cover - a broken traceback only loses the frames
        return None
    if not any(frames for _, frames in user_frames(data)):  # no frame of the user: not their traceback
        return None
    record = _finished(data, root, origin)
    _remember(exc, record)
    return record


def _finished(data: TracebackData, root: Path | None, origin: str | None) -> TracebackData:
    text = traceback_text(data, root)
    if len(text) > _MAX_RECORD_TEXT:
        text = "...\n" + text[-_MAX_RECORD_TEXT:]
    record = {**data, "text": text, "where": innermost(data, root)}
    if origin:
        record["origin"] = origin
    return record


#: the tracebacks of the project's modules that failed to import in this process, by the module's
#: path as messages name it (``tools/t.py``); a case such a failure keeps from being set up finds
#: its traceback by the path its message names (``import_in``)
_IMPORTS: dict[str, TracebackData] = {}
_MAX_IMPORTS = 50


def _syntax_frame(exc: SyntaxError) -> dict[str, Any]:
    """The frame a syntax error names: its file and line (its traceback ends in importlib)."""
    line = int(exc.lineno or 1)
    source = [(exc.text or "").rstrip("\n")] if exc.text else []
    return {"file": str(exc.filename), "line": line, "name": "<module>", "first": line, "source": source,
            "locals": {}, "hidden": False}


def import_failure(exc: BaseException, root: Path, path: Path) -> TracebackData | None:
    """The traceback of ``path`` (a module of the project under ``root``) failing to import with
    ``exc``, remembered for the case it keeps from being set up (:func:`import_in`); None when no
    frame of the user's is in it. A syntax error ends at the line it names."""
    shown = shown_path(str(path), root)
    data: TracebackData | None
    if isinstance(exc, SyntaxError) and isinstance(exc.filename, str):
        data = capture(exc)
        data["chain"][-1]["text"] = str(exc.msg or "")[:_MAX_TEXT]
        data["chain"][-1]["frames"].append(_syntax_frame(exc))
        data = _finished(data, root, _IMPORTING + shown)
    else:
        data = for_record(exc, root, str, _IMPORTING + shown)
    if data is not None:
        _register(shown, data)
    return data


_IMPORTING = "importing "  #: the origin of an import failure's traceback: ``importing tools/t.py``


def _register(shown: str, data: TracebackData) -> None:
    _IMPORTS.pop(shown, None)
    _IMPORTS[shown] = data
    while len(_IMPORTS) > _MAX_IMPORTS:
        _IMPORTS.pop(next(iter(_IMPORTS)))


def _imported(data: TracebackData) -> str | None:
    """The module (``tools/t.py``) whose failed import ``data`` is the traceback of, or None."""
    origin = data.get("origin")
    return origin[len(_IMPORTING):] if isinstance(origin, str) and origin.startswith(_IMPORTING) else None


def import_traceback(exc: BaseException) -> TracebackData | None:
    """The traceback of a failed import that ``exc`` carries (:func:`attach`: a module of the
    project that failed to import in a worker process), or None."""
    data = traceback_of(exc)
    return data if data is not None and _imported(data) else None


def remember_import(data: TracebackData | None) -> None:
    """An import failure's traceback that crossed from a worker process (``execution/isolation/wire.py``),
    remembered as if the import had failed in this process: :func:`import_in` finds it by the
    path a message names, under process isolation as in-process."""
    shown = _imported(data) if data is not None else None
    if data is not None and shown:
        _register(shown, data)


def forget_imports() -> None:
    """Forget the import failures remembered so far (a new session starts in this process)."""
    _IMPORTS.clear()


def import_in(text: str) -> TracebackData | None:
    """The traceback of the latest failed import of a module that ``text`` names, or None."""
    for shown, data in reversed(_IMPORTS.items()):
        if re.search(rf"(?<![\w/.]){re.escape(shown)}(?![\w])", text):
            return data
    return None


class ImportCapture(io.StringIO):
    """A stream for what the SDK's loader prints while it imports ``path``: the loader prints a
    failed import's exception and goes on, so the exception it handles when it first prints is
    taken as that import's failure (:func:`import_failure`)."""

    def __init__(self, root: Path, path: Path) -> None:
        super().__init__()
        self.root, self.path, self.seen = root, path, False
        #: the import failure's traceback (:func:`import_failure`), once the loader printed it
        self.failure: TracebackData | None = None

    def write(self, text: str) -> int:
        raised = sys.exc_info()[1]
        if raised is not None and not self.seen:
            self.seen = True
            with contextlib.suppress(Exception):  # a traceback that cannot be read only loses its frames
                self.failure = import_failure(raised, self.root, self.path)
        return super().write(text)


def run_traceback(record: Any) -> tuple[str, TracebackData] | None:
    """(what raised, its traceback) of a run (a ``RunRecord``): the run's own error, else its first
    tool call that raised (children's runs included)."""
    if record.error_traceback:
        return str(record.error_traceback.get("origin") or "the run's error"), record.error_traceback
    for call in record.tool_calls:
        if call.traceback:
            what = f"{call.name}(...) (tool call #{call.seq + 1})"
            origin = call.traceback.get("origin")
            return (f"the {origin} of {what}" if origin else what), call.traceback
    for trigger in record.triggers:
        if trigger.child_run is not None:
            found = run_traceback(trigger.child_run)
            if found is not None:
                return found
    return None


def case_traceback(outcome: Any) -> tuple[str, TracebackData] | None:
    """The traceback a failed case (a ``CaseOutcome``) shows: its first failed run's (see
    :func:`run_traceback`), else the import that kept it from being set up."""
    for record in outcome.records:
        if not record.passed:
            found = run_traceback(record)
            if found is not None:
                return found
    setup = outcome.setup_traceback
    if setup:
        return str(setup.get("origin") or "the project's import"), setup
    return None


#: with ``--pdb`` (in-process user code), the live exceptions of the last few records, so the
#: debugger can stop in their frames; never kept otherwise (frames hold every local alive)
_LIVE: dict[str, BaseException] = {}
_KEEP = [False]
_MAX_LIVE = 20


def keep_live(on: bool) -> None:
    """Keep (or stop keeping) the live exceptions behind recorded tracebacks."""
    _KEEP[0] = on
    if not on:
        _LIVE.clear()


def _remember(exc: BaseException, data: TracebackData) -> None:
    if not _KEEP[0] or exc.__traceback__ is None:
        return
    token = f"live-{id(exc)}"
    _LIVE[token] = exc
    while len(_LIVE) > _MAX_LIVE:
        _LIVE.pop(next(iter(_LIVE)))
    data["live"] = token


def live_exception(data: TracebackData) -> BaseException | None:
    """The live exception behind ``data`` (``--pdb`` only), or None."""
    token = data.get("live")
    return _LIVE.get(token) if isinstance(token, str) else None
