"""Paths inside the files sandbox: normalised, relative, and never escaping the root.

A Connic file path is a relative, slash-separated path such as
``invoices/2026/acme.pdf``. Absolute paths, backslashes, empty, ``.`` or ``..``
segments are refused outright; what remains is resolved on disk (following
symlinks) and refused again if it lands outside the sandbox root.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pytest_connic.runtime.predefined.errors import PredefinedToolError

_DRIVE = re.compile(r"[A-Za-z]:([/\\]|$)")


def normalise(path: object, *, folder: bool = False) -> str:
    """Validate a user path; ``folder=True`` also accepts ``""`` (the root) and one trailing ``/``."""
    if not isinstance(path, str):
        raise PredefinedToolError(f"path must be a string, got {path!r}")
    text = path[:-1] if folder and path.endswith("/") and len(path) > 1 else path
    if text == "":
        if folder:
            return ""
        raise PredefinedToolError("path must not be empty")
    if text.startswith("/") or _DRIVE.match(text):
        raise PredefinedToolError(f"path {path!r} must be relative to the files root (no leading '/')")
    if "\\" in text or "\x00" in text:
        raise PredefinedToolError(f"path {path!r} contains a backslash or NUL character")
    if any(segment in ("", ".", "..") for segment in text.split("/")):
        raise PredefinedToolError(f"path {path!r} must not contain empty, '.' or '..' segments")
    return text


def parent_of(path: str) -> str:
    """The folder part of a normalised path (``""`` for the root)."""
    return path.rpartition("/")[0]


def is_under(path: str, folder: str) -> bool:
    """Whether ``path`` lies strictly inside ``folder`` (``""`` is the root)."""
    return folder == "" or path.startswith(folder + "/")


class Sandbox:
    """Maps normalised relative paths to real paths under ``root``."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = Path(os.path.realpath(root))

    def locate(self, path: str) -> Path:
        """The on-disk path for ``path``; refuses anything that resolves outside the root."""
        candidate = self.root / path if path else self.root
        real = Path(os.path.realpath(candidate))
        if real != self.root and self.root not in real.parents:
            raise PredefinedToolError(
                f"path {path!r} resolves outside the files root (through a symlink); refused"
            )
        return candidate

    def relative(self, disk_path: Path) -> str:
        """The sandbox path of a file found under the root."""
        return disk_path.relative_to(self.root).as_posix()

    def walk(self, folder: str) -> list[str]:
        """Every regular file below ``folder`` whose real location is inside the root."""
        start = self.locate(folder)
        if not start.is_dir():
            return []
        found = []
        for directory, _dirs, names in os.walk(start):
            for name in names:
                disk_path = Path(directory) / name
                real = Path(os.path.realpath(disk_path))
                if self.root in real.parents and real.is_file():
                    found.append(self.relative(disk_path))
        return sorted(found)

    def prune(self, folder: str) -> None:
        """Remove ``folder`` and its ancestors while empty (folders exist only with files)."""
        while folder:
            directory = self.root / folder
            if directory.is_symlink() or not directory.is_dir() or any(directory.iterdir()):
                return
            directory.rmdir()
            folder = parent_of(folder)
