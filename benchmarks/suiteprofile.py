"""A pytest plugin for ``benchmarks/suite.py profile``: each test's wall and CPU time and its
inner pytest sessions by kind, written as JSON per process (xdist worker or not).

    PYTHONPATH=benchmarks SUITEPROFILE_OUT=/tmp/out python -m pytest -n 2 tests -p suiteprofile

Kinds: ``in-process`` (pytester's ``inline_run``), ``subprocess`` (any ``python -m pytest``
started with ``subprocess.Popen``: pytester's ``runpytest_subprocess`` and the tests' own), each
with ``-n`` when the inner session runs xdist workers. CPU is this process's and its reaped
children's (``getrusage``): the CPU of a fork server or template that a child left running for
its parent's parent to reap is not in it. Not a test of anything; it only records.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

_RECORDS: dict[str, dict[str, Any]] = {}
_CURRENT: list[str | None] = [None]


def _xdist(args: object) -> bool:
    words = [str(a) for a in args] if isinstance(args, (list, tuple)) else str(args).split()
    return any(w == "-n" or (w.startswith("-n") and w[2:].isdigit()) or w.startswith("--dist") for w in words)


def _count(kind: str, args: object) -> None:
    if _CURRENT[0] is None:
        return
    if _xdist(args):
        kind += " -n"
    sessions = _RECORDS.setdefault(_CURRENT[0], {}).setdefault("sessions", {})
    sessions[kind] = sessions.get(kind, 0) + 1


_inline_run = pytest.Pytester.inline_run


def _counted_inline_run(self: pytest.Pytester, *args: Any, **kwargs: Any) -> Any:
    _count("in-process", args)
    return _inline_run(self, *args, **kwargs)


pytest.Pytester.inline_run = _counted_inline_run  # type: ignore[method-assign]

_popen_init = subprocess.Popen.__init__


def _counted_popen_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
    words = [str(a) for a in args] if isinstance(args, (list, tuple)) else str(args).split()
    if "-mpytest" in words or any(words[i:i + 2] == ["-m", "pytest"] for i in range(len(words) - 1)):
        _count("subprocess", words)
    _popen_init(self, args, *rest, **kwargs)


subprocess.Popen.__init__ = _counted_popen_init  # type: ignore[method-assign]


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    _CURRENT[0] = item.nodeid
    started, cpu = time.perf_counter(), _cpu()
    try:
        return (yield)
    finally:
        record = _RECORDS.setdefault(item.nodeid, {})
        record["wall"] = time.perf_counter() - started
        record["cpu"] = _cpu() - cpu
        _CURRENT[0] = None


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("SUITEPROFILE_OUT")
    if out and _RECORDS:
        name = os.environ.get("PYTEST_XDIST_WORKER", "main")
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"{name}.json").write_text(json.dumps(_RECORDS), "utf-8")
