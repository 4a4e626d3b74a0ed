"""Connic's web tools locally: ``web_read_page`` fetched for real while recording and replayed
offline, ``web_search`` through the hook and through a search backend (a Tavily stand-in on
127.0.0.1), the browser refused, and a failed call marked (docs/predefined-tools.md)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
import yaml

from helpers.fake_provider import Reply, text, tool_call, unused_port
from helpers.network import LocalHttpServer, no_network, send, serving, warm_up_litellm
from helpers.project import ConnicProject, assert_failure_reasons

pytest.importorskip("httpx")
pytest.importorskip("html2text")

PAGE = "<html><head><title>Docs</title></head><body><h1>Opening hours</h1><p>We open at <b>9</b>.</p></body></html>"


class Site(LocalHttpServer):
    """A tiny web site on 127.0.0.1: ``GET`` paths answer HTML, ``POST /search`` a search backend."""

    def __init__(self, search: Callable[[dict[str, Any]], Any] | None = None) -> None:
        self.received: list[tuple[str, dict[str, str], Any]] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.received.append((self.path, dict(self.headers), None))
                if self.path == "/moved":
                    self.send_response(302)
                    self.send_header("Location", "/hours")
                    self.end_headers()
                    return
                send(self, 200 if self.path == "/hours" else 404, PAGE.encode(), "text/html; charset=utf-8")

            def do_POST(self) -> None:
                data = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                site.received.append((self.path, {k.lower(): v for k, v in self.headers.items()}, data))
                send(self, 200, json.dumps(search(data) if search else {}).encode(), "application/json")

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)


def calling(tool: str, arguments: dict[str, Any]) -> Callable[[dict[str, Any]], Reply]:
    """The fake model: call ``tool`` once, then answer with what it returned."""

    def script(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return text(last["content"])
        return tool_call(tool, arguments)

    return script


def report(project: ConnicProject) -> dict[str, dict[str, Any]]:
    cases = json.loads((project.root / "report.json").read_text("utf-8"))["cases"]
    return {c["test_name"]: c["runs_detail"][0] for c in cases}


def test_web_read_page_is_recorded_from_a_local_page_and_replayed_with_the_server_down(
    project: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.agent("reader", tools=["web_read_page"])
    with Site() as site:
        project.suite("reader", f"""
            tests:
              - name: reads
                payload: when do you open
                expected_tool_calls:
                  - web_read_page: >-
                      "Opening hours" in result.markdown and "We open at **9**." in result.markdown
                      and result.url == "{site.url}/hours"
        """)
        with serving(monkeypatch, calling("web_read_page", {"url": f"{site.url}/moved"})):
            recorded = project.run("--connic-record-mode", "once")
        recorded.assert_outcomes(passed=1)
        assert [path for path, _, _ in site.received] == ["/moved", "/hours"]

    (call,) = yaml.safe_load((project.root / "cassettes/reader/reads.yaml").read_text("utf-8"))["runs"][0]["calls"]
    assert call["kind"] == "web" and call["name"] == "web_read_page"
    assert call["arguments"] == {"url": f"{site.url}/moved"}
    assert call["result"]["url"] == f"{site.url}/hours" and "# Opening hours" in call["result"]["markdown"]

    with no_network(monkeypatch) as attempts:
        replayed = project.run()
    assert attempts == []
    replayed.assert_outcomes(passed=1)


def test_a_web_call_the_cassette_does_not_record_fails_the_case(project: ConnicProject) -> None:
    project.agent("reader", tools=["web_read_page"])
    project.suite("reader", """
        tests:
          - name: reads
            payload: when do you open
    """)
    project.replies("reader", "reads", [("web_read_page", {"url": "https://example.com/hours"})], "9")

    result = project.run()

    result.assert_outcomes(failed=1)
    assert_failure_reasons(result, {"reads": ("*web_read_page: *reads.yaml: runs?0?.calls: run 1 "
                                              "made the web call 'web_read_page' with arguments "
                                              "{\"url\": \"https://example.com/hours\"}, but the cassette records no such call*")})


def test_web_search_through_the_hook_answers_offline_and_is_not_recorded(project: ConnicProject) -> None:
    project.agent("finder", tools=["web_search"])
    project.write("conftest.py", """
        def pytest_connic_predefined_tool(config, name, params, context):
            if name == "web_search":
                return {"results": [{"title": "Hours", "url": "https://example.com", "content": params["query"]}]}
    """)
    project.suite("finder", """
        tests:
          - name: finds
            payload: opening hours
            expected_tool_calls:
              - web_search: result.results[0].content == "opening hours"
    """)
    project.replies("finder", "finds", [("web_search", {"query": "opening hours"})], "9 to 5")

    project.run().assert_outcomes(passed=1)


def test_web_search_through_a_search_backend_is_recorded_without_the_key_and_replayed(
    project: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.agent("finder", tools=["web_search"])
    project.suite("finder", """
        tests:
          - name: finds
            payload: opening hours
            expected_tool_calls:
              - web_search: result.results[0].title == "Hours" and result.results[0].url == "https://example.com/h"
          - name: asks with an argument web_search does not take
            payload: hotels in a city
            expected_tool_calls: [web_search]
    """)

    def model(body: dict[str, Any]) -> Reply:
        city = "city" in str(body["messages"][1]["content"])
        arguments = {"query": "hotels", "city": "Paris"} if city else {"query": "opening hours", "max_results": 3}
        return calling("web_search", arguments)(body)

    def search(body: dict[str, Any]) -> Any:
        return {"query": body["query"], "results": [
            {"title": "Hours", "url": "https://example.com/h", "content": "9 to 5", "score": 0.9}]}

    key = "tvly-test-SECRET-0123456789"
    with Site(search) as backend:
        monkeypatch.setenv("TAVILY_API_KEY", key)
        monkeypatch.setenv("TAVILY_BASE_URL", backend.url)
        with serving(monkeypatch, model):
            recorded = project.run("--connic-record-mode", "once")
        recorded.assert_outcomes(passed=1, errors=1)
        ((path, headers, body),) = backend.received  # the call with a wrong argument never left
    # in the words of the tool the agent lists, not of the function behind it (tavily_search())
    wrong = ("web_search: got an unexpected keyword argument 'city' (its arguments: query, max_results, country, "
             "include_news)")
    recorded.stdout.fnmatch_lines([f"*its web call 'web_search' failed while recording: TypeError: {wrong}; *"])
    assert "tavily_search" not in recorded.stdout.str()
    assert path == "/search" and headers["authorization"] == f"Bearer {key}"
    assert body == {"query": "opening hours", "max_results": 3, "topic": "general"}
    saved = (project.root / "cassettes/finder/finds.yaml").read_text("utf-8")
    assert key not in saved
    (call,) = yaml.safe_load(saved)["runs"][0]["calls"]
    assert call["result"] == {"results": [{"title": "Hours", "url": "https://example.com/h", "content": "9 to 5"}]}

    monkeypatch.delenv("TAVILY_API_KEY")
    with no_network(monkeypatch) as attempts:
        replayed = project.run("-k", "finds")
    assert attempts == []
    replayed.assert_outcomes(passed=1)


def test_a_failed_predefined_call_is_marked_although_it_counts_for_expected_tool_calls(
    project: ConnicProject,
) -> None:
    project.agent("surfer", tools=["web_browser_open"])
    project.suite("surfer", """
        tests:
          - name: browses
            payload: open the docs
            expected_tool_calls:
              - web_browser_open
    """)
    project.replies("surfer", "browses", [("web_browser_open", {"url": "https://example.com"})], "could not")

    result = project.run("--connic-json", "report.json")

    # Connic counts the failed call as a call: the case passes, and says the call failed
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*CassetteDivergenceWarning*")  # a note of the trace, not a divergence
    result.stdout.fnmatch_lines([("*tests/surfer.yaml:2: ConnicWarning: web_browser_open failed and the model "
                                 "read the error (PredefinedUnavailable: web_browser_open drives Connic's hosted "
                                 "browser session*Connic counts a failed call as a call*")])
    run = report(project)["browses"]
    (call,) = run["tool_calls"]
    assert "hosted browser session" in call["error"]
    notes = [e["text"] for e in run["events"] if e.get("type") == "note"]
    assert any(n.startswith("web_browser_open failed and the model read the error") for n in notes)


# --------------------------------------------------------------------------- helpers (as test_record_modes.py)


@pytest.fixture(scope="module", autouse=True)
def litellm_imported() -> None:
    """Import LiteLLM (and what it imports lazily) in this process before an inner run does."""
    if importlib.util.find_spec("litellm") is None:
        pytest.skip("the [live] extra (litellm) is not installed")
    warm_up_litellm()


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-web-1234567890")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_BASE", f"http://127.0.0.1:{unused_port()}/v1")
