"""Where an exception of user code comes from, in words: ``tools/t.py:3: ModuleNotFoundError: ...``.

Used for what user code raises outside a run's own error handling (a module that fails to import,
a ``BaseException`` that escapes a case), so the message names the user's file and line, never a
frame of pytest-connic, and survives values whose ``__str__`` raises.
"""

from __future__ import annotations

import traceback
from pathlib import Path

_MAX = 500


def relative(root: Path, path: Path) -> str:
    """``path`` as messages name it: relative to the project ``root`` (POSIX), else as it is."""
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def safe_text(value: object) -> str:
    """``str(value)``, or a placeholder naming its type when ``__str__`` raises (or returns no str)."""
    try:
        text = str(value)
    except BaseException:  # noqa: BLE001 -- an unprintable value must not end the report
        return f"<unprintable {type(value).__name__} object>"
    if not isinstance(text, str):  # pragma: no cover - str() guarantees it, a subclass may not
        return f"<unprintable {type(value).__name__} object>"
    return text if len(text) <= _MAX else text[:_MAX] + f"... ({len(text) - _MAX} characters cut)"


def exception_text(exc: BaseException) -> str:
    """``Type: message`` (``Type`` alone for an empty message), safe for any exception."""
    message = safe_text(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def user_location(exc: BaseException, root: Path) -> str | None:
    """``tools/t.py:3``: the innermost frame of ``exc``'s traceback inside ``root`` (the project),
    relative to it; None when no frame is there."""
    try:
        frames = traceback.extract_tb(exc.__traceback__)
    except Exception:  # noqa: BLE001 -- a broken traceback only loses the location  # pragma: no cover
        return None
    base = root.resolve()
    for frame in reversed(frames):
        try:
            path = Path(frame.filename).resolve()
        except (OSError, ValueError):  # pragma: no cover
            continue
        if path.is_relative_to(base) and "site-packages" not in path.parts:
            return f"{path.relative_to(base).as_posix()}:{frame.lineno}"
    return None


def located(exc: BaseException, root: Path, fallback: str | None = None) -> str:
    """``<where>: <Type>: <message>``, where is the user's frame (or ``fallback``)."""
    where = user_location(exc, root) or fallback
    return f"{where}: {exception_text(exc)}" if where else exception_text(exc)
