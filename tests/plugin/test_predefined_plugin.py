"""Connic's predefined tools through the plugin (spec §9.8, §5.6): the local database, files and
retrieval with the agent's access rules, builders seeding data through ``connic.tools``,
``send_connector`` and outbound connectors recorded, ``web_*`` through the hook, and tool
discovery attributed to the real tool."""

from __future__ import annotations

import asyncio
import json
import types
from typing import Any

import connic.tools as sdk_tools
import pytest

from helpers.project import CALC_TOOLS, ConnicProject
from pytest_connic.runtime import placeholders

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)


def runs(project: ConnicProject, report: str = "report.json") -> dict[str, dict[str, Any]]:
    cases = json.loads((project.root / report).read_text())["cases"]
    return {c["test_name"]: c["runs_detail"][0] for c in cases}


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
def shop(project: ConnicProject) -> ConnicProject:
    project.tool("shop", SHOP_TOOLS)
    project.write("tests/builders/seed_orders.py", SEED_BUILDER)
    project.agent("shop", tools=["db_find", "db_insert", "db_delete", "shop.open_orders", "shop.log_event"],
                  database={"prevent_delete": True,
                            "collections": {"orders": {"prevent_write": True}, "events": {}}})
    return project


def test_builder_seeds_documents_that_the_agent_finds(shop: ConnicProject) -> None:
    shop.suite("shop", """
        version: "1.0"
        tests:
          - name: finds seeded orders
            builder: seed_orders
            expected_tool_calls:
              - db_find: >-
                  params.filter.customer == "ann" and result.count == 2
                  and result.documents[1].order_id == "O2"
              - shop.open_orders: result.ids == ["O1", "O2"]
              - shop.log_event: result.inserted_count == 1
    """)
    shop.replies("shop", "finds seeded orders",
                 [("db_find", {"collection": "orders", "filter": {"customer": "ann"}})],
                 [("open_orders", {"customer": "ann"}), ("log_event", {"text": "looked up"})], "two orders")
    original = sdk_tools.db_find
    result = shop.run()
    result.assert_outcomes(passed=1)
    # the session put the SDK's placeholders back
    assert sdk_tools.db_find is original and not placeholders.is_dispatcher(sdk_tools.db_insert)


def test_access_rules_block_writes_and_deletes(shop: ConnicProject) -> None:
    shop.suite("shop", """
        version: "1.0"
        tests:
          - name: blocked
            builder: seed_orders
            expected_tool_calls:
              - db_insert: invocations == 2
              - db_insert: params.collection == "events" and result.inserted_count == 1
              - db_find: invocations == 1
            expected_result: output == "blocked"
    """)
    # the denied insert would make the builder's cleanup count 1 order left and return False
    shop.replies("shop", "blocked",
                 [("db_insert", {"collection": "orders", "documents": {"order_id": "O9", "customer": "eve"}}),
                  ("db_insert", {"collection": "events", "documents": {"text": "tried"}}),
                  ("db_delete", {"collection": "orders", "filter": {"customer": "bob"}}),
                  ("db_find", {"collection": "customers"})],
                 "blocked")
    result = shop.run("--connic-json", "report.json")
    result.assert_outcomes(passed=1)
    calls = runs(shop)["blocked"]["tool_calls"]
    assert calls[0]["error"] == (
        "PredefinedToolError: Access denied: agent 'shop' may not write to collection 'orders' "
        "(database.collections.orders.prevent_write)")
    assert calls[1]["error"] is None
    assert "may not delete from collection 'orders'" in calls[2]["error"]
    assert "may not access collection 'customers'" in calls[3]["error"]


TALLY = '''
from connic.tools import db_count, db_insert


async def tally(payload: dict) -> dict:
    """Count this visit."""
    await db_insert("visits", {"by": payload.get("message", "")})
    return await db_count("visits")
'''


def test_data_is_kept_per_session_and_per_environment(project: ConnicProject) -> None:
    project.tool("counter", TALLY)
    project.agent("counter", type="tool", tool_name="counter.tally")
    project.write(".env.staging", "STAGE=staging\n")
    project.suite("counter", """
        version: "1.0"
        tests:
          - name: first visit
            payload: one
            expected_result: output.count == 1
          - name: second visit sees the first
            payload: two
            expected_result: output.count == 2
    """)
    for args in ((), (), ("--connic-env", "staging")):
        result = project.run(*args)
        result.assert_outcomes(passed=2)


# --------------------------------------------------------------------------- files and retrieval


def test_files_and_retrieval_with_access_rules(project: ConnicProject) -> None:
    project.agent(
        "librarian",
        tools=["file_write", "file_list", "retrieval_store", "retrieval_query", "query_knowledge"],
        files={"folders": {"notes": {}, "locked": {"prevent_write": True}}},
        retrieval={"namespaces": {"faq": {}, "products": {"prevent_write": True}}},
    )
    project.suite("librarian", """
        version: "1.0"
        tests:
          - name: sandbox and index
            payload: remember
            expected_tool_calls:
              - file_write: invocations == 2
              - file_list: params.scope == "run" and result.count == 1 and result.total == 1
              - retrieval_store: params.namespace == "faq" and result.success == true
              - retrieval_query: >-
                  result.results[0].namespace == "faq" and "30 days" in result.results[0].content
              - query_knowledge: params.query == "refund" and result.results[0].namespace == "faq"
    """)
    project.replies(
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
    result = project.run("--connic-json", "report.json")
    result.assert_outcomes(passed=1)
    calls = runs(project)["sandbox and index"]["tool_calls"]
    denied = {c["params"].get("path") or c["params"]["namespace"]: c["error"] for c in calls if c["error"]}
    assert sorted(denied) == ["locked/b.txt", "products"]
    assert all("Access denied: agent 'librarian' may not write" in e for e in denied.values()), denied
    assert not (project.root / "notes").exists()  # the sandbox is the session's, not the project


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


def test_send_connector_and_automatic_outbound_are_recorded_never_delivered(project: ConnicProject) -> None:
    project.tool("relay", '''
        def relay(payload: dict) -> dict:
            """Pass the text on."""
            return {"text": payload.get("text")}
    ''')
    project.agent("notifier", type="tool", tool_name="relay.relay")
    project.write("middleware/notifier.py", NOTIFIER_MIDDLEWARE)
    for key, text in CONNECTORS.items():
        project.write(f"connectors/{key}.yaml", text)
    project.suite("notifier", """
        version: "1.0"
        tests:
          - name: recorded
            payload: '{"text": "hi"}'
            expected_result: output.text == "hi"
          - name: unknown action
            payload: '{"text": "hi", "action": "page_oncall"}'
            expected_result: status == "failed" and "action_name 'page_oncall'" in error
          - name: stopped without publishing
            payload: '{"stop": true}'
            expected_result: output.text == "stopped"
    """)
    result = project.run("--connic-json", "report.json")
    result.assert_outcomes(passed=3)
    detail = runs(project)
    recorded = detail["recorded"]
    sent, automatic = recorded["outbound"]
    assert sent["kind"] == "send_connector" and sent["connector"] == "team"
    assert (sent["action_name"], sent["payload"]) == ("notify_team", {"text": '{"text": "hi"}'})
    assert sent["delivered"] is False
    assert sent["idempotency_key"] == recorded["run_id"]
    assert recorded["run_context"]["queued"]["connector_run_id"] == sent["connector_run_id"]
    assert (automatic["kind"], automatic["connector"]) == ("automatic", "audit")
    assert automatic["delivered"] is False
    names = [e["name"] for e in recorded["events"] if e["type"] == "outbound"]
    assert names == ["outbound send_connector notify_team (recorded, not delivered)",
                     "outbound automatic audit (recorded, not delivered)"]
    assert detail["unknown action"]["outbound"] == []
    assert detail["stopped without publishing"]["outbound"] == []


# --------------------------------------------------------------------------- web tools and the hook

WEB_HOOK = '''
def pytest_connic_predefined_tool(config, name, params, context):
    if name == "web_search":
        hit = {"title": context["agent_name"], "url": "https://example.com", "content": params["query"]}
        return {"results": [hit]}
    if name == "db_count":
        return {"count": 42}
    return None
'''


def test_web_tools_replay_a_recording_or_take_the_hook_which_can_supply_any_predefined_tool(
        project: ConnicProject) -> None:
    project.agent("researcher", tools=["web_search", "db_count"])
    project.suite("researcher", """
        version: "1.0"
        tests:
          - name: searches
            payload: find it
            expected_tool_calls:
              - web_search: >-
                  result.results[0].url == "https://example.com"
                  and result.results[0].title == "researcher"
              - db_count: result.count == 42
    """)
    project.replies("researcher", "searches", [("web_search", {"query": "pytest"}),
                                               ("db_count", {"collection": "pages"})], "found")
    offline = project.run("--connic-json", "report.json")
    offline.assert_outcomes(failed=1)
    # replay without a recording of the search fails the case (docs/predefined-tools.md)
    offline.stdout.fnmatch_lines([("*web_search: *calls: run 1 made the web call 'web_search' with "
                                  "arguments {\"query\": \"pytest\"}, but the cassette records no such call*")])
    project.write("conftest.py", WEB_HOOK)
    project.run().assert_outcomes(passed=1)


# --------------------------------------------------------------------------- discovery


def test_discovered_calls_are_attributed_to_the_real_tool(project: ConnicProject) -> None:
    project.tool("calc", CALC_TOOLS)
    project.agent("finder", tools=[], discoverable_tools=["calc.add", "calc.multiply"],
                  approval={"tools": ["calc.add"]})
    project.suite("finder", """
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
    project.replies("finder", "discovers add", [("search_tools", {"query": "add"})],
                    [("use_tool", {"tool_name": "add", "arguments": {"a": 2, "b": 3}})], "5")
    result = project.run("--connic-json", "report.json")
    result.assert_outcomes(passed=1)
    search, add = runs(project)["discovers add"]["tool_calls"]
    assert (search["name"], search["via_discovery"]) == ("search_tools", False)
    assert (add["ref"], add["via_discovery"], add["approval"]) == ("calc.add", True, "approved")


# --------------------------------------------------------------------------- placeholders, unit level


def test_placeholders_swap_module_globals_and_restore_them() -> None:
    original = sdk_tools.db_find
    module = types.ModuleType("user_tools")
    module.find = original  # type: ignore[attr-defined]  # ``from connic.tools import db_find as find``
    placeholders.install()
    try:
        placeholders.rebind_modules([module])
        assert placeholders.is_dispatcher(sdk_tools.db_find) and placeholders.is_dispatcher(module.find)
        with pytest.raises(RuntimeError, match="called outside a pytest-connic run"):
            asyncio.run(module.find("orders"))
        with pytest.raises(TypeError, match=r"connic.tools.db_find\(\)"):
            asyncio.run(sdk_tools.db_find(nope=1))
    finally:
        placeholders.uninstall()
    assert sdk_tools.db_find is original and module.find is original
