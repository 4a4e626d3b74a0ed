"""Bounds on work in place of bounds on time: the Python function calls a block of code makes.

A count is the same on a loaded machine as on an idle one, and a quadratic regression still shows
in it. Time bounds belong in ``benchmarks/``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


class CallCount:
    """The Python function calls counted so far (``calls``)."""

    def __init__(self) -> None:
        self.calls = 0


@contextmanager
def counting_calls() -> Iterator[CallCount]:
    """Count the Python function calls made in this thread inside the ``with`` block."""
    count = CallCount()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            count.calls += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield count
    finally:
        sys.setprofile(previous)
