"""A run's ``calls``: answers from outside the model, recorded, replayed and refused (no network)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_connic.models import CallFailed, CaseModels, CassetteError, parse_cassette
from pytest_connic.secrets import Masker

HAND_WRITTEN = """
version: 1
runs:
  - calls:
      - kind: mcp_tools
        name: docs
        result: [{name: search, description: Search the docs, input_schema: {type: object}}]
      - kind: mcp
        name: docs/search
        arguments: {query: pytest}
        result: {content: [{type: text, text: found}], is_error: false}
      - kind: guardrail
        name: prompt_injection
        result: {passed: false, reason: an injection}
      - kind: web
        name: web_read_page
        arguments: {url: "http://127.0.0.1/page"}
        error: "connection refused"
"""


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def never() -> Any:
    async def call() -> Any:
        raise AssertionError("replay must not call the live service")
    return call


def write(tmp_path: Path, text: str = HAND_WRITTEN) -> Path:
    path = tmp_path / "case.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_parse_keeps_calls_with_their_positions() -> None:
    cassette = parse_cassette(HAND_WRITTEN)
    calls = cassette.runs[0].calls
    assert [(c.kind, c.name) for c in calls] == [
        ("mcp_tools", "docs"), ("mcp", "docs/search"), ("guardrail", "prompt_injection"), ("web", "web_read_page")]
    assert calls[2].arguments is None
    assert calls[3].error == "connection refused"
    assert calls[1].where == "runs[0].calls[1]"


@pytest.mark.parametrize(("text", "message"), [
    ("version: 1\nruns:\n  - calls:\n      - {kind: mpc, name: x}\n",
     "c.yaml:4:16: runs[0].calls[0].kind: expected one of mcp_tools, mcp, api, guardrail, web, found 'mpc'; did you mean 'mcp'?"),
    ("version: 1\nruns:\n  - calls:\n      - {kind: mcp}\n", "c.yaml:4:9: runs[0].calls[0].name: expected what was called (a name)"),
    ("version: 1\nruns:\n  - calls:\n      - {kind: web, name: w, result: 1, error: x}\n",
     "runs[0].calls[0].error: a call has 'result' or 'error', not both"),
    ("version: 1\nruns:\n  - calls:\n      - {kind: web, name: w, reslt: 1}\n", "unknown key 'reslt'; did you mean 'result'?"),
])
def test_bad_calls_are_located(text: str, message: str) -> None:
    with pytest.raises(CassetteError) as info:
        parse_cassette(text, "c.yaml")
    assert message in str(info.value)


def test_replay_answers_by_kind_name_and_arguments(tmp_path: Path) -> None:
    models = CaseModels(write(tmp_path), mode="none", live=None, masker=Masker())
    runm = models.for_run(0)
    tools = run(runm.external("mcp_tools", "docs", {}, never()))
    assert tools[0]["name"] == "search"
    result = run(runm.external("mcp", "docs/search", {"query": "pytest"}, never()))
    assert result["content"][0]["text"] == "found"
    # an entry without arguments answers any arguments
    judgement = run(runm.external("guardrail", "prompt_injection", {"content": "hi"}, never()))
    assert judgement == {"passed": False, "reason": "an injection"}
    with pytest.raises(CallFailed, match="connection refused"):
        run(runm.external("web", "web_read_page", {"url": "http://127.0.0.1/page"}, never()))


def test_replay_refuses_a_call_the_cassette_lacks(tmp_path: Path) -> None:
    path = write(tmp_path)
    runm = CaseModels(path, mode="none", live=None, masker=Masker()).for_run(0)
    with pytest.raises(CassetteError) as info:
        run(runm.external("mcp", "docs/search", {"query": "other"}, never()))
    message = str(info.value)
    assert f"{path}: runs[0].calls: run 1 made the mcp call 'docs/search'" in message
    assert '{"query": "other"}' in message
    assert "none unused with these arguments" in message
    assert "--connic-record-mode=all" in message
    # each recorded answer is used once
    run(runm.external("mcp", "docs/search", {"query": "pytest"}, never()))
    with pytest.raises(CassetteError, match="none unused"):
        run(runm.external("mcp", "docs/search", {"query": "pytest"}, never()))
    with pytest.raises(CassetteError, match="records no such call"):
        run(runm.external("api", "billing.get_invoice", {}, never()))


def test_recording_writes_results_and_failures(tmp_path: Path) -> None:
    path = tmp_path / "new.yaml"
    models = CaseModels(path, mode="once", live=None, masker=Masker({"s3cr3t-token"}))
    runm = models.for_run(0)

    async def ok() -> Any:
        return {"rows": [1, 2], "note": "token s3cr3t-token"}

    async def refused() -> Any:
        raise CallFailed("server said no")

    assert run(runm.external("api", "billing.list", {"page": 1}, ok))["rows"] == [1, 2]
    with pytest.raises(CallFailed):
        run(runm.external("mcp", "docs/search", {"q": "x"}, refused))
    assert models.save() == path
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert data["runs"][0]["calls"] == [
        {"kind": "api", "name": "billing.list", "arguments": {"page": 1},
         "result": {"rows": [1, 2], "note": "token ***"}},
        {"kind": "mcp", "name": "docs/search", "arguments": {"q": "x"}, "error": "server said no"},
    ]
    # and it replays offline
    again = CaseModels(path, mode="none", live=None, masker=Masker()).for_run(0)
    assert run(again.external("api", "billing.list", {"page": 1}, never()))["rows"] == [1, 2]


def test_live_mode_calls_through(tmp_path: Path) -> None:
    models = CaseModels(tmp_path / "x.yaml", mode="live", live=lambda name: None, masker=Masker())  # type: ignore[arg-type,return-value]

    async def ok() -> Any:
        return 42

    assert run(models.for_run(0).external("web", "web_search", {"query": "q"}, ok)) == 42
    assert models.save() is None
