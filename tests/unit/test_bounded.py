"""``project/bounded.py``: the project's import in pytest's process, bounded and interruptible."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pytest_connic.project.bounded import ImportHung, ImportStopped, load_bounded


def _stuck(root: Path, release: threading.Event) -> object:
    """Executes a project file that waits (as a hanging import would) until ``release``."""
    path = root / "tools" / "slow.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x = 1\nrelease.wait(30)\n", "utf-8")
    exec(compile(path.read_text("utf-8"), str(path), "exec"), {"release": release})  # noqa: S102
    return "loaded"


def test_a_hanging_import_names_where_it_is_stuck(tmp_path: Path) -> None:
    release = threading.Event()
    try:
        with pytest.raises(ImportHung, match=r"within 0.3s \(stuck at tools/slow.py:2\)"):
            load_bounded(lambda: _stuck(tmp_path, release), tmp_path, lambda: None, timeout_s=0.3)
    finally:
        release.set()


def test_a_stop_request_ends_the_wait(tmp_path: Path) -> None:
    release = threading.Event()
    try:
        with pytest.raises(ImportStopped, match="interrupted by SIGTERM"):
            load_bounded(lambda: _stuck(tmp_path, release), tmp_path, lambda: "interrupted by SIGTERM")
    finally:
        release.set()


def test_the_result_and_the_exception_of_the_load_cross(tmp_path: Path) -> None:
    assert load_bounded(lambda: 42, tmp_path, lambda: None) == 42
    with pytest.raises(KeyboardInterrupt):
        load_bounded(lambda: (_ for _ in ()).throw(KeyboardInterrupt()), tmp_path, lambda: None)
