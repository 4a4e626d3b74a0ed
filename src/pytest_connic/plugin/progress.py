"""The progress line of long runs: cases done, runs done, tokens and cost so far, at most every
``connic_progress_interval`` seconds, between pytest's own result lines (docs/ci.md "Progress")."""

from __future__ import annotations

import time

import pytest

from pytest_connic.plugin.session import SESSION_KEY
from pytest_connic.plugin.verdicts import is_case_id
from pytest_connic.plugin.xdist import is_worker


def progress_line(cases_done: int, cases_total: int | None, runs_done: int, runs_total: int | None,
                  tokens_in: int, tokens_out: int, cost: float, width: int | None = None,
                  cost_known: bool = True) -> str:
    """``connic: 3/12 cases, 7/30 runs, 1,234 tokens (1,000 in / 234 out), $0.0012 so far``;
    within ``width`` columns: the token breakdown goes first, then the cost, then the tokens.
    A cost with unpriced models in it says so (``$0.0012 + unpriced``; ``cost unknown`` when
    nothing is priced), never a bare ``$0.0000``."""
    cases = f"{cases_done}/{cases_total}" if cases_total else str(cases_done)
    runs = f"{runs_done}/{runs_total}" if runs_total else str(runs_done)
    head = f"connic: {cases} cases, {runs} runs"
    tokens = f"{tokens_in + tokens_out:,} tokens"
    breakdown = f" ({tokens_in:,} in / {tokens_out:,} out)"
    if cost_known:
        money = f", ${cost:.4f}"
    else:
        money = f", ${cost:.4f} + unpriced" if cost else ", cost unknown"
    for line in (f"{head}, {tokens}{breakdown}{money} so far", f"{head}, {tokens}{money} so far",
                 f"{head}, {tokens} so far", f"{head} so far"):
        if width is None or len(line) <= width:
            return line
    return line[: max(width or 0, 1)]


class ConnicProgress:
    """Writes the progress line after a case's report, once ``interval`` seconds have passed
    since the session started or the last line; never with ``-q``, never on an xdist worker."""

    def __init__(self, config: pytest.Config, interval: float) -> None:
        self.config = config
        self.interval = interval
        self.last = time.monotonic()
        self.cases_total: int | None = None
        self.runs_total: int | None = None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from pytest_connic.plugin.items import CaseItem

        cases = [i for i in session.items if isinstance(i, CaseItem)]
        if cases:
            self.cases_total = len(cases)
            # the runs the valid cases ask for (an invalid case runs none; an early stop runs fewer)
            self.runs_total = sum(int(i.spec.resolved["runs"]) for i in cases if i.spec.resolved is not None)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown" or not is_case_id(report.nodeid):
            return
        state = self.config.stash.get(SESSION_KEY, None)
        now = time.monotonic()
        if state is None or not state.ledger.outcomes or now - self.last < self.interval:
            return
        cases_total = self.cases_total or (len(state.ledger.collected) or None)
        if cases_total is not None and len(state.ledger.outcomes) >= cases_total:
            return  # the last case: the summary follows
        reporter: pytest.TerminalReporter | None = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        self.last = now
        outcomes = state.ledger.outcomes
        line = progress_line(len(outcomes), cases_total, sum(len(o.executed) for o in outcomes), self.runs_total,
                             sum(o.input_tokens for o in outcomes), sum(o.output_tokens for o in outcomes),
                             sum(o.cost for o in outcomes), width=self.config.get_terminal_writer().fullwidth - 1,
                             cost_known=all(o.cost_known for o in outcomes))
        # a line of its own, as pytest's live logs: with -v (one line per case, each ended by the
        # next) pytest's next result line ends it; otherwise the results go on on the next line
        if self.config.get_terminal_writer().width_of_current_line:
            reporter.write("\n")
        ended_by_pytest = self.config.get_verbosity() > 0 and self.config.pluginmanager.get_plugin("dsession") is None
        reporter.write(line if ended_by_pytest else line + "\n", cyan=True, flush=True)


def register(config: pytest.Config, interval: float | None) -> None:
    """The progress line, when this process writes results and the verbosity allows it."""
    if interval is None or is_worker(config) or config.get_verbosity() < 0:
        return
    config.pluginmanager.register(ConnicProgress(config, interval), "connic-progress")
