"""The one base of every error pytest-connic raises.

``except ConnicError`` catches anything of the plugin's own (a suite that does not validate, a
missing cassette, a provider refusing, a run's control-flow signals), never an error of user
code: those keep their own types and tracebacks.
"""

from __future__ import annotations

__all__ = ["ConnicError"]


class ConnicError(Exception):
    """Base class of every exception defined by pytest-connic."""
