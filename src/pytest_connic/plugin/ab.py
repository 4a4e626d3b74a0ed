"""``--connic-ab``: the pytest side of A/B comparisons.

Registered by ``plugin.activation.activate`` only when ``--connic-ab`` is given. A
case's comparison runs right after the case's own runtest protocol has finished
and reported (outside pytest-timeout's timer), so the item keeps exactly the
verdict it has without ``--connic-ab``. Per-case results live under a
``pytest.StashKey``, travel from xdist workers through ``workeroutput`` and are
analysed once, on the controller.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_connic.ab.options import ABOptions, ABOptionsError
from pytest_connic.jsonsafe import JsonObject
from pytest_connic.plugin.xdist import is_worker

if TYPE_CHECKING:
    from pytest_connic.plugin.items import CaseItem
    from pytest_connic.plugin.options import Settings
    from pytest_connic.plugin.session import ConnicSession

WORKER_KEY = "connic_ab"


class ABSession:
    """What one process knows about the comparison: its options and per-case results."""

    def __init__(self, options: ABOptions, latencies: str = "local") -> None:
        self.options = options
        #: ``measured`` (every model call went to its provider) or ``local`` (a replay's timings)
        self.latencies = latencies
        self.entries: list[dict[str, object]] = []
        self._selection: dict[Path, dict[str, list[str]]] = {}
        self._section: dict[str, object] | None = None

    def selection(self, state: ConnicSession, root: Path) -> dict[str, list[str]]:
        """``{base agent: [variants]}`` selected in the project at ``root``."""
        if root not in self._selection:
            from pytest_connic.ab.selection import select

            self._selection[root] = select(state.runtimes.project_index(root).agents, self.options.variant)
        return self._selection[root]

    def section(self) -> dict[str, object]:
        """The analysed ``ab`` section (computed once, after every entry arrived)."""
        if self._section is None:
            from pytest_connic.ab.analysis import build_section

            self._section = {**build_section(self.entries, self.options), "latencies": self.latencies}
        return self._section


AB_KEY = pytest.StashKey[ABSession]()


def _percent(settings: Settings, name: str) -> float | None:
    value = getattr(settings, name)
    return None if value is None else float(value) / 100.0


def options_from_settings(settings: Settings) -> ABOptions:
    """The session's ``ABOptions``; a setting that makes no plan is a usage error naming its source."""
    confidence = _percent(settings, "ab_confidence")
    options = ABOptions(
        variant=str(settings.ab).strip(),
        mode=settings.ab_mode,
        min_runs=settings.ab_min_runs,
        baseline=_percent(settings, "ab_baseline") or 0.0,
        mde=_percent(settings, "ab_mde"),
        margin=_percent(settings, "ab_margin"),
        alpha=round(1.0 - (confidence if confidence is not None else 0.95), 12),
        power=_percent(settings, "ab_power") or 0.0,
        futility=_percent(settings, "ab_futility"),
        safety_window=settings.ab_safety_window,
        safety_max_failure_rate=_percent(settings, "ab_safety_threshold") or 0.0,
    )
    if not options.variant:
        raise pytest.UsageError(f"invalid value '' from {settings.source('ab')}: expected a variant or 'all'")
    if options.safety_max_failure_rate >= 1.0:
        raise pytest.UsageError(f"invalid value {settings.ab_safety_threshold!r} from "
                                f"{settings.source('ab_safety_threshold')}: must be below 100")
    try:
        options.plan()
    except ABOptionsError as exc:
        names = ("ab_baseline", "ab_mde", "ab_margin", "ab_confidence", "ab_power", "ab_futility")
        sources = ", ".join(settings.source(n) for n in names if settings.source(n) != "default")
        raise pytest.UsageError(f"no A/B confidence plan from {sources or 'the defaults'}: {exc}") from None
    return options


def register(config: pytest.Config, state: ConnicSession) -> None:
    """Register the A/B plugins when ``--connic-ab`` is given (the xdist part on a controller only)."""
    if not state.settings.ab or state.settings.coverage:
        return
    import importlib.util

    if importlib.util.find_spec("scipy") is None:
        raise pytest.UsageError(f"{state.settings.source('ab')} needs SciPy: pip install 'pytest-connic[stats]'")
    config.stash[AB_KEY] = ABSession(options_from_settings(state.settings), _latencies(config, state.settings))
    if not is_worker(config):  # the controller has checked it before any worker starts
        check_selection(config, state, _roots_from_args(config))
    config.pluginmanager.register(ABPlugin(config, state), "connic-ab")
    if config.pluginmanager.hasplugin("xdist") and not is_worker(config):
        config.pluginmanager.register(ABXdist(config), "connic-ab-xdist")


def _latencies(config: pytest.Config, settings: Settings) -> str:
    """``measured`` when every model call of both arms goes to its provider (``--connic-live``,
    ``--connic-record-mode=all``, no model hook): then the arms' latencies compare; else ``local``,
    the timings of replayed (or scripted) models on this machine."""
    from pytest_connic.plugin.defaults import user_implements

    hooked = user_implements(config, "pytest_connic_make_model")
    return "measured" if (settings.live or settings.record_mode == "all") and not hooked else "local"


def _roots_from_args(config: pytest.Config) -> set[Path]:
    """The Connic projects that hold (or are above) the paths pytest was given."""
    from pytest_connic.project.layout import find_project_root

    roots = set()
    base = Path(config.invocation_params.dir)
    for arg in config.args:
        path = base / str(arg).split("::", 1)[0]
        root = find_project_root(path if path.is_dir() else path.parent)
        if root is not None:
            roots.add(root)
    return roots


def check_selection(config: pytest.Config, state: ConnicSession, roots: set[Path]) -> None:
    """A ``VARIANT`` that names no variant agent of any of these projects is a usage error."""
    from pytest_connic.ab.selection import no_match_message, variants
    from pytest_connic.project.layout import DiscoveryError
    from pytest_connic.project.load import ProjectError

    ab = config.stash[AB_KEY]
    try:
        if not roots or any(ab.selection(state, root) for root in roots):
            return
        known = sorted({v for root in roots for v in variants(state.runtimes.project_index(root).agents)})
    except (ProjectError, DiscoveryError):
        return  # collection reports a project that does not load
    raise pytest.UsageError(no_match_message(ab.options.variant, known, state.settings.source("ab")))


def add_section(config: pytest.Config, report: JsonObject) -> None:
    """Add the ``ab`` key to a JSON report (nothing without ``--connic-ab``)."""
    ab = config.stash.get(AB_KEY, None)
    if ab is not None:
        from pytest_connic.jsonsafe import masked
        from pytest_connic.plugin.session import state

        report["ab"] = masked(ab.section(), state(config).masker)


@contextlib.contextmanager
def _warnings_of(item: pytest.Item) -> Iterator[None]:
    """The comparison's runs run after the item's protocol (so outside its timeout and its own
    warning capture): what they warn (a variant's hand-written cassette, say) is the item's, in
    pytest's warnings summary under the item's filters, as pytest captures its own runs' warnings;
    not printed raw on stderr. Without pytest's warnings plugin (``-p no:warnings``) nothing is
    captured, as for the item itself."""
    if not item.config.pluginmanager.has_plugin("warnings"):
        yield
        return
    from pytest_connic.plugin.pytest_private import catch_warnings_for_item

    with catch_warnings_for_item(item.config, item.ihook, "runtest", item):
        yield


class ABPlugin:
    """Runs the comparison of each case of a base agent, and reports it."""

    def __init__(self, config: pytest.Config, state: ConnicSession) -> None:
        self.config = config
        self.state = state
        self.ab = config.stash[AB_KEY]

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """The same check over the projects collection found (those below the given paths); an
        xdist worker cannot end the session with a usage error, so it leaves this to the controller."""
        from pytest_connic.plugin.items import CaseItem

        if not is_worker(self.config):
            check_selection(self.config, self.state, {i.project_root for i in items if isinstance(i, CaseItem)})

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[
            None, object, object]:
        result = yield
        from pytest_connic.plugin.items import CaseItem

        if isinstance(item, CaseItem):
            self._compare(item)
        return result

    def _compare(self, item: CaseItem) -> None:
        outcome = item.outcome
        if outcome is None or item.spec.resolved is None or item.spec.error is not None:
            return
        variants = self.ab.selection(self.state, item.project_root).get(item.suite.agent_name)
        if not variants:
            return
        from pytest_connic.ab.experiment import ComparedCase, compare_case
        from pytest_connic.project.load import ProjectError

        try:
            runtime = self.state.runtimes.runtime(item.project_root)
        except ProjectError:
            return  # the item has failed with this error already
        case = ComparedCase(item.nodeid, item.suite, item.spec)
        with _warnings_of(item):
            self.ab.entries.extend(compare_case(runtime, case, outcome, item.suite.agent_name, variants,
                                                self.ab.options))

    def pytest_sessionfinish(self) -> None:
        if is_worker(self.config):
            from pytest_connic.jsonsafe import masked

            entries = [masked(e, self.state.masker) for e in self.ab.entries]
            self.config.workeroutput[WORKER_KEY] = json.dumps(entries)  # type: ignore[attr-defined]

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if is_worker(self.config) or self.config.option.collectonly:
            return
        from pytest_connic.jsonsafe import masked
        from pytest_connic.plugin.terminal_fit import console_encoding, table_width
        from pytest_connic.reports.ab_report import terminal_lines

        lines = terminal_lines(masked(self.ab.section(), self.state.masker), table_width(self.config),
                               console_encoding(terminalreporter))
        if lines:
            from pytest_connic.plugin.terminal_fit import write_lines

            terminalreporter.write_sep("=", f"connic A/B ({self.ab.options.mode})")
            write_lines(terminalreporter, lines)  # the tables fit already; a long note folds


class ABXdist:
    """Merges the workers' per-case results into the controller's."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_testnodedown(self, node: object, error: object) -> None:
        raw = (getattr(node, "workeroutput", None) or {}).get(WORKER_KEY)
        if raw:
            self.config.stash[AB_KEY].entries.extend(json.loads(raw))
