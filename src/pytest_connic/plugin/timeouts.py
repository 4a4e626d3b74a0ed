"""pytest-timeout: each case gets a timeout derived from its runs, unless the user chose one; when
it fires on a case, the report shows the case's located line and the user's stack, never the
stacks of the plugin's own threads (docs/running.md "Timeouts")."""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from collections.abc import Generator
from pathlib import Path
from types import FrameType
from typing import Protocol

import pytest

from pytest_connic.plugin.items import CaseItem
from pytest_connic.plugin.session import state as state_of


def explicit_timeout(config: pytest.Config) -> bool:
    """Whether the user set pytest-timeout's timeout (``--timeout``, ``PYTEST_TIMEOUT`` or ini
    ``timeout``, ``0`` included: it means "no timeout")."""
    if config.getoption("timeout", None) is not None or os.environ.get("PYTEST_TIMEOUT", "").strip():
        return True
    try:
        return bool(str(config.getini("timeout") or "").strip())
    except ValueError:
        return False


def case_timeout(runs: int, timeout_s: float, concurrency: int, builder: bool = False) -> float:
    """Seconds a whole case may take: its runs in waves of ``concurrency``, each wave bounded by
    ``timeout_s`` (three times over with a builder: ``build()``, the run and ``cleanup()`` are each
    bounded by it), plus 30 s for worker start-up, middleware cleanup and cassette I/O."""
    waves = -(-int(runs) // max(1, concurrency))
    return waves * float(timeout_s) * (3 if builder else 1) + 30


def set_timeouts(config: pytest.Config, items: list[CaseItem], concurrency: int) -> None:
    """With pytest-timeout installed and no explicit timeout, give each case one derived from
    its runs, the runs it executes at once (its agent's ``max_concurrent_runs``, Connic's default 1,
    within ``concurrency``) and ``timeout_s``, so a hung tool cannot hang CI. A marker would
    beat ``--timeout`` in pytest-timeout, so none is added when the user chose a timeout."""
    if not items or not _has_timeout_plugin(config) or explicit_timeout(config):
        return
    from pytest_connic.execution.concurrency import case_concurrency

    state = state_of(config)
    marks: dict[float, pytest.MarkDecorator] = {}  # one (immutable) marker per value, not one per case
    for item in items:
        if item.get_closest_marker("timeout") is not None or item.spec.resolved is None:
            continue
        resolved = item.spec.resolved
        at_once = case_concurrency(state.runtimes.project_index(item.project_root).agents, item.suite.agent_name, concurrency)
        seconds = case_timeout(resolved["runs"], resolved["timeout_s"], at_once, bool(resolved.get("builder")))
        if seconds not in marks:
            marks[seconds] = pytest.mark.timeout(seconds)
        item.add_marker(marks[seconds])


def _has_timeout_plugin(config: pytest.Config) -> bool:
    """pytest-timeout, loaded by its entry point (``timeout``) or as ``-p pytest_timeout``."""
    manager = config.pluginmanager
    return manager.hasplugin("timeout") or manager.hasplugin("pytest_timeout")


def register_case_timers(config: pytest.Config) -> None:
    """:class:`CaseTimers` registered with a pytest-timeout that has the timer hooks (2.1 and later)."""
    manager = config.pluginmanager
    if _has_timeout_plugin(config) and hasattr(manager.hook, "pytest_timeout_set_timer") \
            and not manager.has_plugin("connic-case-timers"):
        manager.register(CaseTimers(), "connic-case-timers")


def user_stacks(root: Path) -> list[tuple[str, str]]:
    """``(thread name, stack)`` of every other thread of this process that is running user code
    (a frame under the project ``root``), the stack cut to start at the first user frame. Under
    process isolation there is none: user code runs in a worker process."""
    names = {t.ident: t.name for t in threading.enumerate()}
    base = str(root.resolve()) + os.sep
    found = []
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident():
            continue
        frames = traceback.extract_stack(frame)
        first = next((i for i, f in enumerate(frames) if f.filename.startswith(base)), None)
        if first is not None:
            found.append((names.get(ident, str(ident)), "".join(traceback.format_list(frames[first:]))))
    return found


def stack_lines(root: Path) -> list[str]:
    """The user's stacks as lines, in pytest-timeout's shape (``~~ Stack of ... ~~``)."""
    lines = []
    for name, stack in user_stacks(root):
        lines.append(f" Stack of user code ({name}) ".center(60, "~"))
        lines.extend(stack.rstrip("\n").splitlines())
    return lines


def write_user_stacks(terminal: _Writer, root: Path) -> None:
    """The user's stacks, in pytest-timeout's shape (``~~ Stack of ... ~~``)."""
    for name, stack in user_stacks(root):
        terminal.sep("~", title=f"Stack of user code ({name})")
        terminal.write(stack)


class _Writer(Protocol):
    """pytest's terminal writer, as far as the stacks use it."""

    def sep(self, sepchar: str, title: str | None = None) -> None: ...

    def write(self, msg: str) -> None: ...


class TimeoutSettings(Protocol):
    """pytest-timeout's ``Settings`` (the package ships no types)."""

    timeout: float
    method: str
    disable_debugger_detection: bool


class CaseTimers:
    """pytest-timeout's timer for Connic cases (its ``pytest_timeout_set_timer`` hook): the same
    methods, timeouts and debugger detection, without its dump of every thread's stack, which for a
    case shows the plugin's threads waiting on a worker. ``signal``: the case fails with
    pytest-timeout's message in one located line (the user's stacks follow it, in the failure itself);
    ``thread``: the case's located line and the user's stacks, then the session ends, as
    pytest-timeout ends it."""

    @pytest.hookimpl(wrapper=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: TimeoutSettings) -> Generator[None, object, object]:
        """When pytest-timeout's own implementation set the timer of a case (not a conftest's or
        another plugin's), it is replaced by this one, with the same method and timeout."""
        result = yield
        cancel: object = getattr(item, "cancel_timeout", None)
        if isinstance(item, CaseItem) and result and callable(cancel) and getattr(cancel, "__module__", None) == "pytest_timeout":
            cancel()
            self._set_timer(item, settings)
        return result

    def _set_timer(self, item: CaseItem, settings: TimeoutSettings) -> None:
        import pytest_timeout

        # pytest-timeout's own failure message (2.4 and later; "Timeout >Ns" before)
        message = getattr(pytest_timeout, "PYTEST_FAILURE_MESSAGE", "Timeout >%ss") % settings.timeout
        if settings.method == "signal" and threading.current_thread() is threading.main_thread():
            def handler(signum: int, frame: FrameType | None) -> None:
                __tracebackhide__ = True
                if _debugging(settings):
                    return
                # in the failure itself, after its located line: written to the terminal here, the
                # stacks would land wherever pytest's capture happens to stand when the alarm fires
                pytest.fail("\n".join([message, *stack_lines(item.project_root)]), pytrace=False)

            def cancel() -> None:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, signal.SIG_DFL)

            signal.signal(signal.SIGALRM, handler)
            signal.setitimer(signal.ITIMER_REAL, settings.timeout)
        else:
            timer = threading.Timer(settings.timeout, _timer_expired, (item, settings, message))
            timer.name = f"pytest_timeout {item.nodeid}"

            def cancel() -> None:
                timer.cancel()
                timer.join()

            timer.start()
        item.cancel_timeout = cancel  # type: ignore[attr-defined]  # pytest-timeout's cancel hook calls it


def _debugging(settings: TimeoutSettings) -> bool:
    """pytest-timeout's own check: a debugger is active (the timeout then does not fire)."""
    from pytest_timeout import is_debugging

    return not settings.disable_debugger_detection and bool(is_debugging())


def _timer_expired(item: CaseItem, settings: TimeoutSettings, message: str) -> None:
    """The ``thread`` method: what pytest-timeout writes (the captured output), then the case's
    located line and the user's stacks instead of every thread's; the process ends as pytest-timeout
    ends it (``os._exit(1)``)."""
    if _debugging(settings):
        return
    terminal = item.config.get_terminal_writer()
    try:
        capman = item.config.pluginmanager.getplugin("capturemanager")
        out, err = "", ""
        if capman is not None:
            capman.suspend_global_capture(item)
            out, err = capman.read_global_capture()
        terminal.sep("+", title="Timeout")
        for title, text in (("Captured stdout", out), ("Captured stderr", err)):
            if text:
                terminal.sep("~", title=title)
                terminal.write(text)
        terminal.line(f"{item.suite.relpath}:{item.spec.line}: case '{item.spec.name}' "
                      f"({item.suite.agent_name}): {message}")
        write_user_stacks(terminal, item.project_root)
        terminal.sep("+", title="Timeout")
    except Exception:  # noqa: BLE001 -- as pytest-timeout: the process ends whatever happens here
        traceback.print_exc()
    finally:
        terminal.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
