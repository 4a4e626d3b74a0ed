"""``python -m pytest_connic compare A B``: A compared with B, each a session of the history
(``last``, ``-2``, a session number, a git commit or branch) or a ``--connic-json`` report file.
Prints what changed per case; ``--json``, ``--summary`` and ``--html`` write it to files too."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from pytest_connic.compare.cases import compare
from pytest_connic.compare.render import Line, markdown, terminal
from pytest_connic.compare.sides import CompareError, find_history, read_report, resolve
from pytest_connic.files import IrregularFileError, file_kind
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
    root = Path.cwd()
    history = Path(args.history) if args.history else find_history(root)
    try:
        outputs = checked_outputs(args, root, os.environ)
        subject = resolve(args.subject, history, root)
        reference = resolve(args.reference, history, root)
    except CompareError as exc:
        print(f"python -m pytest_connic compare: error: {exc}", file=sys.stderr)
        return 2
    for note in (*subject.notes, *reference.notes):
        print(f"python -m pytest_connic compare: warning: {note}", file=sys.stderr)
    section = compare(subject, reference)
    width = shutil.get_terminal_size((80, 24)).columns
    colour = use_colour(args.color, out)
    for line in terminal(section, width):
        print(painted(line, colour), file=out)
    problems = write_files(section, args, outputs, root)
    for problem in problems:
        print(f"python -m pytest_connic compare: error: {problem}", file=sys.stderr)
    return 1 if problems else 0


def checked_outputs(args: argparse.Namespace, root: Path, environ: Mapping[str, str]) -> dict[str, Path]:
    """The command's output files by option (``--json``, ``--summary``, ``--html``), each checked
    as pytest checks its reports: never an input of the project here (links followed), never two
    options naming one file; ``CompareError`` (exit code 2) before anything is read or written."""
    from pytest_connic.project.inputs import refused_output
    from pytest_connic.project.layout import find_project_root

    project = find_project_root(Path(os.path.realpath(root)))
    roots = [project] if project is not None else []
    named = {option: root / value for option in ("json", "summary", "html") if (value := getattr(args, option))}
    step = step_summary(environ)
    seen: dict[str, str] = {}
    candidates = [(f"--{option}", path) for option, path in named.items()]
    if step is not None:
        candidates.append(("$GITHUB_STEP_SUMMARY", step))
    for option, path in candidates:
        what = refused_output(path, roots)
        if what is not None:
            raise CompareError(f"{path}: {option} names {what}; an output is never written over the project's "
                               "inputs: choose a path outside them")
        real = os.path.realpath(path)
        if real in seen:
            raise CompareError(f"{path}: {option} and {seen[real]} name the same file; give each output its own path")
        seen[real] = option
    return named


def write_files(section: dict[str, object], args: argparse.Namespace, outputs: Mapping[str, Path],
                root: Path) -> list[str]:
    """Each output written on its own (one that fails never stops another); the failures, one
    located line each."""
    from pytest_connic.files import write_text_file

    writers: list[tuple[str, Path, Callable[[], str]]] = []
    if "json" in outputs:
        writers.append(("JSON comparison (--json)", outputs["json"],
                        lambda: json.dumps({"comparison": section}, ensure_ascii=False, indent=2) + "\n"))
    if "html" in outputs:
        writers.append(("HTML page (--html)", outputs["html"],
                        lambda: html_page(section, subject_report(args.subject, root))))
    problems = []
    for what, path, text in writers:
        try:
            write_text_file(path, text())
        except OSError as exc:
            problems.append(failure_line(what, path, exc))
    summary = outputs.get("summary")
    return problems + write_summaries(markdown(section), None if summary is None else str(summary), os.environ)


def html_page(section: dict[str, object], report: dict[str, object] | None) -> str:
    """The subject's whole report with the comparison when it is a report, else the comparison alone."""
    from pytest_connic.reports.comparison_html import standalone_page
    from pytest_connic.reports.html import CSP, render_html

    return (render_html({**to_jsonable(report), "comparison": to_jsonable(section)}) if report is not None
            else standalone_page(section, CSP))


def subject_report(ref: str, root: Path) -> dict[str, object] | None:
    """The subject's whole ``--connic-json`` report when it is one (its cases show on the page),
    read with the same bounds as when it was compared."""
    path = Path(ref) if Path(ref).is_absolute() else root / ref
    if not (ref.endswith(".json") and path.is_file()):
        return None
    try:
        data = read_report(path)
    except CompareError:
        return None
    return dict(data)


def failure_line(what: str, path: Path | str, exc: OSError) -> str:
    """``<path>: cannot write the <what>: [Errno 28] No space left on device``"""
    where = exc.filename if isinstance(exc.filename, str) else str(path)
    reason = f"[Errno {exc.errno}] {exc.strerror}" if exc.strerror else str(exc)
    return f"{where}: cannot write the {what}: {reason}"


def step_summary(environ: Mapping[str, str]) -> Path | None:
    """``$GITHUB_STEP_SUMMARY`` under GitHub Actions (``GITHUB_ACTIONS=true``), else None."""
    step = environ.get("GITHUB_STEP_SUMMARY")
    return Path(step) if step and environ.get("GITHUB_ACTIONS") == "true" else None


def write_summaries(text: str, path: str | None, environ: Mapping[str, str],
                    refused: Callable[[Path], str | None] = lambda _path: None) -> list[str]:
    """The Markdown summary to ``path`` (replaced), and appended to ``$GITHUB_STEP_SUMMARY`` when
    it is set under GitHub Actions (``GITHUB_ACTIONS=true``), as GitHub asks of every step; each
    on its own. ``refused``: why a step summary path may not be written (a project's input), or
    None. The failures, one located line each (never raised)."""
    from pytest_connic.files import write_text_file

    problems = []
    if path:
        try:
            write_text_file(Path(path), text)
        except OSError as exc:
            problems.append(failure_line("Markdown summary", path, exc))
    step = step_summary(environ)
    if step is not None:
        why = refused(step)
        if why is not None:
            problems.append(f"{step}: $GITHUB_STEP_SUMMARY names {why}; the summary was not appended to it")
            return problems
        try:
            append_regular(step, text + "\n")
        except IrregularFileError as exc:
            problems.append(f"{exc}: the summary was not appended to $GITHUB_STEP_SUMMARY")
        except OSError as exc:
            problems.append(failure_line("Markdown summary ($GITHUB_STEP_SUMMARY)", step, exc))
    return problems


def append_regular(path: Path, text: str) -> None:
    """Append ``text`` to the regular file at ``path`` (created when absent). Anything else (a
    FIFO, a device, a directory) is refused before it is opened and on the descriptor opened, which
    never blocks: ``IrregularFileError``."""
    try:
        kind = file_kind(os.stat(path).st_mode)
    except FileNotFoundError:
        kind = None
    if kind is not None:
        raise IrregularFileError(f"{path}: the step summary is {kind}; only a regular file is written")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0)
                 | getattr(os, "O_NOCTTY", 0), 0o666)
    try:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise IrregularFileError(f"{path}: the step summary is {kind}; only a regular file is written")
        data = text.encode("utf-8", "backslashreplace")
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_connic")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(list(argv)))
