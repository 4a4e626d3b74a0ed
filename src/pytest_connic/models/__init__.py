"""Models: the interface the runtime talks to, cassettes (replay and recording), LiteLLM.

The runtime uses ``CaseModels(path, mode=..., live=..., masker=...)`` per case,
``for_run(i)`` per run, ``model_for(agent, root=...)`` per agent invocation, then
``finish(completed=...)`` per run and ``save()`` per case. LiteLLM is imported only
when a live call happens.
"""

from __future__ import annotations

from pytest_connic.models.base import (
    CallFailed,
    CassetteError,
    Model,
    ModelError,
    ModelRequest,
    ModelResponse,
    ProviderError,
    RunModels,
    ToolCallRequest,
    ToolSpec,
)
from pytest_connic.models.cassette import Cassette, load_cassette, parse_cassette
from pytest_connic.models.cassette_paths import cassette_path, safe_name
from pytest_connic.models.digest import first_difference, request_digest, request_fingerprint
from pytest_connic.models.live import LiteLLMModel, RetryPolicy
from pytest_connic.models.replay import MODES, CaseModels
from pytest_connic.models.runs import RunModelsImpl

__all__ = [
    "MODES",
    "CallFailed",
    "CaseModels",
    "Cassette",
    "CassetteError",
    "LiteLLMModel",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "ProviderError",
    "RetryPolicy",
    "RunModels",
    "RunModelsImpl",
    "ToolCallRequest",
    "ToolSpec",
    "cassette_path",
    "first_difference",
    "load_cassette",
    "parse_cassette",
    "request_digest",
    "request_fingerprint",
    "safe_name",
]
