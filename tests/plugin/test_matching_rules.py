"""Matching rules and volatile values through the plugin: the ini's wiring (``connic_volatile =
none`` makes a tool's fresh ``uuid4()`` diverge, and the failure offers the rule; a bad
``connic_match_rules`` line is a usage error naming the key; a rule that backtracks ends the
session by itself), and a divergence's failure report with the case's trace and the tool's
traceback. What rules do in a run (volatile values replay green, the settings' and the cassette's
``match:`` rules, digests, re-recording) is tested below the session:
tests/unit/lifecycle/test_replay_matching.py."""

from __future__ import annotations

import importlib.util
import json

import pytest

from helpers.network import local_provider_env, no_network, serving, warm_up_litellm
from helpers.project import ConnicProject, esc
from helpers.shop import SUITE, TOOLS, UUID_RULE, shop_model

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

if importlib.util.find_spec("litellm") is None:
    pytest.skip("the [live] extra (litellm) is not installed", allow_module_level=True)

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


def test_a_bad_ini_rule_is_a_usage_error_naming_the_key(shop: ConnicProject) -> None:
    shop.write("pytest.ini", "[pytest]\nconnic_match_rules =\n    ignore: system\n    {replace: '(', with: x}\n")
    result = shop.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([esc(
        "*invalid matching rule from ini connic_match_rules, line 2 (\"{replace: '(', with: x}\").replace: "
        "invalid regular expression '(': missing )*"
    )])


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
