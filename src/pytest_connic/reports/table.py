"""Box-drawn tables that fit the terminal: the results table's and the A/B section's.

Plain text only (no pytest, no colour). A table too wide for the terminal narrows its shrinkable
columns, hides its optional ones (and says which), and drops its indent. A narrowed column keeps
its rows distinct: when cutting the ends would make two different cells read the same, those
cells lose their middle instead (``knowledge-copil…refund for premium users``), so the end that
tells them apart stays. A console that cannot encode the box characters gets ASCII ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from wcwidth import wcswidth, wcwidth

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_BIDI = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: the table's box characters, and what an ASCII console gets instead
_ASCII_BOX = str.maketrans({"┌": "+", "┬": "+", "┐": "+", "├": "+", "┼": "+", "┤": "+", "└": "+", "┴": "+",
                            "┘": "+", "─": "-", "│": "|", "…": "~", "—": "-"})
#: a narrowed column is not cut below this (or its header's width, or all of a shorter cell)
TEST_COMFORT = 40


@dataclass(frozen=True)
class Column:
    """One column of a box-drawn table.

    ``shrink``: long cells are cut with an ellipsis when the table is narrowed (at most down to
    ``min_width``); ``drop``: 0 for a column that is always shown, otherwise the order in which
    optional columns are hidden when the terminal is too narrow (the highest first), while a
    shrinkable column would be narrower than ``comfort`` (or all of its longest cell).
    """

    header: str
    shrink: bool = False
    min_width: int = 12
    drop: int = 0
    comfort: int = TEST_COMFORT


def escape_text(text: str) -> str:
    """C0, DEL and C1 control characters as visible ``\\xNN`` (Connic's ``escape_terminal_text``)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def cell_text(text: str) -> str:
    """A table cell: control characters escaped, and the bidirectional controls too (they would
    reorder the rest of the row)."""
    return _BIDI.sub(lambda m: f"\\u{ord(m.group()):04x}", escape_text(text))


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal (wide East Asian characters 2, combining marks 0)."""
    width = wcswidth(text)
    if width >= 0:
        return width
    return sum(max(wcwidth(char), 0) for char in text)  # a character wcwidth cannot place: 0


def _head(text: str, width: int) -> str:
    """The longest start of ``text`` that takes at most ``width`` columns."""
    out, used = [], 0
    for char in text:
        w = max(wcwidth(char), 0)
        if used + w > width:
            break
        out.append(char)
        used += w
    return "".join(out)


def _tail(text: str, width: int) -> str:
    """The longest end of ``text`` that takes at most ``width`` columns."""
    return _head(text[::-1], width)[::-1]


def cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` terminal columns, ending with ``…`` when anything was cut."""
    if display_width(text) <= width:
        return text
    return _head(text, width - 1) + "…"


def wrap(line: str, width: int | None, keep: tuple[str, ...] = ()) -> list[str]:
    """``line`` folded at spaces into lines of at most ``width`` columns, each continuation
    indented two columns past the line's own indent; nothing is cut (a word wider than the room
    stands alone on its line). The spaces inside each text of ``keep`` (a case's quoted name) do
    not fold: it stays whole on one line, to be copied into ``-k`` or searched for. ``None``: the
    line as it is."""
    if width is None or display_width(line) <= width:
        return [line]
    body = line.lstrip(" ")
    indent = " " * (len(line) - len(body))
    lines: list[str] = []
    prefix = indent  # of the line being filled: the indent, then the continuation's
    current, used = prefix, len(prefix)
    for word in _words(body, keep):
        w = display_width(word)
        if used > len(prefix):  # a word already on this line: a space, or the next line
            if used + 1 + w > width:
                lines.append(current)
                prefix = indent + "  "
                current, used = prefix, len(prefix)
            else:
                current, used = current + " ", used + 1
        current, used = current + word, used + w
    lines.append(current)
    return lines


def _words(text: str, keep: tuple[str, ...]) -> list[str]:
    """``text`` split at spaces, except inside the first occurrence of each text of ``keep``."""
    spans = sorted((start, start + len(k)) for k in keep if k and (start := text.find(k)) >= 0)
    words: list[str] = []
    glued = False  # the next piece continues the last word (a kept text ran into it)
    at = 0
    for start, end in [*spans, (len(text), len(text))]:
        if start < at:  # overlaps a kept text already taken
            continue
        for i, piece in enumerate(text[at:start].split(" ")):
            if i == 0 and glued and words:
                words[-1] += piece
            else:
                words.append(piece)
        if end > start:
            words[-1] += text[start:end]
        glued, at = True, max(end, at)
    return words


def cut_middle(text: str, width: int, keep_from: int = 0) -> str:
    """``text`` in ``width`` columns with ``…`` in its middle: as much of its end as needed to
    show it from character ``keep_from`` on (where it starts to differ from its neighbours), the
    rest of the room for its start (at least a third of it)."""
    if display_width(text) <= width:
        return text
    room = width - 1
    head_min = room // 3
    tail_width = min(max(display_width(text[keep_from:]), room // 3), room - head_min)
    tail = _tail(text, tail_width)
    return _head(text, room - display_width(tail)) + "…" + tail


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def cut_distinct(cells: list[str], width: int) -> list[str]:
    """Each cell cut to ``width`` columns, so that different cells still read differently: the
    cells whose end cut would read like another's are cut in the middle instead."""
    ends = [cut(cell, width) for cell in cells]
    groups: dict[str, set[str]] = {}
    for cell, end in zip(cells, ends):
        groups.setdefault(end, set()).add(cell)
    out = []
    for cell, end in zip(cells, ends):
        peers = groups[end] - {cell}
        if not peers:
            out.append(end)
            continue
        differs_at = max(_common_prefix(cell, peer) for peer in peers)
        out.append(cut_middle(cell, width, differs_at))
    return out


def ascii_lines(lines: list[str]) -> list[str]:
    """A table's lines with ASCII box characters (``+``, ``-``, ``|``), for a console whose
    encoding has no box drawing (cp1252, ASCII)."""
    return [line.translate(_ASCII_BOX) for line in lines]


def for_console(lines: list[str], encoding: str | None) -> list[str]:
    """``lines`` as a console with ``encoding`` can print them: unchanged when it has box
    characters, else with ASCII boxes and ``?`` for any other character it lacks."""
    if encoding is None or encodable("┌─┐│", encoding):
        return lines
    return [line.encode(encoding, "replace").decode(encoding) for line in ascii_lines(lines)]


#: the plugin's own symbols and the ASCII a console without them (cp1252, ASCII) gets instead of
#: pytest's ``\\u2713`` escapes
SYMBOL_FALLBACKS = {"✓": "+", "✗": "x", "→": "->", "←": "<-", "○": "o", "▲": "^", "▼": "v", "Δ": "d",
                    "−": "-", "—": "--", "–": "-", "…": "...", "·": "-", "│": "|"}


def symbol_fallbacks(encoding: str | None) -> dict[int, str]:
    """A ``str.translate`` table for the plugin's symbols on a console with ``encoding``: empty when
    it prints them all (or its encoding is unknown), else every symbol in ASCII (cp1252 has ``—``
    and ``…`` but not ``✓``: the lines then read alike, in ASCII)."""
    if all(encodable(c, encoding) for c in SYMBOL_FALLBACKS):
        return {}
    return {ord(c): ascii for c, ascii in SYMBOL_FALLBACKS.items()}


def encodable(text: str, encoding: str | None) -> bool:
    """Whether a console with ``encoding`` can print ``text`` (unknown encodings: assume so)."""
    if not encoding:
        return True
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return False
    except LookupError:
        return True
    return True


def _pad(text: str, width: int) -> str:
    return text + " " * max(width - display_width(text), 0)


@dataclass
class _Fit:
    """The layout being fitted: which columns show, their widths, the indent."""

    columns: list[Column]
    natural: list[int]
    width: int | None
    shown: list[int]
    pad: int

    def total(self, widths: dict[int, int]) -> int:
        return self.pad + 1 + sum(widths[i] + 3 for i in self.shown)

    def narrowed(self) -> dict[int, int]:
        """Widths of the shown columns, shrinkable ones cut to fit (not below their minimum)."""
        widths = {i: self.natural[i] for i in self.shown}
        if self.width is None:
            return widths
        excess = self.total(widths) - self.width
        for i in self.shown:
            if excess <= 0:
                break
            column = self.columns[i]
            if column.shrink:
                floor = min(self.natural[i], max(column.min_width, display_width(column.header)))
                take = min(excess, widths[i] - floor)
                widths[i] -= take
                excess -= take
        return widths

    def cramped(self, widths: dict[int, int]) -> bool:
        if self.width is not None and self.total(widths) > self.width:
            return True
        return any(self.columns[i].shrink and widths[i] < min(self.natural[i], self.columns[i].comfort)
                   for i in self.shown)

    def fit(self) -> tuple[dict[int, int], list[int]]:
        """Optional columns hidden (highest ``drop`` first) while the table is cramped, then the
        indent dropped if it still does not fit; the widths and the hidden columns."""
        widths = self.narrowed()
        hidden: list[int] = []
        if self.width is None:
            return widths, hidden
        optional = sorted((i for i, c in enumerate(self.columns) if c.drop), key=lambda i: -self.columns[i].drop)
        while optional and self.cramped(widths):
            drop = optional.pop(0)
            self.shown.remove(drop)
            hidden.append(drop)
            widths = self.narrowed()
        if self.total(widths) > self.width:
            self.pad = 0
            widths = self.narrowed()
        return widths, hidden


def fit_table(columns: list[Column], rows: list[list[str]], *, indent: int = 4,
              width: int | None = None) -> list[str]:
    """A box-drawn table that fits ``width`` terminal columns (None: as wide as its cells).

    When it is too wide, shrinkable columns are narrowed (cells cut with ``…``, rows kept
    distinct), optional columns are hidden (a last line says which), and the indent goes; a table
    that cannot fit even then is drawn at its narrowest.
    """
    if not rows:
        return []
    natural = [max(display_width(c.header), *(display_width(r[i]) for r in rows)) for i, c in enumerate(columns)]
    layout = _Fit(columns, natural, width, list(range(len(columns))), indent)
    widths, hidden = layout.fit()
    shown, space = layout.shown, " " * layout.pad
    cells = {i: cut_distinct([r[i] for r in rows], widths[i]) if columns[i].shrink
             else [cut(r[i], widths[i]) for r in rows] for i in shown}

    def line(texts: dict[int, str]) -> str:
        return f"{space}│ " + " │ ".join(_pad(texts[i], widths[i]) for i in shown) + " │"

    def rule(left: str, mid: str, right: str) -> str:
        return space + left + mid.join("─" * (widths[i] + 2) for i in shown) + right

    body = [line({i: cells[i][n] for i in shown}) for n in range(len(rows))]
    lines = [rule("┌", "┬", "┐"), line({i: cut(columns[i].header, widths[i]) for i in shown}), rule("├", "┼", "┤"),
             *body, rule("└", "┴", "┘")]
    if hidden:
        headers = [columns[i].header for i in sorted(hidden)]
        names = " and ".join(headers) if len(headers) < 3 else ", ".join(headers[:-1]) + " and " + headers[-1]
        lines.append(cut(f"{space}({names} hidden to fit {width} columns)", max(width or 0, 20)))
    return lines


def table(headers: list[str], rows: list[list[str]], indent: int = 4) -> list[str]:
    """Connic's box-drawn table, one string per line; cells must be escaped already."""
    return fit_table([Column(h) for h in headers], rows, indent=indent)
