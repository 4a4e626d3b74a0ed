"""``python -m pytest_connic compare A B``: A compared with B, each a session of the history
(``last``, ``-2``, a session number, a git commit or branch) or a ``--connic-json`` report file.
Prints what changed per case; ``--json``, ``--summary`` and ``--html`` write it to files too."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from pytest_connic.compare.cases import compare
from pytest_connic.compare.render import Line, markdown, terminal
from pytest_connic.compare.sides import CompareError, find_history, resolve
from pytest_connic.jsonsafe import to_jsonable

_ANSI = {"red": "\x1b[31m", "green": "\x1b[32m", "yellow": "\x1b[33m", "bold": "\x1b[1m"}


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``compare`` subcommand of ``python -m pytest_connic``."""
    parser = commands.add_parser(
        "compare", help="what changed between two sessions of the history or two --connic-json reports",
        description="Show what changed per case from B to A: verdicts, outputs (word by word, or key by key "
                    "for JSON), tool calls, guardrail and approval decisions, latency, tokens and cost. "
                    "A and B are each a session of the history (last, -2 for the one before, a session number, "
                    "a git commit or branch: its last session) or a --connic-json report file.")
    parser.add_argument("subject", metavar="A", help="what is looked at (e.g. last, or pr.json)")
    parser.add_argument("reference", metavar="B", help="what it is compared with (e.g. -2, main, or main.json)")
    parser.add_argument("--history", metavar="PATH",
                        help="the history file (default: .pytest_cache/connic/history.sqlite here or above)")
    parser.add_argument("--json", metavar="PATH", help="write the comparison as JSON ({\"comparison\": ...})")
    parser.add_argument("--summary", metavar="PATH", help="write a Markdown summary (as for GitHub's step summary)")
    parser.add_argument("--html", metavar="PATH", help="write an HTML page of the comparison (the subject's whole "
                        "report with it, when A is a --connic-json report)")
    parser.add_argument("--color", choices=("auto", "yes", "no"), default="auto",
                        help="colour the terminal output (auto: when it is a terminal, as pytest)")


def use_colour(choice: str, stream: TextIO) -> bool:
    """pytest's rule: ``PY_COLORS=1``/``0`` decides, then ``NO_COLOR``, ``FORCE_COLOR``, then a tty."""
    if choice != "auto":
        return choice == "yes"
    if os.environ.get("PY_COLORS") in ("0", "1"):
        return os.environ["PY_COLORS"] == "1"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty() and os.environ.get("TERM") != "dumb"


def painted(line: Line, colour: bool) -> str:
    if not colour:
        return "".join(text for text, _ in line).rstrip()
    return "".join(_ANSI[style] + text + "\x1b[0m" if style and text.strip() else text for text, style in line).rstrip()


def run(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    from pytest_connic.files import write_text_file

    root = Path.cwd()
    history = Path(args.history) if args.history else find_history(root)
    try:
        subject = resolve(args.subject, history, root)
        reference = resolve(args.reference, history, root)
    except CompareError as exc:
        print(f"python -m pytest_connic compare: error: {exc}", file=sys.stderr)
        return 2
    section = compare(subject, reference)
    width = shutil.get_terminal_size((80, 24)).columns
    colour = use_colour(args.color, out)
    for line in terminal(section, width):
        print(painted(line, colour), file=out)
    try:
        if args.json:
            write_text_file(Path(args.json), json.dumps({"comparison": section}, ensure_ascii=False, indent=2) + "\n")
        write_summaries(markdown(section), args.summary, os.environ)
        if args.html:
            write_text_file(Path(args.html), html_page(section, subject_report(args.subject, root)))
    except OSError as exc:
        print(f"python -m pytest_connic compare: error: {exc.filename or ''}: cannot write: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    return 0


def html_page(section: dict[str, object], report: dict[str, object] | None) -> str:
    """The subject's whole report with the comparison when it is a report, else the comparison alone."""
    from pytest_connic.reports.comparison_html import standalone_page
    from pytest_connic.reports.html import CSP, render_html

    return (render_html({**to_jsonable(report), "comparison": to_jsonable(section)}) if report is not None
            else standalone_page(section, CSP))


def subject_report(ref: str, root: Path) -> dict[str, object] | None:
    """The subject's whole ``--connic-json`` report when it is one (its cases show on the page)."""
    path = Path(ref) if Path(ref).is_absolute() else root / ref
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() and ref.endswith(".json") else None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_summaries(text: str, path: str | None, environ: Mapping[str, str]) -> list[str]:
    """The Markdown summary to ``path`` (replaced), and appended to ``$GITHUB_STEP_SUMMARY`` when
    it is set under GitHub Actions (``GITHUB_ACTIONS=true``), as GitHub asks of every step; the
    paths written."""
    from pytest_connic.files import write_text_file

    written = []
    if path:
        write_text_file(Path(path), text)
        written.append(path)
    step = environ.get("GITHUB_STEP_SUMMARY")
    if step and environ.get("GITHUB_ACTIONS") == "true":
        with open(step, "a", encoding="utf-8") as file:
            file.write(text + "\n")
        written.append(step)
    return written


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_connic")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(list(argv)))
