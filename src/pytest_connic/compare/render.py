"""A comparison for people: terminal lines (fitted to the width, with colour marks the caller
applies) and a Markdown summary for CI (GitHub's step summary)."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

from wcwidth import wcwidth

from pytest_connic.compare.cases import cost_text, deltas, header, tokens_text, verdict_text
from pytest_connic.compare.diff import Op
from pytest_connic.reports.table import cell_text, display_width

#: a piece of a terminal line and its colour ("", "red", "green", "yellow", "bold")
Segment = tuple[str, str]
Line = list[Segment]

#: cases a Markdown summary details (GitHub keeps 1 MiB of a step summary)
MARKDOWN_CASES = 50
#: characters of one output diff a Markdown summary shows
MARKDOWN_DIFF = 2000


def _shown(text: str) -> str:
    """User text on one terminal line: a line break as ``↵``, control characters escaped."""
    return cell_text(text.replace("\r\n", "\n").replace("\n", "↵ "))


def _word_line(ops: list[Op]) -> Line:
    line: Line = [("output: ", "")]
    for op, text in ops:
        if op == "=":
            line.append((_shown(text), ""))
        elif op == "-":
            line.append(("[-" + _shown(text) + "-]", "red"))
        elif op == "+":
            line.append(("{+" + _shown(text) + "+}", "green"))
        else:
            line.append((" … ", ""))
    return line


def _value(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value


def case_lines(change: dict[str, Any]) -> list[tuple[int, Line]]:
    """``(indent, line)`` of one changed case."""
    out: list[tuple[int, Line]] = [(2, [(_shown(change["name"]), "bold"), (f"  ({_shown(change['nodeid'])})", "")])]
    if change["verdict"]:
        style = "red" if change["verdict"]["after"] == "failed" else "green" if change["verdict"]["after"] == "passed" else ""
        out.append((4, [(verdict_text(change["verdict"]), style)]))
    if change["rate"]:
        out.append((4, [(change["rate"]["text"], "" if change["rate"]["noise"] else "yellow")]))
    output = change["output"]
    if output and output["kind"] == "text":
        out.append((4, _word_line(output["words"])))
    elif output:
        out.append((4, [("output (JSON keys):", "")]))
        for key in output["keys"]:
            line: Line = [(_shown(key["path"]) + ": ", "")]
            line.append((_shown(_value(key["before"])) if "before" in key else "(absent)", "red"))
            line.append((" → ", ""))
            line.append((_shown(_value(key["after"])) if "after" in key else "(absent)", "green"))
            out.append((6, line))
    if change["tools"]:
        out.append((4, [("tool calls:", "")]))
        for op, text in change["tools"]:
            out.append((6, [(f"{op} {_shown(text)}", {"-": "red", "+": "green"}.get(op, ""))]))
    for decision in change["decisions"]:
        out.append((4, [(f"{decision['what']}: {decision['before'] or '—'} → {decision['after'] or '—'}", "yellow")]))
    out.append((4, [(deltas(change), "")]))
    what = list(change["configuration"]) + (["cassette re-recorded"] if change["cassette_changed"] else [])
    if what:
        out.append((4, [("changed: " + ", ".join(what), "")]))
    for note in change["notes"]:
        out.append((4, [(f"({note})", "")]))
    return out


def lines(section: dict[str, Any]) -> list[tuple[int, Line]]:
    """The whole comparison as ``(indent, line)``; :func:`fit` wraps them to a width."""
    head = header(section)
    out: list[tuple[int, Line]] = [(0, [("compare: " + head[0], "bold")]), (2, [(head[1], "")]), (2, [(head[2], "")])]
    for change in section["changed"]:
        out += case_lines(change)
    for key, what in (("only_subject", "only in the subject"), ("only_reference", "only in the reference")):
        for case in section[key]:
            out.append((2, [(f"{what}: ", "yellow"), (f"{_shown(case['name'])} ({case['verdict']})", "")]))
    return out


def fit(indent: int, line: Line, width: int | None) -> list[Line]:
    """``line`` wrapped to ``width`` columns (between words; a word wider than a line is cut, in
    one pass over it), continuation lines indented two more columns; each line starts with its
    indent."""
    if width is None:
        return [[(" " * indent, ""), *line]]
    import re

    out: list[Line] = []
    current: Line = [(" " * indent, "")]
    used = indent
    room = max(width - indent - 2, 10)
    for text, style in line:
        for token in re.findall(r"\s+|\S+", text):
            w = display_width(token)
            if used + w > width and used > indent + (2 if out else 0) and w <= room:  # wrap before it
                out.append(current)
                current = [(" " * (indent + 2), "")]
                used = indent + 2
                if token.isspace():
                    continue
            if w > width - used and w > room:  # a word wider than a line: cut it
                *full, token = cut_word(token, width - used, width - indent - 2, room)
                for piece in full:
                    current.append((piece, style))
                    out.append(current)
                    current = [(" " * (indent + 2), "")]
                    used = indent + 2
                w = display_width(token)
            current.append((token, style))
            used += w
    out.append(current)
    return [_rstripped(line) for line in out]


def cut_word(word: str, first: int, rest: int, room: int) -> list[str]:
    """``word`` in pieces, in one pass (each character's width measured once): the first at most
    ``first`` columns wide (it may be empty), each next at most ``rest`` (at least one character),
    and the last what is left once that is at most ``room`` columns."""
    widths = [max(wcwidth(char), 0) for char in word]
    left = sum(widths)
    pieces: list[str] = []
    start, used, limit = 0, 0, first
    for i, w in enumerate(widths):
        if used + w > limit and (i > start or not pieces):  # this piece is full
            pieces.append(word[start:i])
            start, used, limit = i, 0, max(rest, 1)
            if left <= room:
                break
        used += w
        left -= w
    pieces.append(word[start:])
    return pieces


def _rstripped(line: Line) -> Line:
    """``line`` without trailing blanks, its neighbouring pieces of one colour joined."""
    while len(line) > 1 and not line[-1][0].strip():
        line = line[:-1]
    if len(line) > 1:
        line = line[:-1] + [(line[-1][0].rstrip(), line[-1][1])]
    joined: Line = []
    for text, style in line:
        if joined and joined[-1][1] == style:
            joined[-1] = (joined[-1][0] + text, style)
        else:
            joined.append((text, style))
    return joined


def terminal(section: dict[str, Any], width: int | None) -> list[Line]:
    """Every line of the comparison, fitted to ``width`` (None: not cut)."""
    return [fitted for indent, line in lines(section) for fitted in fit(indent, line, width)]


def plain(section: dict[str, Any], width: int | None = None) -> list[str]:
    """The terminal lines without colour."""
    return ["".join(text for text, _ in line).rstrip() for line in terminal(section, width)]


# --------------------------------------------------------------------------- Markdown

#: what Markdown (CommonMark, GitHub's tables and strikethrough) reads in a line of text: each is
#: escaped with a backslash, which CommonMark allows before any ASCII punctuation; ``&`` and ``<``
#: too, so that no entity or tag is read (an HTML escape would show as ``&#x27;`` once escaped)
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>&|~!#])")


def _md(text: str) -> str:
    """User text as Markdown text that renders as itself: punctuation Markdown reads escaped with
    a backslash (not as HTML), line breaks as ``↵``, control characters escaped."""
    return _MD_SPECIAL.sub(r"\\\1", cell_text(text.replace("\r\n", "\n").replace("\n", "↵ ")))


def _code(text: str) -> str:
    """User text as a Markdown code span (shown as it is: no escape works inside one)."""
    text = cell_text(text.replace("\r\n", "\n").replace("\n", "↵ "))
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _md_words(ops: list[Op]) -> str:
    """A word diff in Markdown, at most about :data:`MARKDOWN_DIFF` characters: the piece that
    reaches the bound is cut there (once), and ``… (cut)`` says so."""
    out, left = [], MARKDOWN_DIFF
    for number, (op, text) in enumerate(ops, 1):
        cut = len(text) > left
        text = text[:left]
        left -= len(text)
        out.append({"=": _md(text), "-": f"<del>{_md(text)}</del>", "+": f"<ins>{_md(text)}</ins>"}.get(op, " … "))
        if cut or (left <= 0 and number < len(ops)):
            out.append(" … (cut)")
            break
    return "".join(out)


def _md_case(change: dict[str, Any]) -> list[str]:
    """One changed case's folded block: its rate, output, tool calls, decisions and deltas."""
    # inside an HTML block GitHub reads no Markdown: escaped as HTML only
    out = [f"<details><summary>{html.escape(_shown(change['name']), quote=False)}</summary>", ""]
    if change["rate"]:
        out.append(f"- {_md(change['rate']['text'])}")
    output = change["output"]
    if output and output["kind"] == "text":
        out.append(f"- output: {_md_words(output['words'])}")
    elif output:
        out.append("- output (JSON keys): " + "; ".join(
            f"{_code(k['path'])} "
            + (f"<del>{_md(_value(k['before']))}</del>" if "before" in k else "(absent)") + " → "
            + (f"<ins>{_md(_value(k['after']))}</ins>" if "after" in k else "(absent)") for k in output["keys"]))
    if change["tools"]:
        out.append("- tool calls:")
        for op, text in change["tools"]:  # the marks escaped: ``- -`` would be a list in a list
            shown = _md(text)
            out.append("  - " + {"-": f"\\- <del>{shown}</del>", "+": f"\\+ <ins>{shown}</ins>"}.get(op, f"= {shown}"))
    for decision in change["decisions"]:
        out.append(f"- {_md(decision['what'])}: {_md(str(decision['before'] or '—'))} → {_md(str(decision['after'] or '—'))}")
    out.append(f"- {_md(deltas(change))}")
    what = list(change["configuration"]) + (["cassette re-recorded"] if change["cassette_changed"] else [])
    if what:
        out.append(f"- changed: {_md(', '.join(what))}")
    for note in change["notes"]:
        out.append(f"- ({_md(note)})")
    return [*out, "", "</details>", ""]


def markdown(section: dict[str, Any], *, title: str = "Connic: what changed") -> str:
    """The comparison as a Markdown summary (GitHub's step summary renders it on the checks page)."""
    head = header(section)
    out = [f"### {_md(title)}", "", f"{_md(head[0])}", "", f"**{_md(head[1])}**; {_md(head[2])}", ""]
    changed = section["changed"]
    if changed:
        out += ["| Case | Verdict | Tokens | Cost |", "| --- | --- | --- | --- |"]
        for change in changed:
            verdict = change["verdict"]
            out.append(f"| {_md(change['name'])} | "
                       + (f"{_md(str(verdict['before']))} → **{_md(str(verdict['after']))}**" if verdict else "unchanged")
                       + f" | {_md(tokens_text(change['tokens']).removeprefix('tokens '))}"
                       f" | {_md((cost_text(change['cost']) or '—').removeprefix('cost '))} |")
        out.append("")
    for change in changed[:MARKDOWN_CASES]:
        out += _md_case(change)
    if len(changed) > MARKDOWN_CASES:
        out.append(f"… and {len(changed) - MARKDOWN_CASES} more changed case(s) (see the JSON or HTML report)")
    for key, what in (("only_subject", "Only in the subject"), ("only_reference", "Only in the reference")):
        if section[key]:
            out.append(f"**{what}:** " + ", ".join(f"{_md(c['name'])} ({_md(str(c['verdict']))})" for c in section[key]))
            out.append("")
    return "\n".join(out).rstrip() + "\n"


#: rows of a results table shown open; a longer table folds its passing cases in ``<details>``
MARKDOWN_OPEN_ROWS = 10
#: passing cases a summary lists (GitHub keeps 1 MiB of a step summary)
MARKDOWN_PASSED = 500


def results_markdown(cases: Sequence[tuple[str, str, str, str]]) -> str:
    """A session's results in Markdown: ``N/M cases passed`` and a table of the cases (``cases``:
    name, status, passed runs over runs, failure reason; masked by the caller): the cases that did
    not pass first (at most :data:`MARKDOWN_CASES`), and the passing ones, folded in a
    ``<details>`` block when the table would have more than :data:`MARKDOWN_OPEN_ROWS` rows."""
    passed = [c for c in cases if c[1] == "passed"]
    failing = [c for c in cases if c[1] != "passed"]
    out = [f"### Connic: {len(passed)}/{len(cases)} cases passed", ""]
    head = ["| Result | Case | Runs | Reason |", "| --- | --- | --- | --- |"]

    def rows(chosen: Sequence[tuple[str, str, str, str]]) -> list[str]:
        return [f"| {_md(status.upper())} | {_md(name)} | {_md(runs)} | {_md(reason[:300])} |"
                for name, status, runs, reason in chosen]

    if len(cases) <= MARKDOWN_OPEN_ROWS:
        return "\n".join([*out, *head, *rows([*failing, *passed])]) + "\n"
    if failing:
        out += [*head, *rows(failing[:MARKDOWN_CASES]), ""]
        if len(failing) > MARKDOWN_CASES:
            out += [f"… and {len(failing) - MARKDOWN_CASES} more that did not pass", ""]
    if passed:
        more = [f"… and {len(passed) - MARKDOWN_PASSED} more passed case(s)", ""] if len(passed) > MARKDOWN_PASSED else []
        out += [f"<details><summary>{len(passed)} passed case(s)</summary>", "", *head,
                *rows(passed[:MARKDOWN_PASSED]), "", *more, "</details>"]
    return "\n".join(out).rstrip() + "\n"
