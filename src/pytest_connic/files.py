"""Files the plugin reads and writes: regular files checked before they are opened, and
writes that are whole or nothing, with the umask's mode.

Opening a named pipe (FIFO) for reading blocks until a writer comes (``mkfifo h.sqlite`` would
hang a session forever); a device (``/dev/zero``) never ends. Every file the plugin opens for
reading (the history, merge shards, env files, API spec files; cassettes have their own bounded
reader in ``models/cassette.py``) goes through :func:`refuse_irregular` first: what is not a
regular file is refused with a message that says what it is. A path that does not exist passes
(the caller says what a missing file means).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pytest_connic.errors import ConnicError


class IrregularFileError(ConnicError):
    """A path the plugin would read is a FIFO, a device, a socket or a directory."""


def file_kind(mode: int) -> str | None:
    """What a file of ``mode`` is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def refuse_irregular(path: Path | str, what: str) -> None:
    """Raise :class:`IrregularFileError` when ``path`` exists and is not a regular file (links
    followed); a missing path, or one that cannot be examined, is left to the caller's open."""
    try:
        info = os.stat(path)
    except OSError:
        return
    kind = file_kind(info.st_mode)
    if kind is not None:
        raise IrregularFileError(f"{path}: the {what} is {kind}; only a regular file is read")


def read_bounded(path: Path, what: str, limit: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them (checked before the
    file is opened and on the descriptor opened, which never blocks on a FIFO swapped in between);
    ``IrregularFileError`` for anything else or anything longer, ``OSError`` as ``open`` raises."""
    refuse_irregular(path, what)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise IrregularFileError(f"{path}: the {what} is {kind}; only a regular file is read")
        chunks, size = [], 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise IrregularFileError(f"{path}: the {what} is more than {limit} bytes, the most that is read")
    finally:
        os.close(fd)
    return b"".join(chunks)


def process_umask() -> int:
    """The process's umask: from ``/proc/self/status`` where there is one (reading it by setting
    it would change it for every thread for a moment), else by setting it and setting it back."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_file(path: Path, text: str, *, follow: bool = True) -> None:
    """Write ``text`` to ``path`` whole or not at all: into a new file beside it, then renamed over
    it, with the mode the process's umask gives a new file (``mkstemp`` alone gives 0600).

    A link at ``path`` is followed when ``follow`` (a path the user named), else replaced (a file
    inside a report folder: a link planted there never leads a write outside it). A FIFO or a
    device at ``path`` (``/dev/stdout``) is written to directly. Text UTF-8 cannot hold (a lone
    surrogate) is written as its ``\\udcff`` escape, which a JSON reader reads back as the same
    string (``errors="backslashreplace"``).
    """
    import contextlib
    import tempfile

    if follow and os.path.islink(path):
        path = Path(os.path.realpath(path))
    try:
        existing: int | None = os.lstat(path).st_mode
    except OSError:
        existing = None
    if existing is not None and not stat.S_ISREG(existing) and not stat.S_ISLNK(existing) \
            and not stat.S_ISDIR(existing):
        _write_special(path, text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="\n") as handle:
            handle.write(text)
        os.chmod(tmp, 0o666 & ~process_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _write_special(path: Path, text: str) -> None:
    """Write to a FIFO or a device (``/dev/stdout``) directly. Opened without blocking: a FIFO no
    process reads is refused at once (``ENXIO``) instead of waiting for a reader for ever."""
    import errno

    nonblock = getattr(os, "O_NONBLOCK", 0)  # not on Windows, which has no FIFOs of this kind
    try:
        fd = os.open(path, os.O_WRONLY | nonblock | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "a named pipe (FIFO) that no process reads; nothing was written",
                          str(path)) from None
        raise
    if nonblock:
        os.set_blocking(fd, True)  # a reader is there: the text is written whole
    with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="\n") as stream:
        stream.write(text)
