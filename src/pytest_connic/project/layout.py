"""Where Connic projects and their suites are (https://connic.co/docs/v1/composer/testing).

Connic's rules: suites are ``tests/**/*.yaml`` (suffix case-insensitive, ``.yml``
is not a suite), any hidden path component is skipped, files are processed in
sorted path order, ``tests/`` itself must not be a symlink. Empty documents are
skipped, but that needs parsing and is the loader's business.
"""

from __future__ import annotations

import functools
from pathlib import Path

from pytest_connic.errors import ConnicError


class DiscoveryError(ConnicError):
    """The project's layout is refused (for example ``tests/`` is a symlink)."""


@functools.lru_cache(maxsize=256)
def find_project_root(directory: Path) -> Path | None:
    """The nearest directory at or above ``directory`` that holds ``agents/``."""
    for candidate in (directory, *directory.parents):
        if (candidate / "agents").is_dir():
            return candidate
    return None


def suite_root(path: Path) -> Path | None:
    """The project root when ``path`` is a suite of a Connic project, else None.

    ``path`` must be absolute. A suite is a ``.yaml`` file (any case) under the
    project's ``tests/`` whose path below the project has no hidden component.
    """
    if path.suffix.lower() != ".yaml":
        return None
    for parent in path.parents:
        if parent.name == "tests" and (parent.parent / "agents").is_dir():
            root = parent.parent
            rel = path.relative_to(root)
            if any(part.startswith(".") for part in rel.parts):
                return None
            return root
    return None


def discover_suites(project_root: Path) -> list[Path]:
    """Every suite file of a project, in Connic's order (sorted paths)."""
    tests_dir = project_root / "tests"
    if tests_dir.is_symlink():
        raise DiscoveryError(f"Symbolic links are not allowed: {tests_dir}")
    if not tests_dir.is_dir():
        return []
    found = []
    for path in sorted(tests_dir.rglob("*")):
        rel = path.relative_to(project_root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if path.is_file() and path.suffix.lower() == ".yaml":
            found.append(path)
    return found

