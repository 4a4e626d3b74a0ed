"""LiteLLM against a fake OpenAI-compatible server over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from helpers.fake_provider import FakeProvider, Reply, error, text, tool_call, unused_port
from pytest_connic.models import (
    CaseModels,
    LiteLLMModel,
    ModelRequest,
    ModelResponse,
    ProviderError,
    RetryPolicy,
    ToolSpec,
)
from pytest_connic.models.live import to_messages
from pytest_connic.secrets import default_masker

if importlib.util.find_spec("litellm") is None:  # importing it here would let it fetch its cost map
    pytest.skip("the [live] extra (litellm) is not installed", allow_module_level=True)

ADD = ToolSpec("add", "Add two numbers", {"type": "object", "properties": {"a": {"type": "number"}}})
FAST = {"attempts": 3, "initial_delay": 0.01, "max_delay": 0.02, "attempt_timeout": 5}


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET123")
    for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def req(model: str = "openai/gpt-4o-mini", **overrides: Any) -> ModelRequest:
    values: dict[str, Any] = {
        "agent_name": "calc",
        "model": model,
        "system_prompt": "You add numbers.",
        "messages": [{"role": "user", "content": "4 + 6?"}],
        "tools": [ADD],
        "retry_options": FAST,
    }
    values.update(overrides)
    return ModelRequest(**values)


def call(model: LiteLLMModel, request: ModelRequest) -> ModelResponse:
    return asyncio.run(model.complete(request))


def llm(fp: FakeProvider | None = None, **kwargs: Any) -> LiteLLMModel:
    base = fp.base_url if fp else None
    return LiteLLMModel(api_base=base, masker=default_masker(), max_retry_delay=0.01, **kwargs)


def test_tool_call_then_content_over_http() -> None:
    with FakeProvider(
        [tool_call("add", {"a": 4, "b": 6}), text('{"sum": 10}', input_tokens=120, output_tokens=9)]
    ) as fp:
        model = llm(fp)
        first = call(model, req())
        assert first.tool_calls[0].name == "add"
        assert first.tool_calls[0].arguments == {"a": 4, "b": 6}
        assert first.content is None
        history = [
            {"role": "user", "content": "4 + 6?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": first.tool_calls[0].id, "name": "add", "arguments": {"a": 4, "b": 6}}],
            },
            {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": {"sum": 10}},
        ]
        second = call(model, req(messages=history))
    assert (second.content, second.input_tokens, second.output_tokens) == ('{"sum": 10}', 120, 9)
    assert second.model == "openai/gpt-4o-mini"
    assert second.cost >= 0.0
    sent = fp.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test-SECRET123"
    assert sent.body["model"] == "gpt-4o-mini"
    assert sent.body["messages"][0] == {"role": "system", "content": "You add numbers."}
    assert sent.body["tools"] == [
        {
            "type": "function",
            "function": {"name": "add", "description": "Add two numbers", "parameters": ADD.parameters},
        }
    ]
    replay = fp.requests[1].body["messages"]
    assert replay[2]["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 4, "b": 6}'}
    assert replay[3] == {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": '{"sum": 10}'}


def test_openai_api_base_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeProvider(["from env"]) as fp:
        monkeypatch.setenv("OPENAI_API_BASE", fp.base_url)
        assert call(llm(), req()).content == "from env"
    assert len(fp.requests) == 1


def test_malformed_tool_arguments_are_kept_raw() -> None:
    with FakeProvider([tool_call("add", '{"a": 4,')]) as fp:
        assert call(llm(fp), req()).tool_calls[0].arguments == '{"a": 4,'


def test_fallback_model_answers_when_the_primary_fails() -> None:
    def script(body: dict[str, Any]) -> Any:
        return error(500, "primary down") if body["model"] == "primary" else text("from backup")

    with FakeProvider(script) as fp:
        response = call(llm(fp), req("openai/primary", fallback_model="openai/backup"))
    assert (response.content, response.model) == ("from backup", "openai/backup")
    # Connic: with a fallback model the primary is tried once, the fallback gets the budget
    assert [r.body["model"] for r in fp.requests] == ["primary", "backup"]


def test_the_fallback_model_gets_the_attempts_budget() -> None:
    def script(body: dict[str, Any]) -> Any:
        return error(500, f"{body['model']} down")

    with FakeProvider(script) as fp, pytest.raises(ProviderError) as info:
        call(llm(fp), req("openai/primary", fallback_model="openai/backup"))
    assert [r.body["model"] for r in fp.requests] == ["primary", "backup", "backup", "backup"]
    assert "after 1 attempt(s)" in str(info.value) and "fallback openai/backup" in str(info.value)
    assert "after 3 attempt(s)" in str(info.value)


def test_without_a_fallback_the_primary_gets_the_attempts_budget() -> None:
    with FakeProvider([error(500, "down")] * 2 + [text("third time")]) as fp:
        assert call(llm(fp), req(retry_options={**FAST, "attempts": 3})).content == "third time"
    assert len(fp.requests) == 3


def test_retry_after_wins_over_the_backoff() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    model = LiteLLMModel(masker=default_masker())
    with FakeProvider([Reply(status=429, message="slow down", headers={"Retry-After": "7"}),
                       error(500, "boom"), text("ok")]) as fp:
        model.api_base = fp.base_url
        model.sleep = sleep
        options = {"attempts": 3, "initial_delay": 2, "max_delay": 30, "attempt_timeout": 5}
        assert call(model, req(retry_options=options)).content == "ok"
    # the 429's Retry-After, then the backoff (initial_delay doubled once) after the 500
    assert waits == [7.0, 4.0]


def test_retries_on_429() -> None:
    with FakeProvider([error(429, "slow down"), error(429, "slow down"), text("ok")]) as fp:
        assert call(llm(fp), req()).content == "ok"
    assert len(fp.requests) == 3


def test_exhausted_500s_are_a_provider_error() -> None:
    expected = r"openai/gpt-4o-mini: .*boom.* \(after 3 attempt\(s\)\)"
    with FakeProvider([error(500, "boom")] * 3) as fp, pytest.raises(ProviderError, match=expected):
        call(llm(fp), req())
    assert len(fp.requests) == 3


def test_auth_errors_are_not_retried_and_are_masked() -> None:
    script = [error(401, "Incorrect API key provided: sk-test-SECRET123")]
    with FakeProvider(script) as fp, pytest.raises(ProviderError) as info:
        call(llm(fp), req())
    assert len(fp.requests) == 1
    assert "SECRET123" not in str(info.value) and "***" in str(info.value)


def test_a_refused_connection_fails_at_once_without_retries() -> None:
    """Nothing listens there (a local server not started, a wrong OPENAI_API_BASE): no retry can
    help, so none is made and no back-off is waited (it cost about 35 s per case)."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    model = LiteLLMModel(api_base=f"http://127.0.0.1:{unused_port()}/v1")
    model.sleep = sleep
    with pytest.raises(ProviderError, match=r"(?i)connect.*\(after 1 attempt\(s\); not retried: the connection was "
                                            r"refused \(nothing listens at that address\)\)"):
        call(model, req(retry_options={**FAST, "attempts": 3}))
    assert waits == []


def test_only_what_a_retry_cannot_change_is_not_retried() -> None:
    from pytest_connic.models.live import is_retryable, unreachable

    def chained(cause: BaseException) -> BaseException:
        outer = RuntimeError("litellm.InternalServerError: Connection error.")  # what LiteLLM raises
        outer.__cause__ = cause
        return outer

    unknown_host = chained(socket.gaierror(socket.EAI_NONAME, "Name or service not known"))
    assert unreachable(unknown_host) == "the host name does not resolve" and not is_retryable(unknown_host)
    assert not is_retryable(chained(ConnectionRefusedError(111, "Connect call failed")))
    for transient in (ConnectionResetError(104, "reset"), socket.gaierror(socket.EAI_AGAIN, "Temporary failure"),
                      TimeoutError()):
        assert unreachable(chained(transient)) is None
    assert is_retryable(ConnectionResetError(104, "reset")) and is_retryable(TimeoutError())


def test_attempt_timeout_bounds_each_attempt() -> None:
    with FakeProvider([Reply(content="late", delay=2)]) as fp:
        with pytest.raises(ProviderError, match="(?i)time"):
            call(llm(fp), req(retry_options={"attempts": 1, "attempt_timeout": 0.3}))
        # the attempt ended before the provider's (delayed) answer was sent
        assert fp.answered == 0 and len(fp.requests) == 1


def test_connic_models_go_through_aliases() -> None:
    with FakeProvider(["aliased"]) as fp:
        model = llm(fp, aliases={"connic/gpt-5.6-terra": "openai/gpt-4.1-mini"})
        assert call(model, req("connic/gpt-5.6-terra")).content == "aliased"
    assert fp.requests[0].body["model"] == "gpt-4.1-mini"
    assert model.resolve("openai/gpt-4o") == "openai/gpt-4o"
    assert (
        LiteLLMModel(aliases={"openai/gpt-4o": "openai/llama3"}).resolve("openai/gpt-4o") == "openai/llama3"
    )
    with pytest.raises(ProviderError, match="--connic-model-alias connic/other=openai/"):
        call(model, req("connic/other"))


def test_concurrent_live_calls_overlap() -> None:
    # after the warm-up, the provider answers only once all six calls are waiting at once: calls
    # made one after another would break the barrier (its timeout only guards against a hang)
    together = threading.Barrier(6, timeout=30)
    warmed = threading.Event()

    def answer(body: Any) -> str:
        if warmed.is_set():
            together.wait()
        return text("ok")

    with FakeProvider(answer) as fp:
        model = llm(fp)

        async def main() -> list[ModelResponse]:
            return await asyncio.gather(*(model.complete(req()) for _ in range(6)))

        call(model, req())  # warm up LiteLLM's first-call overhead
        warmed.set()
        responses = asyncio.run(main())
    assert [r.content for r in responses] == ["ok"] * 6
    assert not together.broken and fp.answered == 7


def test_request_options() -> None:
    model = LiteLLMModel(max_retry_delay=0.01)
    policy = RetryPolicy.from_options(None, None)
    kwargs = model._kwargs("openai/o3", req(temperature=0.2, reasoning_effort="high"), policy)
    assert (kwargs["temperature"], kwargs["reasoning_effort"], kwargs["drop_params"]) == (0.2, "high", True)
    assert (kwargs["num_retries"], kwargs["max_retries"], kwargs["timeout"]) == (0, 0, 120.0)
    assert "reasoning_effort" not in model._kwargs("openai/o3", req(reasoning_effort="auto"), policy)
    assert "thinking" not in kwargs
    budget = model._kwargs("anthropic/claude-3-7-sonnet", req(reasoning_budget=2048), policy)
    assert budget["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert [RetryPolicy().delay(n) for n in range(4)] == [10, 20, 30, 30]
    assert RetryPolicy().delay(3, cap=0.01) == 0.01
    bounded = RetryPolicy.from_options({"attempts": 50, "attempt_timeout": 60}, timeout_s=5)
    assert (bounded.attempts, bounded.attempt_timeout) == (10, 5)
    unset = RetryPolicy.from_options({"attempts": None, "rerun_middleware": False}, None)
    assert unset == RetryPolicy()


def test_file_parts_become_litellm_parts() -> None:
    content = [
        {"type": "text", "text": "look"},
        {"type": "file", "mime_type": "image/png", "data": "iVBO", "name": "a.png"},
        {"type": "file", "mime_type": "application/pdf", "data": "JVBE", "name": "a.pdf"},
    ]
    messages = to_messages(req(messages=[{"role": "user", "content": content}]))
    assert messages[1]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"}},
    ]


def test_record_with_litellm_then_replay_without_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cassettes" / "calc" / "adds.yaml"
    masker = default_masker()
    with FakeProvider([tool_call("add", {"a": 4, "b": 6}), text("10 (key sk-test-SECRET123)")]) as fp:
        recorder = CaseModels(path, mode="once", live=lambda agent: llm(fp), masker=masker)
        run = recorder.for_run(0)
        model = run.model_for("calc", root=True)
        assert asyncio.run(model.complete(req())).tool_calls
        assert asyncio.run(model.complete(req())).content == "10 (key sk-test-SECRET123)"
        recorder.save()
    assert fp.requests[0].headers["authorization"] == "Bearer sk-test-SECRET123"
    written = path.read_text()
    assert "SECRET123" not in written and "10 (key ***)" in written

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("replay tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)

    def no_live(agent: str) -> Any:
        raise AssertionError("mode none asked for a live model")

    replay = CaseModels(path, mode="none", live=no_live, masker=masker).for_run(0)
    model = replay.model_for("calc", root=True)
    assert asyncio.run(model.complete(req())).tool_calls[0].arguments == {"a": 4, "b": 6}
    assert asyncio.run(model.complete(req())).content == "10 (key ***)"
    assert replay.finish(completed=True) == [] and replay.notes == []


def test_litellm_is_imported_offline_and_only_for_a_live_call() -> None:
    probe = (
        "import sys, pytest_connic.models as m; "
        "assert 'litellm' not in sys.modules, 'imported too early'; print('ok')"
    )
    import subprocess

    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.stdout.strip() == "ok", result.stderr
    with FakeProvider(["hi"]) as fp:
        call(llm(fp), req())
    assert "LITELLM_LOCAL_MODEL_COST_MAP" in os.environ


def test_live_calls_from_threads_with_their_own_event_loops() -> None:
    from concurrent.futures import ThreadPoolExecutor

    with FakeProvider(lambda body: text(body["messages"][-1]["content"]), latency=0.05) as fp:
        model = llm(fp)

        def one(index: int) -> str | None:
            return call(model, req(messages=[{"role": "user", "content": f"run {index}"}])).content

        for _ in range(2):  # a second round reuses whatever LiteLLM cached from closed loops
            with ThreadPoolExecutor(max_workers=4) as pool:
                assert list(pool.map(one, range(8))) == [f"run {i}" for i in range(8)]
