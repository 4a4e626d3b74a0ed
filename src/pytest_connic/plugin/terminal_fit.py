"""How wide and in which encoding the plugin's tables are drawn: pytest's terminal, as the
results table (``plugin/outputs.py``) and the A/B table (``plugin/ab.py``) both need it; and the
ASCII its symbols become on a console that cannot print them (:func:`ascii_symbols`)."""

from __future__ import annotations

import pytest


def table_width(config: pytest.Config) -> int | None:
    """The width the results table fits: pytest's terminal width (``COLUMNS``), except where pytest
    itself does not cut its short summary (on CI, with ``-vv``): there the table is drawn whole."""
    import os

    if config.get_verbosity() >= 2 or os.environ.get("CI") or os.environ.get("BUILD_NUMBER"):
        return None
    width: int = config.get_terminal_writer().fullwidth
    return width


def write_lines(reporter: pytest.TerminalReporter, lines: list[str] | tuple[str, ...], **markup: bool) -> None:
    """The plugin's own lines of text (not tables), each folded at spaces to the terminal's width
    (:func:`table_width`; whole on CI and with ``-vv``, as pytest leaves its own lines there)."""
    from pytest_connic.reports.table import wrap

    width = table_width(reporter.config)
    for line in lines:
        for part in wrap(line, width):
            reporter.write_line(part, **markup)


def console_encoding(reporter: object) -> str | None:
    """The encoding of the terminal pytest writes to (None: unknown), so that a console without
    box characters (``PYTHONIOENCODING=cp1252``) gets an ASCII table rather than escapes."""
    from pytest_connic.plugin.pytest_private import console_encoding as encoding_of

    return encoding_of(reporter)


def ascii_symbols(config: pytest.Config) -> None:
    """On a console that cannot print the plugin's symbols (``PYTHONIOENCODING=cp1252``: ``✓ ✗ →``),
    everything pytest writes shows their ASCII fallbacks (``reports/table.py``) rather than
    ``\\u2713`` escapes: the terminal writer's ``write`` (which its ``line``, ``sep`` and every
    failure report go through) translates them. Other text is written as pytest writes it."""
    from pytest_connic.plugin.pytest_private import terminal_writer
    from pytest_connic.reports.table import symbol_fallbacks

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    writer = terminal_writer(reporter)
    table = symbol_fallbacks(console_encoding(reporter))
    if writer is None or not table or getattr(writer, "_connic_ascii", False):
        return
    write = writer.write

    def ascii_write(msg: str, **markup: bool) -> None:
        write(msg.translate(table), **markup)

    writer.write = ascii_write  # type: ignore[method-assign]
    writer._connic_ascii = True  # type: ignore[attr-defined]
