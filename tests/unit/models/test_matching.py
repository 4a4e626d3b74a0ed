"""Matching rules: parsed with located errors, applied the same way when recording and replaying,
strict without rules, and divergence notes that show the rule that would ignore a difference."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import pytest

from pytest_connic.models import ModelRequest
from pytest_connic.models.cassette import parse_cassette
from pytest_connic.models.digest import request_fingerprint
from pytest_connic.models.divergence import VOLATILE, find
from pytest_connic.models.fingerprint import kinds_of, normalised
from pytest_connic.models.matching import MatchRuleError, normalise, parse_ini_lines, parse_rule

UUID_RE = VOLATILE[0][1]


def req(*messages: dict[str, Any], system: str = "You add.") -> ModelRequest:
    return ModelRequest("calc", "openai/gpt-4o-mini", system, list(messages))


def tool_result(value: dict[str, Any]) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "c1", "name": "make_id", "content": json.dumps(value)}


USER = {"role": "user", "content": "an id please"}


def explain(recorded: dict[str, Any], request: ModelRequest, rules: Any = ()) -> str | None:
    """The difference of ``request`` from a digest-only (older) recorded section, in words."""
    divergence = find(recorded, normalised(request, rules, kinds_of(recorded), START), request)
    return None if divergence is None else divergence.text()


START = dt.datetime(2026, 12, 1, 10, 0, tzinfo=dt.timezone.utc)


def test_without_rules_matching_is_strict() -> None:
    recorded = request_fingerprint(req(USER, tool_result({"id": str(uuid.uuid4())})))
    assert explain(recorded, req(USER, tool_result({"id": str(uuid.uuid4())}))) == "message 1 (tool) differs"


def test_a_regex_rule_makes_requests_that_differ_only_in_it_match() -> None:
    rules = parse_ini_lines([f"{{replace: '{UUID_RE}', with: '<uuid>'}}"])
    recorded = request_fingerprint(normalise(req(USER, tool_result({"id": str(uuid.uuid4())})), rules))
    assert explain(recorded, req(USER, tool_result({"id": str(uuid.uuid4())})), rules) is None
    # anything else still counts
    assert explain(recorded, req(USER, tool_result({"id": "fixed"})), rules) is not None


@pytest.mark.parametrize("path", ["messages[1].content.run_id", "messages[role=tool].content.run_id",
                                  "messages[*].content.run_id", "messages[-1].content['run_id']"])
def test_an_ignore_path_reaches_a_field_of_a_tool_result(path: str) -> None:
    rules = (parse_rule({"ignore": path}),)
    first = req(USER, tool_result({"run_id": "run-1", "sum": 3}))
    recorded = request_fingerprint(normalise(first, rules))
    assert explain(recorded, req(USER, tool_result({"run_id": "run-2", "sum": 3})), rules) is None
    assert explain(recorded, req(USER, tool_result({"run_id": "run-2", "sum": 4})), rules) is not None


def test_a_replace_rule_scoped_with_in_changes_nothing_else() -> None:
    rule = parse_rule({"replace": r"\d+", "with": "<n>", "in": "messages[role=user].content"})
    out = normalise(req({"role": "user", "content": "at 12:30"}, tool_result({"n": "7"}), system="v2"), [rule])
    assert out.messages[0]["content"] == "at <n>:<n>"
    assert out.messages[1]["content"] == json.dumps({"n": "7"}) and out.system_prompt == "v2"


def test_a_digest_only_recording_quotes_no_value_it_cannot_compare() -> None:
    """An older recording keeps digests only: a note cannot tell which value changed, so it quotes
    none (a UUID found in the text now may replay identically) and suggests no rule."""
    recorded = request_fingerprint(req(USER, tool_result({"id": "6f1c3e0a-3c1b-4d4e-9a57-1d2c0ffee000", "n": 1})))
    now = req(USER, tool_result({"id": "6f1c3e0a-3c1b-4d4e-9a57-1d2c0ffee000", "n": 2}))
    divergence = find(recorded, normalised(now, (), None, START), now)
    assert divergence is not None and divergence.legacy
    assert divergence.text() == "message 1 (tool) differs" and divergence.rule is None


def test_a_backtracking_rule_is_stopped_and_named() -> None:
    """A rule whose regular expression backtracks for ever is stopped by its bound, and the error
    names the rule, never hangs the session (issue 39)."""
    rules = parse_ini_lines(["{replace: 'x', with: y}", "{replace: '(a|aa)+$', with: z}"])
    with pytest.raises(MatchRuleError, match=r"^ini connic_match_rules, line 2\.replace: the regular expression "
                                             r"'\(a\|aa\)\+\$' ran past its bound of 2s"):
        normalise(req({"role": "user", "content": "a" * 60 + "!"}), rules)


def test_a_backtracking_rule_of_a_cassette_is_located_at_its_line() -> None:
    text = ("version: 1\nmatch:\n  - {replace: 'q', with: r}\n  - replace: '(a|aa)+$'\nruns:\n"
            "  - turns: [{content: hi}]\n")
    cassette = parse_cassette(text, "c.yaml")
    with pytest.raises(MatchRuleError, match=r"^c\.yaml:4:5: match\[1\]\.replace: the regular expression"):
        normalise(req({"role": "user", "content": "a" * 60 + "!"}), cassette.match)


@pytest.mark.parametrize(("data", "message"), [
    ({"replace": "["}, "rule.replace: invalid regular expression '[': unterminated character set"),
    ({"ignore": "message[0]"}, "rule.ignore: invalid path 'message[0]': a path starts with one of"),
    ({"ignore": "messages[0"}, "rule.ignore: invalid path 'messages[0' at character 9"),
    ({"replace": "x", "ignore": "system"}, "rule: a rule has 'replace' (a regular expression) or 'ignore'"),
    ({"replace": "x", "width": "y"}, "rule.width: unknown key 'width'"),
    ({"replace": 3}, "rule.replace: expected a string, found int 3"),
    ("uuid", "rule: expected a mapping"),
])
def test_a_rule_that_cannot_be_used_says_why(data: Any, message: str) -> None:
    with pytest.raises(MatchRuleError) as info:
        parse_rule(data)
    assert str(info.value).startswith(message)


def test_a_bad_rule_in_a_cassette_is_located() -> None:
    text = "version: 1\nmatch:\n  - replace: '(unclosed'\n    with: x\nruns:\n  - turns: [{content: hi}]\n"
    with pytest.raises(Exception, match=r"^c\.yaml:3:14: match\[0\]\.replace: invalid regular expression"):
        parse_cassette(text, "c.yaml")


def test_an_ini_line_that_is_not_yaml_names_its_line() -> None:
    with pytest.raises(MatchRuleError, match=r"^line 2 \('\{replace: \[0-9\]'\): not a YAML mapping"):
        parse_ini_lines(["ignore: system", "{replace: [0-9]"])
