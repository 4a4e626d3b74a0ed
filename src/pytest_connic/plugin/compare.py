"""``--connic-compare REF`` and ``--connic-summary PATH``, the pytest side (``compare/``): REF is
resolved when the session starts (a bad one is a usage error), compared with the session's cases
at its end; the comparison goes to the terminal, the JSON and HTML reports (``comparison``) and
the Markdown summary."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_connic.compare.sides import Side
    from pytest_connic.history.store import CaseRow
    from pytest_connic.plugin.session import ConnicSession

#: the ``comparison`` section of this session (JSON-ready), once computed
COMPARISON_KEY = pytest.StashKey[dict[str, object]]()


def resolve_reference(config: pytest.Config, ref: str, history: Path | None) -> Side:
    """The side ``--connic-compare REF`` names, read now: before this session is written, so
    ``last`` is the session before this one; a REF that names nothing is a usage error."""
    from pytest_connic.compare.sides import CompareError, resolve

    try:
        return resolve(ref, history, Path(config.invocation_params.dir), git_root=config.rootpath)
    except CompareError as exc:
        raise pytest.UsageError(f"invalid value {ref!r} from --connic-compare: {exc}") from None


def compare_session(config: pytest.Config, reference: Side, rows: dict[str, CaseRow]) -> dict[str, object]:
    from pytest_connic.compare.cases import compare
    from pytest_connic.compare.sides import from_rows

    section = compare(from_rows("this session", rows), reference)
    config.stash[COMPARISON_KEY] = section
    return section


def terminal_summary(config: pytest.Config, reporter: pytest.TerminalReporter) -> None:
    """The comparison's lines, fitted to pytest's terminal width, coloured as pytest colours."""
    section = config.stash.get(COMPARISON_KEY, None)
    if section is None:
        return
    from pytest_connic.compare.render import terminal

    reporter.write_sep("-", "connic compare")
    for line in terminal(section, config.get_terminal_writer().fullwidth):
        for text, style in line:
            reporter.write(text, **({style: True} if style else {}))
        reporter.line("")


def write_summary(state: ConnicSession) -> None:
    """``--connic-summary PATH`` and, under GitHub Actions, ``$GITHUB_STEP_SUMMARY``: the
    session's results and its comparison, in Markdown. Each written on its own; one that cannot be
    (a full disk, a FIFO or a device as the step summary, a step summary that names an input of
    the project) is one located line after the terminal summary."""
    from pytest_connic.compare.cli import step_summary, write_summaries

    settings = state.settings
    if not settings.summary and step_summary(os.environ) is None:
        return
    from pytest_connic.compare.render import markdown, results_markdown
    from pytest_connic.plugin.outputguard import project_roots
    from pytest_connic.project.inputs import refused_output
    from pytest_connic.reports.stats import case_status, sorted_outcomes

    masked = state.masker.text
    # in the reports' order, whatever order xdist's workers finished in
    cases = [(masked(f"{o.agent_name}::{o.case_name}"), case_status(o), f"{o.successes}/{o.runs}",
              masked(o.failure_reason or "")) for o in sorted_outcomes(state.ledger.outcomes)]
    text = results_markdown(cases)
    section = state.config.stash.get(COMPARISON_KEY, None)
    if section is not None:
        text += "\n" + markdown(section)
    path = str(Path(state.config.invocation_params.dir) / settings.summary) if settings.summary else None
    roots = project_roots(state.config)
    for problem in write_summaries(state.masker.text(text), path, os.environ,
                                   lambda step: refused_output(step, roots, settings.cassette_dir)):
        state.reports.output_failed(problem)
