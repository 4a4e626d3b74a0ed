"""A comparison for people: terminal lines (fitted to the width, with colour marks the caller
applies) and a Markdown summary for CI (GitHub's step summary)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

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
    """``line`` wrapped to ``width`` columns (between words; a word wider than a line is cut),
    continuation lines indented two more columns; each line starts with its indent."""
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
            while w > width - used and w > room:  # a word wider than a line: cut it
                head = token
                while display_width(head) > width - used:
                    head = head[:-1]
                current.append((head, style))
                out.append(current)
                token = token[len(head):]
                w = display_width(token)
                current = [(" " * (indent + 2), "")]
                used = indent + 2
            current.append((token, style))
            used += w
    out.append(current)
    return [_rstripped(line) for line in out]


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

def _md(text: str) -> str:
    """Text safe in Markdown and in GitHub's HTML: escaped, line breaks as ``↵``."""
    escaped = html.escape(text.replace("\r\n", "\n").replace("\n", "↵ "))
    for char in "\\`*_[]|#~":
        escaped = escaped.replace(char, "\\" + char)
    return escaped


def _md_words(ops: list[Op]) -> str:
    out, size = [], 0
    for op, text in ops:
        piece = {"=": _md(text), "-": f"<del>{_md(text)}</del>", "+": f"<ins>{_md(text)}</ins>"}.get(op, " … ")
        size += len(piece)
        if size > MARKDOWN_DIFF:
            out.append(" … (cut)")
            break
        out.append(piece)
    return "".join(out)


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
                       + (f"{verdict['before']} → **{verdict['after']}**" if verdict else "unchanged")
                       + f" | {_md(tokens_text(change['tokens']).removeprefix('tokens '))}"
                       f" | {_md((cost_text(change['cost']) or '—').removeprefix('cost '))} |")
        out.append("")
    for change in changed[:MARKDOWN_CASES]:
        # inside an HTML block GitHub reads no Markdown: escaped as HTML only
        out.append(f"<details><summary>{html.escape(change['name'].replace(chr(10), ' '))}</summary>")
        out.append("")
        if change["rate"]:
            out.append(f"- {_md(change['rate']['text'])}")
        output = change["output"]
        if output and output["kind"] == "text":
            out.append(f"- output: {_md_words(output['words'])}")
        elif output:
            out.append("- output (JSON keys): " + "; ".join(
                f"`{_md(k['path'])}` "
                + (f"<del>{_md(_value(k['before']))}</del>" if "before" in k else "(absent)") + " → "
                + (f"<ins>{_md(_value(k['after']))}</ins>" if "after" in k else "(absent)") for k in output["keys"]))
        if change["tools"]:
            out.append("- tool calls:")
            for op, text in change["tools"]:
                shown = _md(text)
                out.append(f"  - {op} " + {"-": f"<del>{shown}</del>", "+": f"<ins>{shown}</ins>"}.get(op, shown))
        for decision in change["decisions"]:
            out.append(f"- {_md(decision['what'])}: {_md(str(decision['before'] or '—'))} → {_md(str(decision['after'] or '—'))}")
        out.append(f"- {_md(deltas(change))}")
        for note in change["notes"]:
            out.append(f"- ({_md(note)})")
        out += ["", "</details>", ""]
    if len(changed) > MARKDOWN_CASES:
        out.append(f"… and {len(changed) - MARKDOWN_CASES} more changed case(s) (see the JSON or HTML report)")
    for key, what in (("only_subject", "Only in the subject"), ("only_reference", "Only in the reference")):
        if section[key]:
            out.append(f"**{what}:** " + ", ".join(f"{_md(c['name'])} ({c['verdict']})" for c in section[key]))
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def results_markdown(cases: Sequence[tuple[str, str, str]]) -> str:
    """A session's results in Markdown: ``N/M cases passed`` and the cases that did not pass
    (``cases``: name, status, failure reason; masked by the caller)."""
    passed = sum(1 for _, status, _ in cases if status == "passed")
    out = [f"### Connic: {passed}/{len(cases)} cases passed", ""]
    failing = [c for c in cases if c[1] != "passed"]
    if failing:
        out += ["| Result | Case | Reason |", "| --- | --- | --- |"]
        for name, status, reason in failing[:MARKDOWN_CASES]:
            out.append(f"| {status.upper()} | {_md(name)} | {_md(reason[:300])} |")
        if len(failing) > MARKDOWN_CASES:
            out.append(f"\n… and {len(failing) - MARKDOWN_CASES} more")
    return "\n".join(out).rstrip() + "\n"
