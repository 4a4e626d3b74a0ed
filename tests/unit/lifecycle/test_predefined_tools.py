"""Connic's predefined tools below pytest (spec §9.8, §5.6): the local database, files and
retrieval with the agent's access rules, builders seeding data through ``connic.tools``,
``send_connector`` and outbound connectors recorded, ``web_*`` through what a project's
``pytest_connic_predefined_tool`` hook answers (``HookHost``), and tool discovery attributed to the
real tool. That a session puts the SDK's placeholders back is tests/plugin/test_predefined_plugin.py."""

from __future__ import annotations

from typing import Any

import pytest

from helpers.harness import CaseProject, HookHost, first_failure
from helpers.project import CALC_TOOLS
from pytest_connic.records.events import OutboundEvent
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord


def only(outcome: CaseOutcome) -> RunRecord:
    (record,) = outcome.records
    return record


# --------------------------------------------------------------------------- the database

SHOP_TOOLS = '''
from connic.tools import db_find, db_insert as insert_document


async def open_orders(customer: str) -> dict:
    """The ids of a customer's open orders.

    Args:
        customer: the customer
    """
    found = await db_find("orders", filter={"customer": customer, "status": "open"}, sort={"order_id": 1})
    return {"ids": [d["order_id"] for d in found["documents"]]}


async def log_event(text: str) -> dict:
    """Log an event.

    Args:
        text: what happened
    """
    return await insert_document("events", {"text": text})
'''

SEED_BUILDER = '''
from connic.tools import db_count, db_delete, db_insert

ORDERS = [
    {"order_id": "O1", "customer": "ann", "status": "open"},
    {"order_id": "O2", "customer": "ann", "status": "open"},
    {"order_id": "O3", "customer": "bob", "status": "open"},
]


async def build(context, builder_args, test_name, payload, files):
    inserted = await db_insert("orders", ORDERS)
    context["ids"] = [d["_id"] for d in inserted["inserted"]]
    return {"customer": "ann"}


async def cleanup(run, context, builder_args):
    removed = await db_delete("orders", {"_id": {"$in": context["ids"]}})
    left = await db_count("orders")
    return removed["deleted_count"] == 3 and left["count"] == 0
'''


@pytest.fixture
def shop(case_project: CaseProject) -> CaseProject:
    case_project.tool("shop", SHOP_TOOLS)
    case_project.write("tests/builders/seed_orders.py", SEED_BUILDER)
    case_project.agent("shop", tools=["db_find", "db_insert", "db_delete", "shop.open_orders", "shop.log_event"],
                       database={"prevent_delete": True,
                                 "collections": {"orders": {"prevent_write": True}, "events": {}}})
    return case_project


def test_builder_seeds_documents_that_the_agent_finds(shop: CaseProject) -> None:
    shop.suite("shop", """
        version: "1.0"
        tests:
          - name: finds seeded orders
            builder: seed_orders
    """)
    shop.replies("shop", "finds seeded orders",
                 [("db_find", {"collection": "orders", "filter": {"customer": "ann"}})],
                 [("open_orders", {"customer": "ann"}), ("log_event", {"text": "looked up"})], "two orders")

    outcome = shop.case("shop", "finds seeded orders")

    assert outcome.verdict_passed  # and the builder's cleanup found the three orders it seeded
    find, open_orders, log_event = only(outcome).tool_calls
    assert find.params["filter"] == {"customer": "ann"}
    assert isinstance(find.result, dict) and find.result["count"] == 2
    assert [d["order_id"] for d in find.result["documents"]] == ["O1", "O2"]
    assert open_orders.result == {"ids": ["O1", "O2"]}
    assert isinstance(log_event.result, dict) and log_event.result["inserted_count"] == 1


def test_access_rules_block_writes_and_deletes(shop: CaseProject) -> None:
    shop.suite("shop", """
        version: "1.0"
        tests:
          - name: blocked
            builder: seed_orders
    """)
    # the denied insert would make the builder's cleanup count 1 order left and return False
    shop.replies("shop", "blocked",
                 [("db_insert", {"collection": "orders", "documents": {"order_id": "O9", "customer": "eve"}}),
                  ("db_insert", {"collection": "events", "documents": {"text": "tried"}}),
                  ("db_delete", {"collection": "orders", "filter": {"customer": "bob"}}),
                  ("db_find", {"collection": "customers"})],
                 "blocked")

    outcome = shop.case("shop", "blocked")

    assert outcome.verdict_passed and only(outcome).output == "blocked"
    orders, events, delete, find = only(outcome).tool_calls
    assert orders.error == ("PredefinedToolError: Access denied: agent 'shop' may not write to collection 'orders' "
                            "(database.collections.orders.prevent_write)")
    assert events.error is None and isinstance(events.result, dict) and events.result["inserted_count"] == 1
    assert "may not delete from collection 'orders'" in str(delete.error)
    assert "may not access collection 'customers'" in str(find.error)


TALLY = '''
from connic.tools import db_count, db_insert


async def tally(payload: dict) -> dict:
    """Count this visit."""
    await db_insert("visits", {"by": payload.get("message", "")})
    return await db_count("visits")
'''


def test_data_is_kept_per_runtime_and_per_environment(case_project: CaseProject) -> None:
    case_project.tool("counter", TALLY)
    case_project.agent("counter", type="tool", tool_name="counter.tally")
    case_project.suite("counter", """
        version: "1.0"
        tests:
          - name: first visit
            payload: one
          - name: second visit sees the first
            payload: two
    """)
    # a session's runtime keeps its data from case to case; the next session starts empty
    for env in (None, None, "staging"):
        outcomes = case_project.cases("counter", env=env)
        assert [only(o).output for o in outcomes.values()] == [{"count": 1}, {"count": 2}]


# --------------------------------------------------------------------------- files and retrieval


def test_files_and_retrieval_with_access_rules(case_project: CaseProject) -> None:
    case_project.agent(
        "librarian",
        tools=["file_write", "file_list", "retrieval_store", "retrieval_query", "query_knowledge"],
        files={"folders": {"notes": {}, "locked": {"prevent_write": True}}},
        retrieval={"namespaces": {"faq": {}, "products": {"prevent_write": True}}},
    )
    case_project.suite("librarian", """
        version: "1.0"
        tests:
          - name: sandbox and index
            payload: remember
    """)
    case_project.replies(
        "librarian", "sandbox and index",
        [("file_write", {"path": "notes/a.txt", "content": "hello"}),
         ("file_write", {"path": "locked/b.txt", "content": "nope"}),
         ("retrieval_store", {"content": "Refund policy: refunds within 30 days.", "namespace": "faq"}),
         ("retrieval_store", {"content": "Headphones", "namespace": "products"})],
        [("file_list", {"folder": "notes", "scope": "run"}),
         ("retrieval_query", {"query": "refund", "namespace": "faq"}),
         ("query_knowledge", {"query": "refund"})],
        "done",
    )

    record = only(case_project.case("librarian", "sandbox and index"))

    calls = record.tool_calls
    denied = {str(c.params.get("path") or c.params["namespace"]): str(c.error) for c in calls if c.error}
    assert sorted(denied) == ["locked/b.txt", "products"]
    assert all("Access denied: agent 'librarian' may not write" in e for e in denied.values()), denied
    results: dict[str, Any] = {c.name: c.result for c in calls if c.error is None}
    assert (results["file_list"]["count"], results["file_list"]["total"]) == (1, 1)
    assert results["retrieval_store"]["success"] is True
    assert results["retrieval_query"]["results"][0]["namespace"] == "faq"
    assert "30 days" in results["retrieval_query"]["results"][0]["content"]
    assert results["query_knowledge"]["results"][0]["namespace"] == "faq"
    assert not (case_project.root / "notes").exists()  # the sandbox is the runtime's, not the project


# --------------------------------------------------------------------------- outbound connectors

NOTIFIER_MIDDLEWARE = '''
from connic import StopProcessing
from connic.tools import send_connector


def before(content, context):
    if context["payload"].get("stop"):
        raise StopProcessing('{"text": "stopped"}', publish_outbound=False)
    return content


async def after(response, context):
    action = context["payload"].get("action", "notify_team")
    queued = await send_connector(action, {"text": response}, idempotency_key=context["run_id"])
    context["queued"] = queued
    return response
'''

CONNECTORS = {
    "team": """
        type: http
        mode: outbound
        config: {outbound_url: "https://hooks.invalid/team"}
        agents:
          - name: notifier
            outbound: {usage: middleware, action_name: notify_team}
    """,
    "audit": """
        type: http
        mode: outbound
        config: {outbound_url: "https://hooks.invalid/audit"}
        agents:
          - name: notifier
            outbound: {usage: automatic}
    """,
}


def test_send_connector_and_automatic_outbound_are_recorded_never_delivered(case_project: CaseProject) -> None:
    case_project.tool("relay", '''
        def relay(payload: dict) -> dict:
            """Pass the text on."""
            return {"text": payload.get("text")}
    ''')
    case_project.agent("notifier", type="tool", tool_name="relay.relay")
    case_project.write("middleware/notifier.py", NOTIFIER_MIDDLEWARE)
    for key, text in CONNECTORS.items():
        case_project.write(f"connectors/{key}.yaml", text)
    case_project.suite("notifier", """
        version: "1.0"
        tests:
          - name: recorded
            payload: '{"text": "hi"}'
          - name: unknown action
            payload: '{"text": "hi", "action": "page_oncall"}'
          - name: stopped without publishing
            payload: '{"stop": true}'
    """)

    runs = {name: only(o) for name, o in case_project.cases("notifier").items()}

    recorded = runs["recorded"]
    assert recorded.output == {"text": "hi"}
    sent, automatic = recorded.outbound
    assert sent["kind"] == "send_connector" and sent["connector"] == "team"
    assert (sent["action_name"], sent["payload"]) == ("notify_team", {"text": '{"text": "hi"}'})
    assert sent["delivered"] is False
    assert sent["idempotency_key"] == recorded.run_id
    queued = recorded.run_context["queued"]
    assert isinstance(queued, dict) and queued["connector_run_id"] == sent["connector_run_id"]
    assert (automatic["kind"], automatic["connector"]) == ("automatic", "audit")
    assert automatic["delivered"] is False
    assert [e.name for e in recorded.events if isinstance(e, OutboundEvent)] == [
        "outbound send_connector notify_team (recorded, not delivered)",
        "outbound automatic audit (recorded, not delivered)"]
    unknown = runs["unknown action"]
    assert unknown.status == "failed" and "action_name 'page_oncall'" in str(unknown.error)
    assert unknown.outbound == []
    stopped = runs["stopped without publishing"]
    assert (stopped.output, stopped.outbound) == ({"text": "stopped"}, [])


# --------------------------------------------------------------------------- web tools and the hook


def web_hook(name: str, params: dict[str, object], context: dict[str, object]) -> object:
    """What a project's ``pytest_connic_predefined_tool`` hook answers: the search, and any tool."""
    if name == "web_search":
        return {"results": [{"title": context["agent_name"], "url": "https://example.com", "content": params["query"]}]}
    if name == "db_count":
        return {"count": 42}
    return None


def test_web_tools_replay_a_recording_or_take_the_hook_which_can_supply_any_predefined_tool(
        case_project: CaseProject) -> None:
    case_project.agent("researcher", tools=["web_search", "db_count"])
    case_project.suite("researcher", """
        version: "1.0"
        tests:
          - name: searches
            payload: find it
    """)
    case_project.replies("researcher", "searches", [("web_search", {"query": "pytest"}),
                                                    ("db_count", {"collection": "pages"})], "found")

    offline = case_project.case("researcher", "searches")

    # replay without a recording of the search fails the case (docs/predefined-tools.md)
    assert not offline.verdict_passed
    assert ("web_search: cassettes/researcher/searches.yaml: runs[0].calls: run 1 made the web call 'web_search' "
            "with arguments {\"query\": \"pytest\"}, but the cassette records no such call") in first_failure(offline)

    case_project.host = HookHost(predefined_tool=web_hook)
    hooked = case_project.case("researcher", "searches")

    assert hooked.verdict_passed
    search, count = only(hooked).tool_calls
    assert search.result == {"results": [{"title": "researcher", "url": "https://example.com", "content": "pytest"}]}
    assert count.result == {"count": 42}


# --------------------------------------------------------------------------- discovery


def test_discovered_calls_are_attributed_to_the_real_tool(case_project: CaseProject) -> None:
    case_project.tool("calc", CALC_TOOLS)
    case_project.agent("finder", tools=[], discoverable_tools=["calc.add", "calc.multiply"],
                       approval={"tools": ["calc.add"]})
    case_project.suite("finder", """
        version: "1.0"
        tests:
          - name: discovers add
            payload: 2 + 3?
            strict_approval_decisions: true
            approval_decisions:
              - {tool: calc.add, params: params.a == 2, decision: approve}
            expected_tool_calls:
              - search_tools: result.tools[0].name == "add"
              - calc.add: params.a == 2 and params.b == 3 and result.sum == 5
            expected_tool_call_order: [search_tools, add]
            expected_no_tool_calls: [use_tool, calc.multiply]
    """)
    case_project.replies("finder", "discovers add", [("search_tools", {"query": "add"})],
                         [("use_tool", {"tool_name": "add", "arguments": {"a": 2, "b": 3}})], "5")

    outcome = case_project.case("finder", "discovers add")

    # the case's own expectations hold only if the use_tool call counts as calc.add's
    assert outcome.verdict_passed
    search, add = only(outcome).tool_calls
    assert (search.name, search.via_discovery) == ("search_tools", False)
    assert (add.ref, add.via_discovery, add.approval, add.result) == ("calc.add", True, "approved", {"sum": 5})
