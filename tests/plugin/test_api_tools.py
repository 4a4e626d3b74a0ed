"""``api:`` tools through the plugin: an OpenAPI spec names a real HTTP API on 127.0.0.1 (a
stdlib ``http.server`` in a thread, always stopped) pointed at by ``--connic-api-url``; cases record
against it with a model of the fake provider, then replay offline with the server and the network
gone, the API's token in no report; a spec that does not validate, a tool it does not have, a spec
named by ``--connic-api-spec``, a bad option, coverage. What a run does with its API tools (hooks,
unrecorded calls, HTTP errors) is tested below the session: tests/unit/lifecycle/test_api_tool_runs.py."""

from __future__ import annotations

import importlib.util
import json

import pytest
import yaml

from helpers.billing import FAST_RETRIES, KEY, TOKEN, BillingApi, answer_with_tool_result
from helpers.equivalence import BILLING_SPEC as SPEC
from helpers.equivalence import DESK_HOOKS as HOOKS
from helpers.equivalence import DESK_SUITE as SUITE
from helpers.fake_provider import FakeProvider
from helpers.network import local_provider_env, no_network, serving, warm_up_litellm
from helpers.project import ConnicProject

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

if importlib.util.find_spec("litellm") is None:
    pytest.skip("the [live] extra (litellm) is not installed", allow_module_level=True)


@pytest.fixture(scope="session", autouse=True)
def litellm_imported() -> None:
    """Import LiteLLM (and make one call) in this process before any inner run does (see
    tests/plugin/test_record_modes.py: pytester's restore of ``sys.meta_path``)."""
    warm_up_litellm()


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    local_provider_env(monkeypatch, KEY)
    monkeypatch.setenv("CONNIC_API_BILLING_TOKEN", TOKEN)


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
