"""The one exception the local predefined tools raise."""

from __future__ import annotations

from pytest_connic.errors import ConnicError


class PredefinedToolError(ConnicError):
    """A predefined tool refused a call: bad arguments, an access rule, a sandbox escape.

    The runtime returns ``str(error)`` to the model as the tool's error, exactly as
    Connic returns a failing predefined tool call; the run continues.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
