"""``--connic-early-stop``: when a case's verdict is decided, no further run needs to start.

The verdict is ``passed * 100 >= threshold * runs``. It is decided once enough runs
passed (``passed >= needed``) or too many failed (``failed > runs - needed``); both
only grow as runs finish, so stopping then can never change the verdict.
"""

from __future__ import annotations


def needed_passes(runs: int, threshold: int) -> int:
    """The fewest passed runs that make the case pass (integer-exact)."""
    return -(-threshold * runs // 100)


def decision(passed: int, failed: int, runs: int, threshold: int) -> str | None:
    """Why no further run is needed, or None while the verdict is open."""
    needed = needed_passes(runs, threshold)
    if passed >= needed:
        return f"threshold reached ({passed} of {needed} needed runs passed)"
    if failed > runs - needed:
        return f"threshold out of reach ({failed} runs failed, at most {runs - needed} may)"
    return None
