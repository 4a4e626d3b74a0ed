"""Matching rules and volatile values below the session: a project whose tool returns a fresh
``uuid4()`` into the conversation, recorded from the fake provider on 127.0.0.1, replays green
(the UUID is a volatile value); with no volatile kinds it diverges and the failure offers the
rule; rules (the settings' or the cassette's ``match:``) hold once the digests know them
(docs/models.md). The ini's wiring, a rule that backtracks, and a divergence's report with the tool's traceback
stay in tests/plugin/test_matching_rules.py."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from helpers.harness import CaseProject, first_failure
from helpers.network import local_provider_env, no_network, serving
from helpers.shop import SUITE, TOOLS, UUID_RULE, shop_model
from pytest_connic.models.matching import parse_ini_lines
from pytest_connic.reports.failure import failure_text
from pytest_connic.secrets import Masker

pytestmark = pytest.mark.usefixtures("litellm_imported")

@pytest.fixture
def shop(case_project: CaseProject, monkeypatch: pytest.MonkeyPatch) -> CaseProject:
    local_provider_env(monkeypatch, "sk-test-matching-0123456789")
    case_project.tool("shop", TOOLS)
    case_project.agent("shop", tools=["shop.new_order"], retry_options={"attempts": 1})
    case_project.suite("shop", SUITE)
    return case_project


def record(project: CaseProject, monkeypatch: pytest.MonkeyPatch, **settings: Any) -> None:
    with serving(monkeypatch, shop_model):
        assert project.case("shop", "orders", mode="once", **settings).verdict_passed


def replay(project: CaseProject, monkeypatch: pytest.MonkeyPatch, **settings: Any) -> Any:
    with no_network(monkeypatch) as attempts:
        outcome = project.case("shop", "orders", **settings)
    assert attempts == []
    return outcome


def uuid_rules() -> Any:
    return parse_ini_lines([UUID_RULE])


def test_a_tools_uuid4_replays_green_without_a_rule(shop: CaseProject, monkeypatch: pytest.MonkeyPatch) -> None:
    record(shop, monkeypatch)
    assert replay(shop, monkeypatch).verdict_passed
    assert shop.warnings == []


def test_with_no_volatile_kinds_the_uuid_diverges_and_the_failure_offers_the_rule(
    shop: CaseProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    record(shop, monkeypatch, volatile=())
    outcome = replay(shop, monkeypatch, volatile=())
    assert not outcome.verdict_passed
    reason = outcome.failure_reason or ""
    uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    assert re.fullmatch(
        rf"replay diverged: new_order now returns something else: order_id \"{uuid}\" → \"{uuid}\"; the model's "
        r"recorded answers were made for the request before that change \(cassettes/shop/orders\.yaml: "
        r"runs\[0\]\.turns\[1\], message 2 \(tool\) differs\)\. Its text holds a UUID \('" + uuid + r"'\) that the "
        r"recording did not have; if it changes from run to run, add `match: \[" + re.escape(UUID_RULE)
        + r"\]` to the cassette.*", reason, re.DOTALL), reason


def test_with_a_settings_rule_the_recording_replays_green_under_the_gate(
    shop: CaseProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    record(shop, monkeypatch, match_rules=uuid_rules())
    assert replay(shop, monkeypatch, match_rules=uuid_rules()).verdict_passed
    assert shop.warnings == []


def test_a_rule_added_to_the_cassette_after_recording_holds_once_the_digests_are_refreshed(
    shop: CaseProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    record(shop, monkeypatch)
    path = shop.root / "cassettes" / "shop" / "orders.yaml"
    text_before = path.read_text("utf-8")
    path.write_text(text_before.replace("version: 1\n", f"version: 1\nmatch: [{UUID_RULE}]\n", 1), "utf-8")

    stale = replay(shop, monkeypatch)
    assert not stale.verdict_passed
    assert "message 2 (tool) differs). The matching rules changed this message" in (stale.failure_reason or "")
    assert "--connic-record-mode=digests" in failure_text(stale, Masker(()))
    assert replay(shop, monkeypatch, mode="digests").verdict_passed
    assert replay(shop, monkeypatch).verdict_passed
    assert shop.warnings == []
    data = yaml.safe_load(path.read_text("utf-8"))
    assert data["match"] == [yaml.safe_load(UUID_RULE)]  # the rule is kept as written


def test_re_recording_keeps_the_cassettes_rules(shop: CaseProject, monkeypatch: pytest.MonkeyPatch) -> None:
    shop.write("cassettes/shop/orders.yaml", f"version: 1\nmatch: [{UUID_RULE}]\nruns:\n  - turns: [{{content: x}}]\n")
    with serving(monkeypatch, shop_model):
        assert shop.case("shop", "orders", mode="all").verdict_passed
    data = yaml.safe_load((shop.root / "cassettes" / "shop" / "orders.yaml").read_text("utf-8"))
    assert data["match"] == [yaml.safe_load(UUID_RULE)] and len(data["runs"][0]["turns"]) == 2
    assert replay(shop, monkeypatch).verdict_passed
    assert shop.warnings == []


def test_a_bad_rule_in_a_cassette_fails_its_case_with_the_location(shop: CaseProject) -> None:
    shop.write("cassettes/shop/orders.yaml", "version: 1\nmatch:\n  - ignore: 'messages[x'\nruns:\n"
                                             f"  - turns: [{{content: '{json.dumps({'item': 'book'})}'}}]\n")
    outcome = shop.case("shop", "orders")
    assert not outcome.verdict_passed
    assert "cassettes/shop/orders.yaml:3:13: match[0].ignore: invalid path 'messages[x' at character 9" in (
        first_failure(outcome))
