"""Across sessions, the pytest side: the history written once per session (on the xdist controller
or the only process), the changes and flaky cases the reports mark, the flaky mode's exit code,
and the budget ledger every process of the session charges (``history/``)."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_connic.plugin.budget import LEDGER_INPUT, budget_for
from pytest_connic.plugin.options import SETTINGS_KEY, Settings

if TYPE_CHECKING:
    from pytest_connic.compare.sides import Side
    from pytest_connic.history.store import CaseRow, SessionRow
    from pytest_connic.plugin.session import ConnicSession
    from pytest_connic.plugin.xdist import WorkerNode
    from pytest_connic.records.outcome import CaseOutcome
    from pytest_connic.secrets import Masker

#: sessions read for trends and flakiness
RECENT = 50


def history_path(config: pytest.Config, settings: Settings) -> Path | None:
    """``--connic-history`` / ini ``connic_history``, else under pytest's cache (none without it)."""
    value = settings.history
    if value is not None and value.strip().lower() == "none":
        return None
    if value:
        path = Path(value)
        if not path.is_absolute():
            base = config.invocation_params.dir if settings.source("history").startswith("--") else config.rootpath
            path = Path(base) / path
        return path
    cache = getattr(config, "cache", None)
    if cache is None:
        return None  # -p no:cacheprovider: the user keeps no cache, so no history either
    folder = Path(os.path.expandvars(os.path.expanduser(str(config.getini("cache_dir")))))
    path = (folder if folder.is_absolute() else config.rootpath / folder) / "connic" / "history.sqlite"
    # pytest creates its cache folder with its .gitignore and CACHEDIR.TAG, so the history is
    # never committed by accident; the value says where the history is
    cache.set("connic/history", str(path))
    return path


def git(root: Path, *args: str, timeout: float = 10) -> str | None:
    """What ``git <args>`` prints in ``root`` (stripped), None when it fails or prints nothing."""
    import subprocess

    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


class ConnicHistory:
    """Registered on the xdist controller or the only process of every session."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings: Settings = config.stash[SETTINGS_KEY]
        self.since: str | None = None
        #: ``--connic-compare REF``'s side, read at the session's start (``plugin/compare.py``)
        self.reference: Side | None = None
        self.failed: set[str] = set()
        self.collect_failed = False
        self._path: str | None = None
        #: what the history says beside a kept session (damaged rows skipped), one line each
        self.notes: list[str] = []

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: WorkerNode) -> None:
        """xdist: every worker charges the controller's ledger."""
        budget = budget_for(self.config)
        if budget is not None:
            node.workerinput[LEDGER_INPUT] = str(budget.path)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.settings.compare is not None:
            from pytest_connic.plugin.compare import resolve_reference

            self.reference = resolve_reference(self.config, self.settings.compare,
                                               history_path(self.config, self.settings))
            self.notes += self.reference.notes
        ref = self.settings.since
        if ref is None:
            return
        commit = git(self.config.rootpath, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        if commit is None:
            raise pytest.UsageError(f"invalid value {ref!r} from --connic-since: git cannot resolve it to a "
                                    f"commit in {self.config.rootpath}")
        self.since = commit

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collect_failed = True

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed.add(report.nodeid)

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Generator[None, None, None]:
        from pytest_connic.plugin.session import SESSION_KEY

        # first of every implementation: the reports written after it show the history, and
        # ``ConnicLifecycle`` still raises the exit code to 2 for an infrastructure error
        state = self.config.stash.get(SESSION_KEY, None)
        active = state is not None and bool(state.ledger.outcomes) and not state.settings.coverage
        if state is not None and active:
            try:
                pending = self._prepare(state)
                if pending is not None:
                    self._write(state, *pending)
                    self._flaky_exit(state, session)
            except Exception as exc:  # noqa: BLE001 - a history never takes the reports down
                state.reports.set_history(None)
                self._warn(state, f"history {self._path or '(no path)'}: {type(exc).__name__}: {exc}")
        try:
            return (yield)
        finally:
            if state is not None and active:
                from pytest_connic.plugin.compare import write_summary

                # last, after every report (JUnit XML too): a summary that cannot be written, or
                # that would block, never costs another report
                try:
                    write_summary(state)
                except Exception as exc:  # noqa: BLE001 - nor the session's own outcome
                    state.reports.output_failed(f"cannot write the Markdown summary: {type(exc).__name__}: {exc}")

    def _prepare(self, state: ConnicSession) -> tuple[Path, SessionRow, list[CaseRow]] | None:
        import shlex
        from dataclasses import replace
        from datetime import datetime, timezone

        from pytest_connic.history.store import HistoryError, HistoryStore, SessionRow
        from pytest_connic.history.view import build_view

        budget = budget_for(self.config)
        spend = budget.spend() if budget is not None else None
        if budget is not None and spend is not None:
            state.reports.set_budget_section({
                "tokens": spend.tokens, "cost": spend.cost, "runs": spend.runs,
                "budget_tokens": budget.tokens, "budget_cost": budget.cost, "text": budget.describe(spend),
                "left_out": sorted(o.nodeid for o in state.ledger.outcomes if o.left_out is not None),
            })
        path = history_path(self.config, state.settings)
        self._path = None if path is None else str(path)
        if path is None and self.reference is None:
            return None
        digests = _Digests(self.config, state.ledger.outcomes)
        # a secret in a case name (or the command line) is masked in the history as everywhere the
        # plugin writes it; the masking is the same in every session, so sessions still compare
        masked = state.masker.text
        rows = {row.nodeid: row for row in (replace(case_row(o, digests, state.masker), nodeid=masked(o.nodeid))
                                            for o in state.ledger.outcomes)}
        commit = git(self.config.rootpath, "rev-parse", "HEAD")
        session = SessionRow(datetime.now(timezone.utc).isoformat(timespec="seconds"), commit,
                             masked(shlex.join(["pytest", *self.config.invocation_params.args])),
                             masked(selection(self.config)),
                             spend.tokens if spend else sum(r.input_tokens + r.output_tokens for r in rows.values()),
                             spend.cost if spend else sum(r.cost for r in rows.values()))
        if self.reference is not None:
            from pytest_connic.plugin.compare import compare_session

            compare_session(self.config, self.reference, rows)
        if path is None:
            return None
        refused = self._refused(path)
        if refused is not None:
            self._warn(state, refused)
            return None
        store = HistoryStore(path)
        try:
            past = store.sessions(session.selection, limit=RECENT)
            compared = past[-1] if past else None
            note = None
            if self.since is not None:
                at = store.sessions(None, limit=1, commit=self.since)
                compared = at[-1] if at else None
                if compared is None:
                    note = f"no session at commit {self.since[:12]} (--connic-since {self.settings.since})"
        except HistoryError as exc:
            self._warn(state, str(exc))
            return None
        skipped = store.skipped_text()
        if skipped is not None:
            self.notes.append(skipped)
        state.reports.set_history(build_view(str(path), rows, past, compared, window=self.settings.flaky_window, note=note))
        return path, session, list(rows.values())

    def _refused(self, path: Path) -> str | None:
        """Why the history may not be kept at ``path`` (links followed; the default path too, which
        a restored CI cache may have made a link): an input of one of the session's projects."""
        from pytest_connic.plugin.outputguard import project_roots
        from pytest_connic.project.inputs import refused_output

        what = refused_output(path, project_roots(self.config), self.settings.cassette_dir)
        if what is None:
            return None
        return (f"history {path}: it names {what}; a history is never written over the project's inputs, "
                "and it was left as it is (choose another path: --connic-history)")

    def _write(self, state: ConnicSession, path: Path, session: SessionRow, rows: list[CaseRow]) -> None:
        from pytest_connic.history.store import HistoryError, HistoryStore

        try:
            HistoryStore(path).append(session, rows)
        except HistoryError as exc:
            self._warn(state, str(exc))

    def _warn(self, state: ConnicSession, message: str) -> None:
        """Kept for the terminal summary: there, pytest's warnings summary shows the warning."""
        state.reports.history_failed(message)

    def _emit_warning(self, message: str) -> None:
        import linecache

        from pytest_connic.warnings import ConnicHistoryWarning

        filename = self._path or "history"
        # the warnings summary shows the line of its location: the history file has no line to
        # show, and reading it for one would hang on a FIFO and read a large file whole
        linecache.cache[filename] = (0, None, [], filename)
        try:
            # located at the history file, not at pytest-connic's source
            warnings.warn_explicit(ConnicHistoryWarning(message), ConnicHistoryWarning, filename, 0)
        except ConnicHistoryWarning:
            pass  # -W error: the summary line says it; a history never fails the session

    def _flaky_exit(self, state: ConnicSession, session: pytest.Session) -> None:
        """``--connic-flaky=fail``: a flaky case fails the session; ``skip``: only flaky cases failed,
        so the session does not."""
        flaky = set(state.reports.history.flaky()) if state.reports.history is not None else set()
        failed = {state.masker.text(nodeid) for nodeid in self.failed}  # the history's ids are masked
        mode = state.settings.flaky
        if not flaky or mode == "report":
            return
        if mode == "fail" and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif (mode == "skip" and session.exitstatus == pytest.ExitCode.TESTS_FAILED and failed
              and failed <= flaky and not self.collect_failed):
            session.exitstatus = pytest.ExitCode.OK

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        from pytest_connic.plugin.session import SESSION_KEY

        state = self.config.stash.get(SESSION_KEY, None)
        if state is None:
            return
        from pytest_connic.history.view import terminal_lines

        lines = terminal_lines(state.reports.history) if state.reports.history is not None else []
        for note in self.notes:
            lines.append(f"  history: {note}")
            self._emit_warning(note)
        if state.reports.history_warning:
            lines.append(f"  history: not kept this time: {state.reports.history_warning}")
            self._emit_warning(state.reports.history_warning)
        if state.reports.history is not None and state.reports.history.flaky() and state.settings.flaky != "report":
            effect = "fail the session" if state.settings.flaky == "fail" else "do not fail the session"
            lines.append(f"  flaky cases {effect} (--connic-flaky={state.settings.flaky})")
        budget = state.reports.budget_section
        if budget is not None:
            left = [str(nodeid) for nodeid in budget["left_out"]] if isinstance(budget["left_out"], list) else []
            lines.append(f"  {budget['text']}" + (f"; left out {len(left)} case(s): {', '.join(left)}" if left else ""))
        from pytest_connic.plugin.terminal_fit import write_lines

        write_lines(terminalreporter, lines)
        from pytest_connic.plugin.compare import terminal_summary

        terminal_summary(self.config, terminalreporter)


def selection(config: pytest.Config) -> str:
    """What selected this session's cases: its path arguments (from the root dir), ``-k``, ``-m``
    and ``--connic-filter``; ``-n``, report and budget options do not change it."""
    root = config.rootpath
    args = []
    for arg in config.args:
        path, sep, rest = str(arg).partition("::")
        try:
            rel = Path(path).resolve().relative_to(root).as_posix()
        except ValueError:
            rel = path
        args.append(rel + sep + rest)
    keyword = config.getoption("keyword", "") or ""
    marks = config.getoption("markexpr", "") or ""
    text = config.getoption("connic_filter", None) or ""  # --connic-filter selects cases too
    return (" ".join(sorted(args)) + (f" -k {keyword}" if keyword else "") + (f" -m {marks}" if marks else "")
            + (f" --connic-filter {text}" if text else ""))


def _digest(paths: list[Path]) -> str | None:
    import hashlib

    found = [p for p in paths if p.is_file()]
    if not found:
        return None
    digest = hashlib.sha256()
    for path in sorted(found):
        digest.update(path.name.encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            continue
    return digest.hexdigest()[:16]


def project_root(config: pytest.Config, outcome: CaseOutcome) -> Path | None:
    """The case's project root, from its node id (from pytest's root dir) and its suite path (from
    the project root): both are known on the xdist controller, which has no items."""
    file = outcome.nodeid.partition("::")[0]
    suite = outcome.suite_path
    if not file.endswith(suite):
        return None
    return config.rootpath / file[: len(file) - len(suite)]


class _Digests:
    """The cassette and configuration digests of a session's cases: each suite's case names once,
    each file's digest and each agent's reach once (``CaseParts``), not once per case."""

    def __init__(self, config: pytest.Config, outcomes: Sequence[CaseOutcome]) -> None:
        self.config = config
        self.cassette_dir = config.stash[SETTINGS_KEY].cassette_dir
        self.siblings: dict[str, list[str]] = {}
        for o in outcomes:
            self.siblings.setdefault(o.suite_path, []).append(o.case_name)
        from pytest_connic.plugin.digests import CaseParts

        self.parts = CaseParts(config.stash[SETTINGS_KEY])

    def cassette(self, root: Path, outcome: CaseOutcome) -> str | None:
        from pytest_connic.models.cassette_paths import cassette_path

        try:
            return _digest([cassette_path(root / self.cassette_dir, outcome.suite_path, outcome.case_name,
                                          siblings=self.siblings[outcome.suite_path], suites_root=root)])
        except Exception:  # noqa: BLE001  (a case name no cassette can have: no digest)
            return None

    def configuration(self, root: Path, outcome: CaseOutcome) -> tuple[str, str]:
        """The case's configuration: one digest, and its parts as JSON (plugin/digests.py)."""
        from pytest_connic.plugin.digests import combined

        parts = self.parts.parts(root, outcome.suite_path, outcome.case_name, outcome.agent_name)
        return combined(parts), json.dumps(parts, sort_keys=True)


def case_row(outcome: CaseOutcome, digests: _Digests, masker: Masker) -> CaseRow:
    """One outcome as stored: its verdict, numbers, the digests of its cassette and agent, and
    its behaviour (masked, bounded by ``connic_report_value_limit``) for comparisons."""
    from pytest_connic.history.behaviour import RUN_KEYS, behaviour_text, case_behaviour
    from pytest_connic.history.store import CaseRow
    from pytest_connic.jsonsafe import masked
    from pytest_connic.reports.stats import case_status, case_wilson, pass_rate

    cassette = config_digest = parts = None
    root = project_root(digests.config, outcome)
    if root is not None:
        cassette = digests.cassette(root, outcome)
        config_digest, parts = digests.configuration(root, outcome)
    interval = case_wilson(outcome)
    verdict = "skipped" if outcome.left_out is not None else case_status(outcome)
    return CaseRow(
        nodeid=outcome.nodeid, verdict=verdict, successes=outcome.successes, executed=len(outcome.executed),
        runs=outcome.runs, pass_rate=pass_rate(outcome), rate_low=interval[0] if interval else None,
        rate_high=interval[1] if interval else None, input_tokens=outcome.input_tokens,
        output_tokens=outcome.output_tokens, cost=round(outcome.cost, 8), latency_ms=outcome.median_latency_ms,
        cassette_digest=cassette, config_digest=config_digest, config_parts=parts,
        behaviour=behaviour_text(case_behaviour(
            agent=masker.text(outcome.agent_name), name=masker.text(outcome.case_name),
            suite=masker.text(outcome.suite_path), line=outcome.line,
            runs=[masked({k: v for k, v in r.to_dict().items() if k in RUN_KEYS}, masker) for r in outcome.records])),
    )
