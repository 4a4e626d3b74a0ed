"""Matching rules: parsed with located errors, applied the same way when recording and replaying,
strict without rules, and divergence notes that show the rule that would ignore a difference."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from pytest_connic.models import ModelRequest
from pytest_connic.models.cassette import parse_cassette
from pytest_connic.models.digest import request_fingerprint
from pytest_connic.models.divergence import VOLATILE, explain
from pytest_connic.models.matching import MatchRuleError, normalise, parse_ini_lines, parse_rule

UUID_RE = VOLATILE[0][1]


def req(*messages: dict[str, Any], system: str = "You add.") -> ModelRequest:
    return ModelRequest("calc", "openai/gpt-4o-mini", system, list(messages))


def tool_result(value: dict[str, Any]) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "c1", "name": "make_id", "content": json.dumps(value)}


USER = {"role": "user", "content": "an id please"}


def test_without_rules_matching_is_strict() -> None:
    recorded = request_fingerprint(req(USER, tool_result({"id": str(uuid.uuid4())})))
    note = explain(recorded, req(USER, tool_result({"id": str(uuid.uuid4())})))
    assert note is not None and note.startswith("message 1 (tool) differs: its text holds a UUID (")


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


def test_the_note_of_a_timestamp_shows_a_rule_that_ignores_it() -> None:
    def said(at: str) -> ModelRequest:
        return req({"role": "user", "content": f"[{at}] what time is it?"})

    recorded = request_fingerprint(said("2026-12-01T10:00:00+00:00"))
    note = explain(recorded, said("2026-12-02T10:00:05+00:00"))
    assert note is not None
    assert "message 0 (user) differs: its text holds an ISO timestamp ('2026-12-02T10:00:05+00:00')" in note
    rule = note.split("add `match: [", 1)[1].split("]` to the cassette", 1)[0]
    parsed = parse_ini_lines([rule])  # the shown rule is valid as written, and it does ignore the value
    fixed = request_fingerprint(normalise(said("2026-12-01T10:00:00+00:00"), parsed))
    assert explain(fixed, said("2026-12-02T10:00:05+00:00"), parsed) is None


def test_a_difference_with_no_volatile_value_shows_the_ignore_rule() -> None:
    recorded = request_fingerprint(req(USER, tool_result({"sum": 3})))
    note = explain(recorded, req(USER, tool_result({"sum": 4})))
    assert note == ("message 1 (tool) differs: to leave its content out of the comparison, add "
                    "`match: [{ignore: 'messages[1].content'}]` to the cassette (docs/models.md, \"Matching rules\")")


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


def test_a_tool_result_that_is_now_an_error_is_named_as_the_cause_not_a_part_to_ignore() -> None:
    """A tool (or its mock) that raises now: the model reads the error, the request differs from
    the recording, and the note says so instead of offering to ignore the tool's result."""
    recorded = request_fingerprint(req(USER, tool_result({"id": "a"})))
    broken = {"role": "tool", "tool_call_id": "c1", "name": "make_id",
              "content": "Error: KeyError: 'chat' at tests/mocks/ids.py:11"}
    note = explain(recorded, req(USER, broken))
    assert note == ("message 1 (tool) differs: the call of make_id now ends in an error the model reads "
                    "(\"KeyError: 'chat' at tests/mocks/ids.py:11\"); the case's trace shows where it was raised "
                    "(--connic-json, or the case's report under -W error)")
    assert "ignore" not in note
