"""Connic's web tools below pytest: ``web_read_page`` fetched for real while recording and replayed
offline, ``web_search`` through what a project's ``pytest_connic_predefined_tool`` hook answers and
through a search backend (a Tavily stand-in on 127.0.0.1), the browser refused, and a failed call
marked (docs/predefined-tools.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
import yaml

from helpers.fake_provider import Reply, text, tool_call, unused_port
from helpers.harness import CaseProject, HookHost, first_failure
from helpers.network import LocalHttpServer, no_network, send, serving
from pytest_connic.records.events import PredefinedFailedNoteEvent
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord
from pytest_connic.warnings import CassetteDivergenceWarning, ConnicWarning

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


def only(outcome: CaseOutcome) -> RunRecord:
    (record,) = outcome.records
    return record


@pytest.mark.usefixtures("litellm_imported")
def test_web_read_page_is_recorded_from_a_local_page_and_replayed_with_the_server_down(
    case_project: CaseProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_project.agent("reader", tools=["web_read_page"])
    case_project.suite("reader", """
        tests:
          - name: reads
            payload: when do you open
    """)
    with Site() as site:
        with serving(monkeypatch, calling("web_read_page", {"url": f"{site.url}/moved"})):
            recorded = case_project.case("reader", "reads", mode="once")
        assert recorded.verdict_passed
        assert [path for path, _, _ in site.received] == ["/moved", "/hours"]

    (read,) = only(recorded).tool_calls
    assert isinstance(read.result, dict) and read.result["url"] == f"{site.url}/hours"
    assert "Opening hours" in read.result["markdown"] and "We open at **9**." in read.result["markdown"]
    (call,) = yaml.safe_load((case_project.root / "cassettes/reader/reads.yaml").read_text("utf-8"))["runs"][0]["calls"]
    assert call["kind"] == "web" and call["name"] == "web_read_page"
    assert call["arguments"] == {"url": f"{site.url}/moved"}
    assert call["result"]["url"] == f"{site.url}/hours" and "# Opening hours" in call["result"]["markdown"]

    with no_network(monkeypatch) as attempts:
        replayed = case_project.case("reader", "reads")
    assert attempts == []
    assert replayed.verdict_passed
    assert only(replayed).tool_calls[0].result == read.result


def test_a_web_call_the_cassette_does_not_record_fails_the_case(case_project: CaseProject) -> None:
    case_project.agent("reader", tools=["web_read_page"])
    case_project.suite("reader", """
        tests:
          - name: reads
            payload: when do you open
    """)
    case_project.replies("reader", "reads", [("web_read_page", {"url": "https://example.com/hours"})], "9")

    outcome = case_project.case("reader", "reads")

    assert not outcome.verdict_passed
    failure = first_failure(outcome)
    assert failure.startswith("web_read_page: ")
    assert ("reads.yaml: runs[0].calls: run 1 made the web call 'web_read_page' with arguments "
            "{\"url\": \"https://example.com/hours\"}, but the cassette records no such call") in failure


def test_web_search_through_the_hook_answers_offline_and_is_not_recorded(case_project: CaseProject) -> None:
    def search(name: str, params: dict[str, object], context: dict[str, object]) -> object:
        if name == "web_search":
            return {"results": [{"title": "Hours", "url": "https://example.com", "content": params["query"]}]}
        return None

    case_project.host = HookHost(predefined_tool=search)
    case_project.agent("finder", tools=["web_search"])
    case_project.suite("finder", """
        tests:
          - name: finds
            payload: opening hours
    """)
    case_project.replies("finder", "finds", [("web_search", {"query": "opening hours"})], "9 to 5")
    cassette = (case_project.root / "cassettes/finder/finds.yaml").read_text("utf-8")

    outcome = case_project.case("finder", "finds")

    assert outcome.verdict_passed
    assert only(outcome).tool_calls[0].result == {
        "results": [{"title": "Hours", "url": "https://example.com", "content": "opening hours"}]}
    assert (case_project.root / "cassettes/finder/finds.yaml").read_text("utf-8") == cassette


@pytest.mark.usefixtures("litellm_imported")
def test_web_search_through_a_search_backend_is_recorded_without_the_key_and_replayed(
    case_project: CaseProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_project.agent("finder", tools=["web_search"])
    case_project.suite("finder", """
        tests:
          - name: finds
            payload: opening hours
          - name: asks with an argument web_search does not take
            payload: hotels in a city
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
            outcomes = case_project.cases("finder", "finds", "asks with an argument web_search does not take",
                                          mode="once")
        recorded, wrong = outcomes["finds"], outcomes["asks with an argument web_search does not take"]
        assert recorded.verdict_passed
        ((path, headers, body),) = backend.received  # the call with a wrong argument never left
    # in the words of the tool the agent lists, not of the function behind it (tavily_search())
    assert wrong.recording_error is not None and "tavily_search" not in wrong.recording_error
    assert ("its web call 'web_search' failed while recording: TypeError: web_search: got an unexpected keyword "
            "argument 'city' (its arguments: query, max_results, country, include_news); ") in wrong.recording_error
    assert not (case_project.root / "cassettes/finder/asks with an argument web_search does not take.yaml").exists()
    assert path == "/search" and headers["authorization"] == f"Bearer {key}"
    assert body == {"query": "opening hours", "max_results": 3, "topic": "general"}
    found = {"results": [{"title": "Hours", "url": "https://example.com/h", "content": "9 to 5"}]}
    assert only(recorded).tool_calls[0].result == found
    saved = (case_project.root / "cassettes/finder/finds.yaml").read_text("utf-8")
    assert key not in saved
    (call,) = yaml.safe_load(saved)["runs"][0]["calls"]
    assert call["result"] == found

    monkeypatch.delenv("TAVILY_API_KEY")
    with no_network(monkeypatch) as attempts:
        replayed = case_project.case("finder", "finds")
    assert attempts == []
    assert replayed.verdict_passed and only(replayed).tool_calls[0].result == found


def test_a_failed_predefined_call_is_marked_although_it_counts_for_expected_tool_calls(
    case_project: CaseProject,
) -> None:
    case_project.agent("surfer", tools=["web_browser_open"])
    case_project.suite("surfer", """
        tests:
          - name: browses
            payload: open the docs
            expected_tool_calls:
              - web_browser_open
    """)
    case_project.replies("surfer", "browses", [("web_browser_open", {"url": "https://example.com"})], "could not")

    outcome = case_project.case("surfer", "browses")

    # Connic counts the failed call as a call: the case passes, and says the call failed
    assert outcome.verdict_passed
    (call,) = only(outcome).tool_calls
    assert "hosted browser session" in str(call.error)
    notes = [e.text for e in only(outcome).events if isinstance(e, PredefinedFailedNoteEvent)]
    assert len(notes) == 1 and notes[0].startswith("web_browser_open failed and the model read the error")
    # a warning of its own, not a divergence of the cassette
    assert not [w for w in case_project.caught if issubclass(w.category, CassetteDivergenceWarning)]
    (warning,) = [w for w in case_project.caught if "web_browser_open failed" in str(w.message)]
    assert warning.category is ConnicWarning
    message = str(warning.message)
    assert message.startswith("web_browser_open failed and the model read the error (PredefinedUnavailable: "
                              "web_browser_open drives Connic's hosted browser session")
    assert "Connic counts a failed call as a call" in message


# --------------------------------------------------------------------------- helpers


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-web-1234567890")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_BASE", f"http://127.0.0.1:{unused_port()}/v1")
