"""``api:`` tools below the session (docs/mcp-and-api-tools.md): the project's tool hooks fire for
an API tool, a call the cassette does not record fails the case naming it, and an HTTP error is
the tool error the model reads, recorded and replayed. What the plugin wires (``--connic-api-url``
and ``--connic-api-spec``, the reports free of the API's token, a spec that does not validate or a
tool it does not have, coverage) stays in tests/plugin/test_api_tools.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from helpers.billing import FAST_RETRIES, KEY, TOKEN, BillingApi, answer_with_tool_result
from helpers.equivalence import BILLING_SPEC as SPEC
from helpers.equivalence import DESK_HOOKS as HOOKS
from helpers.equivalence import DESK_SUITE as SUITE
from helpers.fake_provider import Reply, text, tool_call
from helpers.harness import CaseProject, first_failure
from helpers.network import local_provider_env, no_network, serving
from pytest_connic.project.apispec import load_registry
from pytest_connic.records.events import HookEvent
from pytest_connic.records.outcome import CaseOutcome

pytestmark = pytest.mark.usefixtures("litellm_imported")


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    local_provider_env(monkeypatch, KEY)
    monkeypatch.setenv("CONNIC_API_BILLING_TOKEN", TOKEN)


@pytest.fixture
def desk(case_project: CaseProject) -> CaseProject:
    case_project.write("apis/billing.yaml", SPEC)
    case_project.agent("desk", tools=["api:billing.invoice_*", "api:billing.customers_get"],
                       retry_options=FAST_RETRIES)
    case_project.write("hooks/desk.py", HOOKS)
    case_project.suite("desk", SUITE)
    return case_project


def against(desk: CaseProject, url: str | None) -> None:
    """The project's specs as the session reads them, requests to ``url`` (``--connic-api-url``)."""
    desk.api = load_registry(desk.root, {}, {"billing": url} if url else None)


def recorded(desk: CaseProject, monkeypatch: pytest.MonkeyPatch, model: Any = answer_with_tool_result,
             mode: str = "once") -> tuple[CaseOutcome, BillingApi]:
    with BillingApi() as api, serving(monkeypatch, model):
        against(desk, api.url)
        outcome = desk.case("desk", "looks up", mode=mode)
    return outcome, api


def replayed(desk: CaseProject, monkeypatch: pytest.MonkeyPatch) -> CaseOutcome:
    against(desk, None)
    with no_network(monkeypatch) as attempts:
        outcome = desk.case("desk", "looks up")
    assert attempts == []
    return outcome


def test_hooks_fire_for_an_api_tool(desk: CaseProject, monkeypatch: pytest.MonkeyPatch) -> None:
    hooked, _ = recorded(desk, monkeypatch, mode="all")
    assert hooked.verdict_passed, hooked.failure_reason  # the after hook's 'hooked' reached the model
    (record,) = hooked.records
    assert [(e.phase, e.tool) for e in record.events if isinstance(e, HookEvent)] == [
        ("before", "api:billing.invoice_get"), ("after", "api:billing.invoice_get")]

    desk.write("hooks/desk.py", "")  # without the hooks the output lacks 'hooked'
    plain, _ = recorded(desk, monkeypatch, mode="all")
    assert not plain.verdict_passed
    assert "output.hooked = <missing>" in first_failure(plain)


def test_a_call_missing_from_the_cassette_fails_the_case_naming_it(
    desk: CaseProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert recorded(desk, monkeypatch)[0].verdict_passed
    path = desk.root / "cassettes" / "desk" / "looks up.yaml"
    data = yaml.safe_load(path.read_text("utf-8"))
    del data["runs"][0]["calls"]
    path.write_text(yaml.safe_dump(data), "utf-8")

    outcome = replayed(desk, monkeypatch)

    assert not outcome.verdict_passed
    (record,) = outcome.records
    assert record.infrastructure_error is None  # the case's failure, no internal error
    failure = first_failure(outcome)
    assert ("runs[0].calls: run 1 made the api call 'billing.invoice_get' with arguments {\"id\": \"inv_1\"}, "
            "but the cassette records no such call") in failure
    assert "--connic-record-mode=all" in failure


def test_an_http_error_is_the_tool_error_the_model_reads(desk: CaseProject, monkeypatch: pytest.MonkeyPatch) -> None:
    def ask_missing(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return text(json.dumps({"amount": 0, "hooked": "x", "seen": last["content"]}))
        return tool_call("invoice_get", {"id": "inv_404"})

    desk.suite("desk", "tests:\n  - name: looks up\n    payload: x\n"
                       "    expected_result: \"'HTTP 404' in output.seen\"\n")
    outcome, api = recorded(desk, monkeypatch, ask_missing)
    assert outcome.verdict_passed, outcome.failure_reason
    assert [(m, p) for m, p, _ in api.requests] == [("GET", "/v1/invoices/inv_404")]
    data = yaml.safe_load((desk.root / "cassettes" / "desk" / "looks up.yaml").read_text("utf-8"))
    (call,) = data["runs"][0]["calls"]
    assert call["error"].startswith("HTTP 404 Not Found from GET /v1/invoices/{id}")
    assert replayed(desk, monkeypatch).verdict_passed  # replayed as the same failure
