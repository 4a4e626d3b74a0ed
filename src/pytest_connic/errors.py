"""The one base of every error pytest-connic raises.

``except ConnicError`` catches anything of the plugin's own (a suite that does not validate, a
missing cassette, a provider refusing, a run's control-flow signals), never an error of user
code: those keep their own types and tracebacks.
"""

from __future__ import annotations

__all__ = ["ConnicError", "RunSignal"]


class ConnicError(Exception):
    """Base class of every exception defined by pytest-connic."""


class RunSignal(ConnicError):
    """Base class of the runtime's control-flow exceptions: each ends a run (or one call) its own
    way, so the tool pipeline, hooks and predefined tools pass it through untouched and only the
    lifecycle (``runtime/invocation.py``) turns it into the run's status. Anything caught as
    ``except RunSignal`` (with the SDK's ``StopProcessing``: ``runtime/signals.PASS_THROUGH``)
    is never shown to the model as a tool's error."""
