"""The coverage report as text: Connic's own rendering (``render_coverage``, what
``connic test --coverage`` prints below its banner) and pytest-connic's runtime section."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["render_coverage", "render_runtime_coverage"]


def render_coverage(report: Mapping[str, Any]) -> str:
    """The text ``connic test --coverage`` prints for ``report`` below its banner, without colours.

    A global ``error`` alone (Connic stops there); else "No agents found.", or the parse errors, or
    the table, uncovered tools and overall line. Control characters are escaped as Connic does.
    """
    if report.get("error"):
        return _escape(f"    ✗ {report['error']}") + "\n"
    rows = report["agents"]
    if not rows:
        return _escape("    ! No agents found.") + "\n"
    broken = [row for row in rows if row.get("parse_error")]
    if broken:
        details = "; ".join(f"{row['name']}: {row['parse_error']}" for row in broken)
        return _escape(f"    ✗ Test files failed to parse: {details}") + "\n"
    lines = _table(["Agent", "Type", "Tools covered", "Coverage"], [_table_row(row) for row in rows])
    gaps = [row for row in rows if row["has_tests"] and row["uncovered_tools"]]
    if gaps:
        lines += ["", _escape("  → Uncovered tools:")]
        lines += [_escape(f"    {row['name']}: {', '.join(row['uncovered_tools'])}") for row in gaps]
    plural = "s" if len(rows) != 1 else ""
    lines += ["", f"  Overall coverage: {report['overall']:.1f}%  ({len(rows)} agent{plural})", ""]
    return "\n".join(lines) + "\n"


def _table_row(row: Mapping[str, Any]) -> list[str]:
    """The four cells of one agent."""
    if not row["has_tests"]:
        tools_cell = "no tests"
    elif row["tools_total"] == 0:
        tools_cell = "—"
    else:
        tools_cell = f"{row['tools_covered']}/{row['tools_total']}"
    return [_escape(row["name"]), _escape(row["type"]), tools_cell, f"{row['percent']:5.1f}%"]


def _table(headers: list[str], rows: list[list[str]], indent: int = 4) -> list[str]:
    """A box-drawn table, columns as wide as their widest cell."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows)]
    pad = " " * indent

    def rule(left: str, joint: str, right: str) -> str:
        return pad + left + joint.join("─" * (width + 2) for width in widths) + right

    def line(cells: list[str]) -> str:
        return pad + "│ " + " │ ".join(c.ljust(w) for c, w in zip(cells, widths)) + " │"

    top, mid, bottom = rule("┌", "┬", "┐"), rule("├", "┼", "┤"), rule("└", "┴", "┘")
    return [top, line(headers), mid, *map(line, rows), bottom]


def _escape(text: str) -> str:
    """Connic's rendering of control characters (``\\x0a``), so nothing steers the terminal."""
    from pytest_connic.project.sdk import escape_terminal_text

    return escape_terminal_text(text)


def render_runtime_coverage(report: Mapping[str, Any]) -> str:
    """A short section on what the run called and which parameters assertions leave out ("" when
    ``report`` has no ``"pytest_connic"`` key)."""
    extra = report.get("pytest_connic")
    if not extra:
        return ""
    lines = [_escape("  → Runtime tool usage (pytest-connic):")]
    for agent in extra["agents"]:
        total = len(agent["tools"])
        used = total - len(agent["never_called"])
        line = f"    {agent['name']}: {used}/{total} tools called"
        if agent["never_called"]:
            line += f"; never called: {', '.join(agent['never_called'])}"
        lines.append(_escape(line))
        lines += [_escape(text) for text in _param_lines(agent)]
    return "\n".join(lines) + "\n"


def _param_lines(agent: Mapping[str, Any]) -> Iterator[str]:
    """Detail lines for tools whose parameters assertions leave out or misname."""
    for ref, entry in agent["tools"].items():
        if ref in agent["asserted_tools"] and entry["unasserted_params"]:
            yield f"      {ref}: parameters never asserted: {', '.join(entry['unasserted_params'])}"
        if entry["unknown_params"]:
            yield f"      {ref}: assertions name unknown parameters: {', '.join(entry['unknown_params'])}"
    if agent["unmatched_assertions"]:
        yield f"      assertions naming no tool of the agent: {', '.join(agent['unmatched_assertions'])}"
