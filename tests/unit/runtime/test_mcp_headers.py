"""Issue 17, MCP: header interpolation (``${VAR}``, strict ``${context.*}``), the shapes of
recorded answers, and the lazy ``mcp`` import (runtime/mcp_calls.py, runtime/mcp.py,
runtime/mcp_client.py)."""

from __future__ import annotations

import asyncio
import sys

import pytest

from pytest_connic.runtime import mcp_client
from pytest_connic.runtime.mcp import resolve_context
from pytest_connic.runtime.mcp_calls import model_view, resolve_env
from pytest_connic.runtime.signals import RunAborted, RunFailed

LABEL = "agents/a.yaml:7: mcp_servers 'docs' of agent 'a'"


def test_context_paths_resolve_dotted_keys_and_stringify() -> None:
    context = {"user_id": "u1", "customer": {"id": 42}}
    assert resolve_context("Bearer ${context.user_id}", context, LABEL, "X") == "Bearer u1"
    assert resolve_context("${context.customer.id}/${context.user_id}", context, LABEL, "X") == "42/u1"
    assert resolve_context("${VAR} stays for later", context, LABEL, "X") == "${VAR} stays for later"


@pytest.mark.parametrize(("value", "context", "message"), [
    ("${context.user_id}", {}, "KeyError: context.user_id is not set"),
    ("${context.customer.id}", {"customer": {}}, "KeyError: context.customer.id is not set"),
    ("${context.customer.id}", {"customer": "acme"}, "KeyError: context.customer.id is not set"),
    ("${context.user_id}", {"user_id": None}, "ValueError: context.user_id is None"),
    ("${context._system}", {"_system": "x"}, "keys starting with '_' are reserved and not interpolable ('_system')"),
    ("${context.a..b}", {"a": {}}, "not a dotted path of context keys"),
])
def test_context_resolution_is_strict(value: str, context: dict[str, object], message: str) -> None:
    with pytest.raises(RunFailed) as caught:
        resolve_context(value, context, LABEL, "X-User")
    assert caught.value.message.startswith(f"{LABEL}: header 'X-User' uses ")
    assert message in caught.value.message


def test_env_variables_resolve_and_a_missing_one_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TOKEN", "t0ken")
    monkeypatch.delenv("NOPE", raising=False)
    assert resolve_env("Bearer ${MCP_TOKEN}", LABEL, "header 'Authorization'") == "Bearer t0ken"
    with pytest.raises(RunAborted, match=r"header 'Authorization' uses \$\{NOPE\}, which is not set in the environment"):
        resolve_env("Bearer ${NOPE}", LABEL, "header 'Authorization'")


def test_recorded_shapes_are_read_leniently_and_checked() -> None:
    assert mcp_client.tools_value([{"name": "a", "inputSchema": {"type": "object", "properties": {}}}]) == [
        {"name": "a", "description": "", "input_schema": {"type": "object", "properties": {}}}]
    with pytest.raises(mcp_client.BadRecording, match="must be a list of tools"):
        mcp_client.tools_value({"name": "a"})
    with pytest.raises(mcp_client.BadRecording, match="with a 'name'"):
        mcp_client.tools_value([{"description": "x"}])
    assert mcp_client.result_value("hi") == {"is_error": False, "parts": [{"type": "text", "text": "hi"}]}
    value = mcp_client.result_value({"content": [{"type": "text", "text": "x"}], "isError": True,
                                     "structuredContent": {"n": 1}})
    assert value == {"is_error": True, "parts": [{"type": "text", "text": "x"}], "structured_content": {"n": 1}}
    assert model_view(value) == {"content": [{"type": "text", "text": "x"}], "isError": True,
                                 "structuredContent": {"n": 1}}
    with pytest.raises(mcp_client.BadRecording, match="must be a mapping"):
        mcp_client.result_value(3)


def test_without_the_mcp_package_a_live_call_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in sys.modules if n == "mcp" or n.startswith("mcp.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(mcp_client.McpMissing, match=r"pip install pytest-connic\[mcp\]"):
        asyncio.run(mcp_client.list_tools("http://127.0.0.1:9/mcp", {}))


def test_an_unreachable_server_is_a_call_failure_naming_the_url() -> None:
    from helpers.fake_provider import unused_port

    url = f"http://127.0.0.1:{unused_port()}/mcp"
    with pytest.raises(mcp_client.CallFailed, match=rf"listing the tools at {url} failed: .*Connect"):
        asyncio.run(mcp_client.list_tools(url, {}, 10))
