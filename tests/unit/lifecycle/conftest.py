"""What the lifecycle tests below the session share."""

from __future__ import annotations

import importlib.util

import pytest

from helpers.network import warm_up_litellm


@pytest.fixture(scope="module")
def litellm_imported() -> None:
    """LiteLLM (and what it imports lazily) imported, and warmed up once, before a recording."""
    if importlib.util.find_spec("litellm") is None:
        pytest.skip("the [live] extra (litellm) is not installed")
    warm_up_litellm()
