"""What a user function's signature accepts (positional arguments, a ``context`` parameter)."""

from __future__ import annotations

import inspect
from collections.abc import Callable


def accepts_positional(func: Callable[..., object], count: int) -> bool:
    """Whether ``func`` can take ``count`` positional arguments."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return True
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return True
    positional = [
        p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    return len(positional) >= count


def takes_context(func: Callable[..., object]) -> bool:
    """Whether ``func`` declares a parameter named ``context``."""
    try:
        return "context" in inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
