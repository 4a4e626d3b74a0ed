"""Payload delivery (spec §4.1), ``files:`` fixtures (§4.2), and tool agents."""

from __future__ import annotations

import base64

import pytest

from helpers.models import ECHO_REQUEST_MODEL
from helpers.project import ConnicProject
from pytest_connic.runtime.payload import (
    FilesError,
    deliver,
    load_fixtures,
    message_text,
    tool_agent_payload,
)


def test_tool_agents_get_the_payload_as_connic_delivers_it(calc: ConnicProject) -> None:
    calc.suite(
        "echo",
        """
        tests:
          - name: json object
            payload: '{"a": 1, "b": [2]}'
            expected_result: >-
              output.got == {"a": 1, "b": [2]}
            expected_tool_calls:
              - echo: params.payload.a == 1
              - calc.echo
          - name: plain text
            payload: hello there
            expected_result: >-
              output.got == {"message": "hello there"}
          - name: json list
            payload: '[1, 2]'
            expected_result: >-
              output.got == {"input": [1, 2]}
          - name: json number
            payload: '42'
            expected_result: >-
              output.got == {"input": 42}
        """,
    )
    # no cassettes at all: tool agents need no model
    result = calc.run("-q")
    result.assert_outcomes(passed=4)


def test_a_tool_agent_body_may_take_the_run_context(project: ConnicProject) -> None:
    project.tool(
        "stamp",
        '''
        async def stamp(payload: dict, context) -> dict:
            """Return what the run knows."""
            return {"payload": payload, "run_id": context["run_id"], "seen": context["payload"]}
        ''',
    )
    project.agent("stamp", type="tool", tool_name="stamp.stamp")
    project.suite(
        "stamp",
        """
        tests:
          - name: stamped
            payload: '{"a": 1}'
            runs: 2
            expected_result: >-
              output.payload == {"a": 1} and output.seen == {"a": 1} and output.run_id != null
            expected_tool_calls:
              - stamp: result.run_id != null and invocations == 1
        """,
    )
    result = project.run("-q")
    result.assert_outcomes(passed=1)


def test_llm_agents_read_the_payload_as_text(calc: ConnicProject) -> None:
    calc.write("conftest.py", ECHO_REQUEST_MODEL)
    calc.suite(
        "calc",
        """
        tests:
          - name: text
            payload: add 4 and 6
            expected_result: output.user == "add 4 and 6"
          - name: json object
            payload: '{"a": 1}'
            expected_result: >-
              output.user == '{"a": 1}'
          - name: a files key that is not attachments stays
            payload: '{"files": ["a.txt"]}'
            expected_result: >-
              output.user == '{"files": ["a.txt"]}'
        """,
    )
    result = calc.run("-q")
    result.assert_outcomes(passed=3)


@pytest.fixture
def with_files(calc: ConnicProject) -> ConnicProject:
    calc.write("tests/files/note.txt", "hello")
    (calc.root / "tests/files/pic.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    calc.write("tests/files/blob.weird", "??")
    return calc


def test_files_are_base64_with_a_mime_type_from_the_extension(with_files: ConnicProject) -> None:
    hello = base64.b64encode(b"hello").decode()
    with_files.suite(
        "echo",
        f"""
        tests:
          - name: attached
            payload: '{{"a": 1}}'
            files: [note.txt, pic.png, blob.weird]
            expected_result: >-
              output.got.a == 1
              and output.got.files[0] == {{"data": "{hello}", "mime_type": "text/plain", "name": "note.txt"}}
              and output.got.files[1].mime_type == "image/png"
              and output.got.files[2].mime_type == "application/octet-stream"
          - name: text payload
            payload: look
            files: [note.txt]
            expected_result: output.got.message == "look" and output.got.files[0].name == "note.txt"
        """,
    )
    result = with_files.run("-q")
    result.assert_outcomes(passed=2)


def test_llm_agents_get_files_as_binary_parts(with_files: ConnicProject) -> None:
    with_files.write("conftest.py", ECHO_REQUEST_MODEL)
    with_files.suite(
        "calc",
        """
        tests:
          - name: parts
            payload: describe
            files: [pic.png, note.txt]
            expected_result: >-
              output.user[0] == {"type": "text", "text": "describe"}
              and output.user[1].type == "file" and output.user[1].mime_type == "image/png"
              and output.user[2].mime_type == "text/plain" and output.user[2].data == "aGVsbG8="
        """,
    )
    result = with_files.run("-q")
    result.assert_outcomes(passed=1)


def test_a_missing_fixture_fails_the_case_before_any_run(with_files: ConnicProject) -> None:
    with_files.write(
        "tools/marker.py",
        '''
        from pathlib import Path

        def touch(payload: dict) -> dict:
            """Leave a mark."""
            Path("ran.txt").write_text("ran")
            return {}
        ''',
    )
    with_files.agent("marker", type="tool", tool_name="marker.touch")
    with_files.suite(
        "marker",
        """
        tests:
          - name: missing
            payload: hi
            runs: 3
            files: [note.txt, nope.pdf]
          - name: hidden
            payload: hi
            files: [.env]
        """,
    )
    with_files.write("tests/files/.env", "SECRET=1")
    result = with_files.run("-q")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "tests/marker.yaml:2: case 'missing' (marker) could not be set up",
            ("    missing fixture: "
            "tests/files/nope.pdf does not exist"),
            "tests/marker.yaml:6: case 'hidden' (marker) could not be set up",
            ("    missing fixture: "
            "tests/files/.env does not exist (hidden files are never uploaded to Connic)"),
        ]
    )
    assert not (with_files.root / "ran.txt").exists()
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


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


def test_load_fixtures_guesses_mime_types_and_refuses_escapes(tmp_path: object) -> None:
    from pathlib import Path

    root = Path(str(tmp_path))
    (root / "tests/files").mkdir(parents=True)
    (root / "tests/files/a.pdf").write_bytes(b"%PDF")
    (root / "tests/files/b.json").write_text("{}")
    (root / "secret.txt").write_text("x")
    loaded = load_fixtures(root, ["a.pdf", "b.json"])
    assert [(f["name"], f["mime_type"]) for f in loaded] == [("a.pdf", "application/pdf"), ("b.json", "application/json")]
    assert base64.b64decode(loaded[0]["data"]) == b"%PDF"
    with pytest.raises(FilesError, match="missing fixture: tests/files/../secret.txt"):
        load_fixtures(root, ["../secret.txt"])
