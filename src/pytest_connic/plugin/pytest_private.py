"""Every private part of pytest the plugin uses, in one place, with the pytest releases it was
tested with.

pytest has no public name for these. Nothing else in the package reaches them:
``tests/unit/test_pytest_private.py`` fails on an import of ``_pytest`` or a read of one of the
private attributes below anywhere else, and ``tests/plugin/test_pytest_versions.py`` fails when the
installed pytest lacks one of :data:`PARTS` (:func:`missing`). So a pytest release that moves one
fails the plugin's tests, not a user's session.

| part | what the plugin does with it |
| --- | --- |
| ``_pytest._code.code``: ``TerminalRepr``, ``ExceptionChainRepr``, ``ReprTraceback``, ``ReprEntry``, ``ReprEntryNative``, ``ReprFileLocation``, ``ReprLocals`` (and ``TracebackStyle`` for type checking) | a case's failure report and the user's traceback as pytest's own ``longrepr`` (``plugin/longrepr.py``, ``plugin/usertrace.py``) |
| ``_pytest.junitxml.xml_key``, ``LogXML.node_reporter``, ``LogXML.stats``, ``_NodeReporter.nodes``, ``.attrs``, ``.record_testreport`` | a case that errors in its call phase is an ``<error>`` (``plugin/reporting.py``); a secret in a node id is masked in JUnit (``plugin/masking.py``) |
| ``_pytest.warnings.catch_warnings_for_item`` | an A/B comparison's warnings are its item's (``plugin/ab.py``) |
| ``_pytest._io.TerminalWriter`` | the type of pytest's terminal writer (``plugin/merge.py``) |
| ``_pytest.config.findpaths.determine_setup``, ``Config._parser`` (``parse_known_args``, ``extra_info``), ``Config._rootpath`` | the rootdir a path option's space form moved, put back (``plugin/rootdir.py``) |
| ``TerminalReporter._tw`` (its ``_file``) | the console's encoding: ASCII symbols on a cp1252 console (``plugin/terminal_fit.py``); the progress line's width (``plugin/progress.py``) |
| ``TerminalReporter._determine_main_color``, ``TerminalReporter._main_color`` | a failed coverage gate makes pytest's last line red (``plugin/reporting.py``) |
| ``TerminalReporter.stats["warnings"]`` (``WarningReport``) | a warning shown once per session is shown once for all xdist workers (``plugin/xdist.py``) |
| ``Node._id`` in ``__slots__`` | whether an item's xdist group must be in its node id from the start (``plugin/items.py``) |
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from _pytest._code.code import (
    ExceptionChainRepr,
    ReprEntry,
    ReprEntryNative,
    ReprFileLocation,
    ReprLocals,
    ReprTraceback,
    TerminalRepr,
)
from _pytest._io import TerminalWriter

if TYPE_CHECKING:
    from _pytest._code.code import TracebackStyle as TracebackStyle  # noqa: PLC0414 -- re-exported for typing
    from _pytest.junitxml import LogXML, _NodeReporter
    from pluggy import HookRelay

__all__ = [
    "ExceptionChainRepr", "ReprEntry", "ReprEntryNative", "ReprFileLocation", "ReprLocals", "ReprTraceback",
    "TerminalRepr", "TerminalWriter",
]

#: the pytest releases these parts were tested with: the floor pyproject.toml declares and the
#: newest (tox.ini's matrix runs both)
PYTEST_TESTED = ("8.0.0", "9.2.0")

#: each private module-level name the plugin imports, as ``module:name``
IMPORTED = (
    "_pytest._code.code:ExceptionChainRepr", "_pytest._code.code:ReprEntry", "_pytest._code.code:ReprEntryNative",
    "_pytest._code.code:ReprFileLocation", "_pytest._code.code:ReprLocals", "_pytest._code.code:ReprTraceback",
    "_pytest._code.code:TerminalRepr", "_pytest._io:TerminalWriter",
    "_pytest.junitxml:xml_key", "_pytest.junitxml:LogXML", "_pytest.warnings:catch_warnings_for_item",
    "_pytest.config.findpaths:determine_setup", "_pytest.terminal:WarningReport",
)
#: the private attributes the plugin reads of pytest's objects (``tests/unit/test_pytest_private.py``
#: finds them nowhere else)
ATTRIBUTES = ("_tw", "_file", "_determine_main_color", "_main_color", "_parser", "_rootpath", "node_reporter",
              "_id")


def missing(config: pytest.Config) -> list[str]:
    """The parts this pytest lacks (empty: all there). ``config``: a configured session's, with
    ``--junitxml`` (so that pytest's JUnit writer exists)."""
    gone = []
    for entry in IMPORTED:
        module, _, name = entry.partition(":")
        try:
            getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            gone.append(entry)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    writer = getattr(reporter, "_tw", None)
    xml = junit_xml(config)
    node = xml.node_reporter("x") if xml is not None and hasattr(xml, "node_reporter") else None
    checks: dict[str, Callable[[], bool]] = {
        "TerminalReporter._tw": lambda: isinstance(writer, TerminalWriter),
        "TerminalWriter._file": lambda: hasattr(writer, "_file"),
        "TerminalWriter.fullwidth, width_of_current_line": lambda: all(
            hasattr(writer, a) for a in ("fullwidth", "width_of_current_line")),
        "TerminalReporter._determine_main_color, _main_color": lambda: callable(
            getattr(reporter, "_determine_main_color", None)) and hasattr(reporter, "_main_color"),
        "TerminalReporter.stats": lambda: isinstance(getattr(reporter, "stats", None), dict),
        "Config._parser.parse_known_args, extra_info": lambda: callable(
            getattr(getattr(config, "_parser", None), "parse_known_args", None))
        and isinstance(getattr(config._parser, "extra_info", None), dict),
        "Config._rootpath": lambda: getattr(config, "_rootpath", None) == config.rootpath,
        "LogXML.node_reporter, stats; _NodeReporter.nodes, attrs, record_testreport": lambda: node is not None
        and isinstance(getattr(xml, "stats", None), dict) and isinstance(getattr(node, "nodes", None), list)
        and isinstance(getattr(node, "attrs", None), dict) and callable(getattr(node, "record_testreport", None)),
        "Node._id in __slots__ (pytest 8.4 and later) or Node._nodeid": lambda: structured_node_ids()
        or hasattr(pytest.Item, "_nodeid") or "_nodeid" in getattr(pytest.Item, "__slots__", ()),
    }
    return gone + [name for name, ok in checks.items() if not ok()]


# -- the JUnit writer ----------------------------------------------------------------------------

def junit_xml(config: pytest.Config) -> LogXML | None:
    """pytest's JUnit writer of this session (``LogXML``), None without ``--junitxml``."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - a pytest without it writes no JUnit file we know
        return None
    return config.stash.get(xml_key, None)


def junit_node(config: pytest.Config, report: pytest.TestReport) -> _NodeReporter | None:
    """The ``_NodeReporter`` pytest's JUnit writer records ``report`` in, None without one."""
    xml = junit_xml(config)
    return None if xml is None else xml.node_reporter(report)


def junit_as_error(config: pytest.Config, report: pytest.TestReport) -> None:
    """The ``<failure>`` pytest wrote for ``report`` becomes an ``<error>``, counted as one."""
    xml = junit_xml(config)
    if xml is None:
        return
    for node in xml.node_reporter(report).nodes:
        if node.tag == "failure":
            node.tag = "error"
            xml.stats["failure"] -= 1
            xml.stats["error"] += 1


# -- the terminal reporter -----------------------------------------------------------------------

def terminal_writer(reporter: object) -> TerminalWriter | None:
    """The terminal writer of pytest's terminal reporter (``None``: no reporter)."""
    writer = getattr(reporter, "_tw", None)
    return writer if isinstance(writer, TerminalWriter) else None


def console_encoding(reporter: object) -> str | None:
    """The encoding of the file pytest's terminal writes to (None: unknown)."""
    encoding = getattr(getattr(terminal_writer(reporter), "_file", None), "encoding", None)
    return encoding if isinstance(encoding, str) else None


def red_last_line(reporter: pytest.TerminalReporter) -> None:
    """pytest's last line in red whatever its counts say (recomputed when it is written)."""
    if callable(getattr(reporter, "_determine_main_color", None)) and hasattr(reporter, "_main_color"):
        setattr(reporter, "_determine_main_color", lambda unknown: "red")  # noqa: B010 - a private method
        reporter._main_color = None


def drop_last_warning(config: pytest.Config, nodeid: str, fslocation: tuple[str, int]) -> None:
    """Take the warning just recorded for ``nodeid`` at ``fslocation`` back out of the terminal's
    warnings summary (and of its count in pytest's last line)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    shown = getattr(reporter, "stats", {}).get("warnings") or []
    if shown and getattr(shown[-1], "nodeid", None) == nodeid and getattr(shown[-1], "fslocation", None) == fslocation:
        shown.pop()


# -- the rootdir -----------------------------------------------------------------------------------

def parse_known_args(config: pytest.Config, args: list[str]) -> argparse.Namespace:
    """``args`` parsed with every option pytest knows (the namespace)."""
    return config._parser.parse_known_args(args)


def determine_setup(*, inifile: str | None, override_ini: list[str] | None, args: list[str],
                    rootdir_cmd_arg: str | None, invocation_dir: Path) -> tuple[object, ...]:
    """pytest's own rootdir and ini file search (``_pytest.config.findpaths``), with the keyword
    arguments this pytest's version of it takes (pytest 8.0 has no ``invocation_dir``)."""
    import inspect

    from _pytest.config.findpaths import determine_setup as setup

    known: dict[str, object] = {"inifile": inifile, "override_ini": override_ini, "args": args,
                                "rootdir_cmd_arg": rootdir_cmd_arg, "invocation_dir": invocation_dir}
    accepted = inspect.signature(setup).parameters
    found: tuple[object, ...] = setup(**{k: v for k, v in known.items() if k in accepted})  # type: ignore[arg-type]
    return found


def set_rootpath(config: pytest.Config, rootpath: object) -> None:
    """pytest's rootdir (its own field, set once in ``parse()``) and its header's ``rootdir:``."""
    config._rootpath = rootpath  # type: ignore[assignment]
    config._parser.extra_info["rootdir"] = str(rootpath)


# -- items and warnings ----------------------------------------------------------------------------

def structured_node_ids() -> bool:
    """Whether this pytest keeps node ids structured (``Node._id``), ignoring an assignment of
    ``item._nodeid`` (pytest-xdist#1386)."""
    return any("_id" in getattr(cls, "__slots__", ()) for cls in pytest.Item.__mro__)


def catch_warnings_for_item(config: pytest.Config, ihook: HookRelay, when: str,
                            item: pytest.Item) -> AbstractContextManager[None]:
    """pytest's capture of an item's warnings (its filters, its summary), as for its own phases."""
    from _pytest.warnings import catch_warnings_for_item as catch

    return catch(config, ihook, when, item)  # type: ignore[arg-type]
