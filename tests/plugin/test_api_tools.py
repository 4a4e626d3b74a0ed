"""``api:`` tools through the plugin: an OpenAPI spec names a real HTTP API on 127.0.0.1 (a
stdlib ``http.server`` in a thread, always stopped); cases record against it with a model of the
fake provider, then replay offline with the server and the network gone."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
import yaml

from helpers.equivalence import BILLING_SPEC as SPEC
from helpers.equivalence import DESK_HOOKS as HOOKS
from helpers.equivalence import DESK_SUITE as SUITE
from helpers.fake_provider import FakeProvider, Reply, text, tool_call
from helpers.network import LocalHttpServer, local_provider_env, no_network, send, serving, warm_up_litellm
from helpers.project import ConnicProject, esc

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

if importlib.util.find_spec("litellm") is None:
    pytest.skip("the [live] extra (litellm) is not installed", allow_module_level=True)

KEY = "sk-test-DONOTLEAK-1234567890"
TOKEN = "billing-token-DONOTLEAK-42"
FAST_RETRIES = {"attempts": 2, "initial_delay": 0, "max_delay": 1}





class BillingApi(LocalHttpServer):
    """A tiny billing API; keeps the headers of every request it received."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                api.requests.append(("GET", self.path, {k.lower(): v for k, v in self.headers.items()}))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._send(401, {"error": "unauthorized"})
                if self.path == "/v1/invoices/inv_1":
                    return self._send(200, {"id": "inv_1", "amount": 120})
                return self._send(404, {"error": f"no such invoice: {self.path}"})

            def _send(self, status: int, body: Any) -> None:
                send(self, status, json.dumps(body).encode(), "application/json")

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)


@pytest.fixture(scope="session", autouse=True)
def litellm_imported() -> None:
    """Import LiteLLM (and make one call) in this process before any inner run does (see
    tests/plugin/test_record_modes.py: pytester's restore of ``sys.meta_path``)."""
    warm_up_litellm()


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    local_provider_env(monkeypatch, KEY)
    monkeypatch.setenv("CONNIC_API_BILLING_TOKEN", TOKEN)


def answer_with_tool_result(body: dict[str, Any]) -> Reply:
    """The fake model: ask for the invoice, then answer with what the tool returned."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return text(last["content"])
    return tool_call("invoice_get", {"id": "inv_1"})


@pytest.fixture
def desk(project: ConnicProject) -> ConnicProject:
    project.write("apis/billing.yaml", SPEC)
    project.agent("desk", tools=["api:billing.invoice_*", "api:billing.customers_get"],
                  retry_options=FAST_RETRIES)
    project.write("hooks/desk.py", HOOKS)
    project.suite("desk", SUITE)
    return project


def record(desk: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> tuple[pytest.RunResult, BillingApi, FakeProvider]:
    with BillingApi() as api, serving(monkeypatch, answer_with_tool_result) as fp:
        result = desk.run("--connic-record-mode", "once", "--connic-api-url", f"billing={api.url}")
    return result, api, fp


def cassette_text(desk: ConnicProject) -> str:
    return (desk.root / "cassettes" / "desk" / "looks up.yaml").read_text("utf-8")


def test_records_against_the_api_then_replays_offline(desk: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded, api, fp = record(desk, monkeypatch)
    recorded.assert_outcomes(passed=1)
    # the request reached the API with the environment's token, at the operation's path
    assert [(m, p) for m, p, _ in api.requests] == [("GET", "/v1/invoices/inv_1")]
    assert api.requests[0][2]["authorization"] == f"Bearer {TOKEN}"
    # the wildcard and the exact ref resolved to the spec's tools, named as Connic names them
    offered = {t["function"]["name"] for t in fp.requests[0].body["tools"]}
    assert offered == {"invoice_get", "invoice_create", "customers_get"}

    text_ = cassette_text(desk)
    data = yaml.safe_load(text_)
    assert data["runs"][0]["calls"] == [{"kind": "api", "name": "billing.invoice_get", "arguments": {"id": "inv_1"},
                                         "result": {"id": "inv_1", "amount": 120}}]
    assert TOKEN not in text_ and "Bearer" not in text_ and "authorization" not in text_.lower()

    # both servers are gone and every connect is refused: the replay needs neither
    with no_network(monkeypatch) as attempts:
        replayed = desk.run("--connic-json", "report.json")
    assert attempts == []
    replayed.assert_outcomes(passed=1)
    report = (desk.root / "report.json").read_text("utf-8")
    assert TOKEN not in report


def test_hooks_fire_for_an_api_tool(desk: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    with BillingApi() as api, serving(monkeypatch, answer_with_tool_result):
        hooked = desk.run("--connic-record-mode", "all", "--connic-api-url", f"billing={api.url}",
                          "--connic-json", "report.json")
    hooked.assert_outcomes(passed=1)  # the after hook's 'hooked' reached the model
    events = [e for e in _events(json.loads((desk.root / "report.json").read_text("utf-8")))
              if e.get("type") == "hook"]
    assert [(e["phase"], e["tool"]) for e in events] == [("before", "api:billing.invoice_get"),
                                                          ("after", "api:billing.invoice_get")]

    desk.write("hooks/desk.py", "")  # without the hooks the output lacks 'hooked'
    with BillingApi() as api, serving(monkeypatch, answer_with_tool_result):
        plain = desk.run("--connic-record-mode", "all", "--connic-api-url", f"billing={api.url}")
    plain.assert_outcomes(failed=1)
    plain.stdout.fnmatch_lines(["*output.hooked = <missing>*"])


def _events(report: Any) -> Iterator[dict[str, Any]]:
    """Every event of every run in a --connic-json report, wherever it nests."""
    if isinstance(report, dict):
        for key, value in report.items():
            if key == "events" and isinstance(value, list):
                yield from (e for e in value if isinstance(e, dict))
            else:
                yield from _events(value)
    elif isinstance(report, list):
        for value in report:
            yield from _events(value)


def test_a_call_missing_from_the_cassette_fails_the_case_naming_it(
    desk: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    record(desk, monkeypatch)[0].assert_outcomes(passed=1)
    path = desk.root / "cassettes" / "desk" / "looks up.yaml"
    data = yaml.safe_load(path.read_text("utf-8"))
    del data["runs"][0]["calls"]
    path.write_text(yaml.safe_dump(data), "utf-8")

    with no_network(monkeypatch):
        replayed = desk.run()
    replayed.assert_outcomes(failed=1)
    replayed.stdout.fnmatch_lines([
        esc("*runs[0].calls: run 1 made the api call 'billing.invoice_get' with arguments {\"id\": \"inv_1\"}, "
            "but the cassette records no such call*--connic-record-mode=all*"),
    ])
    replayed.stdout.no_fnmatch_line("*internal error*")


def test_an_http_error_is_the_tool_error_the_model_reads(desk: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    def ask_missing(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return text(json.dumps({"amount": 0, "hooked": "x", "seen": last["content"]}))
        return tool_call("invoice_get", {"id": "inv_404"})

    desk.suite("desk", "tests:\n  - name: looks up\n    payload: x\n"
                       "    expected_result: \"'HTTP 404' in output.seen\"\n")
    with BillingApi() as api, serving(monkeypatch, ask_missing):
        desk.run("--connic-record-mode", "once", "--connic-api-url", f"billing={api.url}").assert_outcomes(passed=1)
    data = yaml.safe_load(cassette_text(desk))
    (call,) = data["runs"][0]["calls"]
    assert call["error"].startswith("HTTP 404 Not Found from GET /v1/invoices/{id}")
    with no_network(monkeypatch):
        desk.run().assert_outcomes(passed=1)  # replayed as the same failure


def test_a_spec_that_does_not_validate_is_a_located_load_error(desk: ConnicProject) -> None:
    desk.write("apis/billing.yaml", SPEC.replace("info: {title: Billing, version: \"1.0\"}", "info: {title: Billing}"))
    result = desk.run()
    assert result.ret != 0
    result.stdout.fnmatch_lines([
        "*the Connic project failed to load*",
        "*apis/billing.yaml:2: the OpenAPI spec 'billing' does not validate at info: 'version' is a required property*",
    ])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    result.stdout.no_fnmatch_line("*with no spec registry*")  # the spec was named: its error says it all


def test_an_unknown_api_tool_is_located_at_its_line(desk: ConnicProject) -> None:
    desk.agent("desk", tools=["api:billing.invoice_get", "api:billing.refund_create"])
    result = desk.run()
    assert result.ret != 0
    result.stdout.fnmatch_lines([
        ("*agents/desk.yaml:8: Agent 'desk': cannot resolve tool 'api:billing.refund_create': Tool 'refund_create' "
        "not found in API spec 'billing'. Available: customers_get, invoice_create, invoice_get*"),
    ])


def test_a_spec_named_by_option_and_a_ref_to_an_unnamed_spec(desk: ConnicProject) -> None:
    """The option reaches xdist's workers and the warning is shown once: the equivalence session
    (tests/plugin/test_xdist_reports.py)."""
    (desk.root / "apis" / "billing.yaml").rename(desk.root / "billing-spec.yaml")
    desk.agent("desk", tools=["api:billing.invoice_get", "api:crm.contacts_get"])
    # a hand-written cassette: the model's turns and the API's answer (docs/models.md "Calls")
    desk.cassette("desk", "looks up", [{
        "turns": [{"tool_calls": [{"name": "invoice_get", "arguments": {"id": "inv_1"}}]},
                  {"content": '{"amount": 120, "hooked": "invoice_get"}'}],
        "calls": [{"kind": "api", "name": "billing.invoice_get", "result": {"amount": 120}}],
    }])
    args = ("--connic-api-spec", "billing=billing-spec.yaml", "-W", "default", "-p", "no:randomly")
    result = desk.run(*args)
    result.assert_outcomes(passed=1, warnings=2)  # and the hand-written cassette notice
    result.stdout.fnmatch_lines([
        ("*agents/desk.yaml:8: ConnicLoadWarning: agents/desk.yaml: tools entry 'api:crm.contacts_get' *"
        "--connic-api-spec crm=PATH, or apis/crm.yaml*"),
    ])


def test_a_bad_option_value_names_its_source(desk: ConnicProject) -> None:
    result = desk.run("--connic-api-url", "billing=ftp://x")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*invalid value 'billing=ftp://x' from --connic-api-url*http:// or https://*"])


def test_coverage_counts_api_tools_when_their_spec_is_given(desk: ConnicProject) -> None:
    desk.run("--connic-coverage", "--connic-coverage-json", "cov.json")
    (row,) = json.loads((desk.root / "cov.json").read_text("utf-8"))["agents"]
    assert (row["tools_total"], row["tools_covered"]) == (3, 1)  # invoice_get is asserted

    (desk.root / "apis" / "billing.yaml").unlink()  # no spec: Connic's local rule, api: refs do not count
    desk.run("--connic-coverage", "--connic-coverage-json", "cov.json")
    (row,) = json.loads((desk.root / "cov.json").read_text("utf-8"))["agents"]
    assert (row["tools_total"], row["tools_covered"]) == (0, 0)
