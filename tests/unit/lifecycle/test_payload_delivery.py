"""Payload delivery (spec §4.1), ``files:`` fixtures (§4.2) and tool agents, below pytest. What
a worker process delivers is checked in one process-isolated run of each kind of payload (the
payload crosses the process boundary); the rest run in this process."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from helpers.harness import CaseProject, conftest_hooks
from helpers.models import ECHO_REQUEST_MODEL
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord
from pytest_connic.reports.failure import failure_text
from pytest_connic.runtime.payload import (
    FilesError,
    deliver,
    load_fixtures,
    message_text,
    tool_agent_payload,
)
from pytest_connic.secrets import Masker


def only(outcome: CaseOutcome) -> RunRecord:
    (record,) = outcome.records
    return record


def outputs(outcomes: dict[str, CaseOutcome]) -> dict[str, object]:
    return {name: only(outcome).output for name, outcome in outcomes.items()}


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_tool_agents_get_the_payload_as_connic_delivers_it(calc_cases: CaseProject, isolation: str) -> None:
    calc_cases.suite("echo", """
        tests:
          - name: json object
            payload: '{"a": 1, "b": [2]}'
            expected_tool_calls:
              - echo: params.payload.a == 1
              - calc.echo
          - name: plain text
            payload: hello there
          - name: json list
            payload: '[1, 2]'
          - name: json number
            payload: '42'
    """)
    # no cassettes at all: tool agents need no model
    outcomes = calc_cases.cases("echo", isolation=isolation)
    assert all(o.verdict_passed for o in outcomes.values()), {n: o.failure_reason for n, o in outcomes.items()}
    assert outputs(outcomes) == {
        "json object": {"got": {"a": 1, "b": [2]}},
        "plain text": {"got": {"message": "hello there"}},
        "json list": {"got": {"input": [1, 2]}},
        "json number": {"got": {"input": 42}},
    }
    (call,) = only(outcomes["json object"]).tool_calls
    assert (call.name, call.ref, call.params) == ("echo", "calc.echo", {"payload": {"a": 1, "b": [2]}})


def test_a_tool_agent_body_may_take_the_run_context(case_project: CaseProject) -> None:
    case_project.tool("stamp", '''
        async def stamp(payload: dict, context) -> dict:
            """Return what the run knows."""
            return {"payload": payload, "run_id": context["run_id"], "seen": context["payload"]}
    ''')
    case_project.agent("stamp", type="tool", tool_name="stamp.stamp")
    case_project.suite("stamp", """
        tests:
          - name: stamped
            payload: '{"a": 1}'
            runs: 2
            expected_tool_calls:
              - stamp: invocations == 1
    """)
    outcome = case_project.case("stamp", "stamped")
    assert outcome.verdict_passed, outcome.failure_reason
    assert len(outcome.records) == 2
    for record in outcome.records:
        assert record.output == {"payload": {"a": 1}, "run_id": record.run_id, "seen": {"a": 1}}
        (call,) = record.tool_calls
        assert call.result == record.output


def test_llm_agents_read_the_payload_as_text(calc_cases: CaseProject) -> None:
    calc_cases.host = conftest_hooks(ECHO_REQUEST_MODEL)
    calc_cases.suite("calc", """
        tests:
          - name: text
            payload: add 4 and 6
          - name: json object
            payload: '{"a": 1}'
          - name: a files key that is not attachments stays
            payload: '{"files": ["a.txt"]}'
    """)
    users = {name: output["user"] for name, output in outputs(calc_cases.cases("calc")).items()}  # type: ignore[index]
    assert users == {"text": "add 4 and 6", "json object": '{"a": 1}',
                     "a files key that is not attachments stays": '{"files": ["a.txt"]}'}


@pytest.fixture
def with_files(calc_cases: CaseProject) -> CaseProject:
    calc_cases.write("tests/files/note.txt", "hello")
    (calc_cases.root / "tests/files/pic.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    calc_cases.write("tests/files/blob.weird", "??")
    return calc_cases


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_files_are_base64_with_a_mime_type_from_the_extension(with_files: CaseProject, isolation: str) -> None:
    with_files.suite("echo", """
        tests:
          - name: attached
            payload: '{"a": 1}'
            files: [note.txt, pic.png, blob.weird]
          - name: text payload
            payload: look
            files: [note.txt]
    """)
    note = {"data": base64.b64encode(b"hello").decode(), "mime_type": "text/plain", "name": "note.txt"}
    pic = {"data": base64.b64encode(b"\x89PNG\r\n\x1a\n").decode(), "mime_type": "image/png", "name": "pic.png"}
    blob = {"data": base64.b64encode(b"??").decode(), "mime_type": "application/octet-stream", "name": "blob.weird"}
    assert outputs(with_files.cases("echo", isolation=isolation)) == {
        "attached": {"got": {"a": 1, "files": [note, pic, blob]}},
        "text payload": {"got": {"message": "look", "files": [note]}},
    }


def test_llm_agents_get_files_as_binary_parts(with_files: CaseProject) -> None:
    with_files.host = conftest_hooks(ECHO_REQUEST_MODEL)
    with_files.suite("calc", "tests:\n  - name: parts\n    payload: describe\n    files: [pic.png, note.txt]\n")
    user = only(with_files.case("calc", "parts")).output["user"]  # type: ignore[index]
    assert user[0] == {"type": "text", "text": "describe"}
    assert (user[1]["type"], user[1]["mime_type"]) == ("file", "image/png")
    assert (user[2]["mime_type"], user[2]["data"]) == ("text/plain", "aGVsbG8=")
    assert len(user) == 3


def test_a_missing_fixture_fails_the_case_before_any_run(with_files: CaseProject) -> None:
    with_files.tool("marker", '''
        from pathlib import Path

        def touch(payload: dict) -> dict:
            """Leave a mark."""
            Path("ran.txt").write_text("ran")
            return {}
    ''')
    with_files.agent("marker", type="tool", tool_name="marker.touch")
    with_files.suite("marker", """
        tests:
          - name: missing
            payload: hi
            runs: 3
            files: [note.txt, nope.pdf]
          - name: hidden
            payload: hi
            files: [.env]
    """)
    with_files.write("tests/files/.env", "SECRET=1")
    outcomes = with_files.cases("marker")
    errors = {name: (o.status, o.setup_error, o.records) for name, o in outcomes.items()}
    assert errors == {
        "missing": ("error", "missing fixture: tests/files/nope.pdf does not exist", []),
        "hidden": ("error", ("missing fixture: tests/files/.env does not exist (hidden files are never uploaded "
                             "to Connic)"), []),
    }
    assert failure_text(outcomes["missing"], Masker()).split("\n") == [
        "tests/marker.yaml:2: case 'missing' (marker) could not be set up",
        "    missing fixture: tests/files/nope.pdf does not exist",
    ]
    assert failure_text(outcomes["hidden"], Masker()).split("\n")[0] == (
        "tests/marker.yaml:6: case 'hidden' (marker) could not be set up")
    assert not (with_files.root / "ran.txt").exists()


@pytest.mark.parametrize(
    ("payload", "files", "delivered", "text"),
    [
        ('{"a": 1}', [], {"a": 1}, '{"a": 1}'),
        ("hello", [], {"message": "hello"}, "hello"),
        ("[1, 2]", [], {"message": "[1, 2]"}, "[1, 2]"),
        ("", [], {"message": ""}, ""),
        ({"a": 1}, [], {"a": 1}, '{"a": 1}'),
        ("hi", [{"data": "eA==", "mime_type": "text/plain", "name": "x.txt"}],
         {"message": "hi", "files": [{"data": "eA==", "mime_type": "text/plain", "name": "x.txt"}]}, "hi"),
    ],
)
def test_delivery_table(payload: object, files: list[dict[str, str]], delivered: dict[str, object], text: str) -> None:
    assert deliver(payload, files) == delivered
    assert message_text(deliver(payload, files)) == text


@pytest.mark.parametrize(
    ("payload", "expected"),
    [('{"a": 1}', {"a": 1}), ("hello", {"message": "hello"}), ("[1]", {"input": [1]}), ("null", {"input": None})],
)
def test_tool_agent_payload_table(payload: str, expected: dict[str, object]) -> None:
    assert tool_agent_payload(deliver(payload, []), payload) == expected


def test_load_fixtures_guesses_mime_types_and_refuses_escapes(tmp_path: Path) -> None:
    root = tmp_path
    (root / "tests/files").mkdir(parents=True)
    (root / "tests/files/a.pdf").write_bytes(b"%PDF")
    (root / "tests/files/b.json").write_text("{}")
    (root / "secret.txt").write_text("x")
    loaded = load_fixtures(root, ["a.pdf", "b.json"])
    assert [(f["name"], f["mime_type"]) for f in loaded] == [("a.pdf", "application/pdf"), ("b.json", "application/json")]
    assert base64.b64decode(loaded[0]["data"]) == b"%PDF"
    with pytest.raises(FilesError, match="missing fixture: tests/files/../secret.txt"):
        load_fixtures(root, ["../secret.txt"])
