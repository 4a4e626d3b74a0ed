"""How wide and in which encoding the plugin's tables are drawn: pytest's terminal, as the
results table (``plugin/outputs.py``) and the A/B table (``plugin/ab.py``) both need it."""

from __future__ import annotations

from typing import Any

import pytest


def table_width(config: pytest.Config) -> int | None:
    """The width the results table fits: pytest's terminal width (``COLUMNS``), except where pytest
    itself does not cut its short summary (on CI, with ``-vv``): there the table is drawn whole."""
    import os

    if config.get_verbosity() >= 2 or os.environ.get("CI") or os.environ.get("BUILD_NUMBER"):
        return None
    width: int = config.get_terminal_writer().fullwidth
    return width


def console_encoding(reporter: Any) -> str | None:
    """The encoding of the terminal pytest writes to (None: unknown), so that a console without
    box characters (``PYTHONIOENCODING=cp1252``) gets an ASCII table rather than escapes."""
    writer = getattr(reporter, "_tw", None)  # pytest has no public name for its output file
    encoding = getattr(getattr(writer, "_file", None), "encoding", None)
    return encoding if isinstance(encoding, str) else None
