"""A history file as a killed writer leaves it (tests of the history's recovery)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: a writer that starts a transaction big enough to spill into the file, and is killed before it commits
KILLED_WRITER = """
import os, signal, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size = 1")
conn.execute("BEGIN IMMEDIATE")
for _ in range(400):
    conn.execute("INSERT INTO sessions (started, command, selection) VALUES ('x', 'x', ?)", ("y" * 2000,))
os.kill(os.getpid(), signal.SIGKILL)
"""


def kill_a_writer(path: Path) -> None:
    """Leave the history at ``path`` mid-transaction, as a writer killed before its commit does
    (a hot journal beside it, which only a read-write connection may roll back)."""
    done = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path)], timeout=60, check=False)
    assert done.returncode == -9 and Path(f"{path}-journal").stat().st_size > 0
