"""Matching rules and volatile values through the plugin: a project whose tool returns a fresh
``uuid4()`` into the conversation, recorded from the fake provider on 127.0.0.1, replays green
(the UUID is a volatile value); with ``connic_volatile = none`` it diverges and the failure offers
the rule; rules (ini or the cassette's ``match:``) hold once the digests know them."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest
import yaml

from helpers.fake_provider import Reply, text, tool_call
from helpers.network import local_provider_env, no_network, serving, warm_up_litellm
from helpers.project import ConnicProject, esc

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

if importlib.util.find_spec("litellm") is None:
    pytest.skip("the [live] extra (litellm) is not installed", allow_module_level=True)

UUID_RULE = ("{replace: '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', "
             "with: '<uuid>'}")
TOOLS = '''
import uuid


def new_order(item: str) -> dict:
    """Place an order.

    Args:
        item: what to order
    """
    return {"order_id": str(uuid.uuid4()), "item": item}
'''
SUITE = """
tests:
  - name: orders
    payload: "one book"
    expected_tool_calls:
      - shop.new_order: params.item == "book"
    expected_result: output.item == "book"
"""


def shop_model(body: dict[str, Any]) -> Reply:
    """Ask for ``new_order``, then answer with what the tool returned."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return text(last["content"])
    return tool_call("new_order", {"item": "book"})


@pytest.fixture(scope="module", autouse=True)
def litellm_imported() -> None:
    warm_up_litellm()


@pytest.fixture
def shop(project: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> ConnicProject:
    local_provider_env(monkeypatch, "sk-test-matching-0123456789")
    project.tool("shop", TOOLS)
    project.agent("shop", tools=["shop.new_order"], retry_options={"attempts": 1})
    project.suite("shop", SUITE)
    return project


def record(project: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    with serving(monkeypatch, shop_model):
        project.run("--connic-record-mode", "once").assert_outcomes(passed=1)


def test_a_tools_uuid4_replays_green_without_a_rule(shop: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    record(shop, monkeypatch)
    with no_network(monkeypatch):
        shop.run().assert_outcomes(passed=1, warnings=0)


def test_with_no_volatile_kinds_the_uuid_diverges_and_the_failure_offers_the_rule(
    shop: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    shop.write("pytest.ini", "[pytest]\nconnic_volatile = none\n")
    record(shop, monkeypatch)
    with no_network(monkeypatch):
        result = shop.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([esc(
        "*replay diverged: new_order now returns something else: order_id \"*-*-*-*-*\" → \"*-*-*-*-*\"; the model's "
        "recorded answers were made for the request before that change (cassettes/shop/orders.yaml: "
        "runs[0].turns[1], message 2 (tool) differs). Its text holds a UUID ('*-*-*-*-*') that the recording did "
        f"not have; if it changes from run to run, add `match: [{UUID_RULE}]` to the cassette*"
    )])


def test_with_an_ini_rule_the_recording_replays_green_under_the_gate(
    shop: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    shop.write("pytest.ini", f"[pytest]\nconnic_match_rules =\n    {UUID_RULE}\n")
    record(shop, monkeypatch)
    with no_network(monkeypatch):
        shop.run().assert_outcomes(passed=1, warnings=0)


def test_a_rule_added_to_the_cassette_after_recording_holds_once_the_digests_are_refreshed(
    shop: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    record(shop, monkeypatch)
    path = shop.root / "cassettes" / "shop" / "orders.yaml"
    text_before = path.read_text("utf-8")
    path.write_text(text_before.replace("version: 1\n", f"version: 1\nmatch: [{UUID_RULE}]\n", 1), "utf-8")
    with no_network(monkeypatch):
        stale = shop.run()
        stale.assert_outcomes(failed=1)
        stale.stdout.fnmatch_lines([("*message 2 (tool) differs). The matching rules changed this message*"
                                     "--connic-record-mode=digests*")])
        shop.run("--connic-record-mode", "digests").assert_outcomes(passed=1)
        shop.run().assert_outcomes(passed=1, warnings=0)
    data = yaml.safe_load(path.read_text("utf-8"))
    assert data["match"] == [yaml.safe_load(UUID_RULE)]  # the rule is kept as written


def test_re_recording_keeps_the_cassettes_rules(shop: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    shop.write("cassettes/shop/orders.yaml", f"version: 1\nmatch: [{UUID_RULE}]\nruns:\n  - turns: [{{content: x}}]\n")
    with serving(monkeypatch, shop_model):
        shop.run("--connic-record-mode", "all").assert_outcomes(passed=1)
    data = yaml.safe_load((shop.root / "cassettes" / "shop" / "orders.yaml").read_text("utf-8"))
    assert data["match"] == [yaml.safe_load(UUID_RULE)] and len(data["runs"][0]["turns"]) == 2
    with no_network(monkeypatch):
        shop.run().assert_outcomes(passed=1, warnings=0)


def test_a_bad_ini_rule_is_a_usage_error_naming_the_key(shop: ConnicProject) -> None:
    shop.write("pytest.ini", "[pytest]\nconnic_match_rules =\n    ignore: system\n    {replace: '(', with: x}\n")
    result = shop.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([esc(
        "*invalid matching rule from ini connic_match_rules, line 2 (\"{replace: '(', with: x}\").replace: "
        "invalid regular expression '(': missing )*"
    )])


def test_a_bad_rule_in_a_cassette_fails_its_case_with_the_location(shop: ConnicProject) -> None:
    shop.write("cassettes/shop/orders.yaml", "version: 1\nmatch:\n  - ignore: 'messages[x'\nruns:\n"
                                             f"  - turns: [{{content: '{json.dumps({'item': 'book'})}'}}]\n")
    result = shop.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([esc("*cassettes/shop/orders.yaml:3:13: match[0].ignore: invalid path "
                                     "'messages[x' at character 9*")])


RAISING = '''
def new_order(item: str) -> dict:
    """Place an order.

    Args:
        item: what to order
    """
    return {"order_id": _stock()[item], "item": item}


def _stock():
    return {"pen": 1}
'''


def test_a_divergence_shows_the_cases_trace_and_the_tools_traceback(
    shop: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    shop.write("pytest.ini", f"[pytest]\nconnic_match_rules =\n    {UUID_RULE}\n")
    record(shop, monkeypatch)
    shop.tool("shop", RAISING)  # the tool now raises: the next request differs from the recorded one
    shop.agent("shop", tools=["shop.new_order"], retry_options={"attempts": 3})  # the model reads the error
    with no_network(monkeypatch):
        result = shop.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "tests/shop.yaml:2: case 'orders' (shop) failed",
        "*replay diverged: new_order now raises KeyError: 'book' at tools/shop.py:7; *orders.yaml: runs[[]0[]].turns[[]1[]]*",
        "*Trace:",
        "*✗ new_order(item=\"book\") (*ms) — KeyError: 'book' at tools/shop.py:7",
        "new_order(...) (tool call #1) raised:",
        "*return {\"order_id\": _stock()[[]item[]], \"item\": item}",
        "E   KeyError: 'book'",
        "tools/shop.py:7: KeyError",
    ])
    result.stdout.fnmatch_lines(["FAILED tests/shop.yaml::orders - replay diverged: new_order now raises*"])


def test_a_backtracking_ini_rule_ends_the_session_by_itself_with_a_located_error(
    shop: ConnicProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39: a rule that backtracks for ever (``(a|aa)+$`` on sixty ``a`` and a ``!``) no longer
    spins pytest's process: a real session, without pytest-timeout, ends by itself with the rule's
    place, and its reports are written."""
    shop.suite("shop", SUITE.replace('payload: "one book"', 'payload: "' + "a" * 60 + '!"'))
    record(shop, monkeypatch)
    shop.write("pytest.ini", "[pytest]\nconnic_match_rules =\n    {replace: '(a|aa)+$', with: x}\n")
    result = shop.pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:timeout",
                                                "--connic-json", "report.json", timeout=120)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([esc("*ini connic_match_rules, line 1.replace: the regular expression "
                                     "'(a|aa)+$' ran past its bound of 2s and was stopped*")])
    report = json.loads((shop.root / "report.json").read_text("utf-8"))
    assert "ran past its bound" in report["cases"][0]["failure_reason"]
