"""A Connic project's inputs, which no report, summary or history is ever written over (docs/
reports.md "Where reports are written"): pure path checks, shared by the options' check at
configure (``plugin/outputguard.py``), the checks made when a file is written (the history's path,
``$GITHUB_STEP_SUMMARY``) and ``python -m pytest_connic compare``'s outputs."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

#: the folders of a project that hold its code and configuration (Connic's layout)
INPUT_FOLDERS = ("agents", "tools", "middleware", "hooks", "guardrails", "schemas")
#: files at a project's root that configure pytest (and so the session that reads them)
ROOT_FILES = frozenset({"pyproject.toml", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", ".env"})


def input_named(root: Path, cassettes: Path, path: Path, *, folder: bool) -> str | None:
    """What input of the project at ``root`` (a real path) the output ``path`` (a real path) would
    overwrite, in words, or None; ``cassettes``: the project's cassette folder (a real path)."""
    if not _inside(path, root):
        return None
    rel = path.relative_to(root)
    top = rel.parts[0] if rel.parts else ""
    if path == root:
        return "the project folder itself" if not folder else None
    if top in INPUT_FOLDERS:
        return f"a path in its {top}/ folder"
    if _inside(path, cassettes):
        return "a path in its cassette folder"
    if rel.name == "conftest.py" and not folder:
        return "a conftest.py (pytest imports it)"
    if top == "tests" and not folder:
        if path.suffix.lower() in (".yaml", ".yml"):
            return "a suite file under tests/ (Connic parses every tests/**/*.yaml as a suite)"
        if path.exists():
            return "a file of its tests/ folder"
    if len(rel.parts) == 1 and rel.name.startswith(".env."):
        return "an env file (--connic-env)"
    if len(rel.parts) == 1 and rel.name in ROOT_FILES and not folder:
        return f"its {rel.name}"
    return None


def refused_output(path: Path, roots: Iterable[Path], cassette_dir: str = "cassettes") -> str | None:
    """``path`` (links followed) as an input of one of the projects at ``roots``: ``"<what> of the
    project <root>"``, or None when it names no input."""
    real = Path(os.path.realpath(path))
    for root in roots:
        root = Path(os.path.realpath(root))
        what = input_named(root, Path(os.path.realpath(root / cassette_dir)), real, folder=False)
        if what is not None:
            return f"{what} of the project {root}"
    return None


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents
