"""Issue 16, output schemas as Connic validates them: its documented keyword subset
(``nullable`` honoured, other keywords warned and not enforced), and a schema that does not
load warned about, not skipped in silence (docs/fidelity.md)."""

from __future__ import annotations

import json

import pytest

from helpers.project import ConnicProject

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "email": {"type": "string", "format": "email"},
        "note": {"type": "string", "nullable": True},
        "code": {"type": "string", "maxLength": 3},
    },
    "required": ["email", "note"],
}


def test_connics_keyword_subset_decides_the_verdict(project: ConnicProject) -> None:
    project.write("schemas/contact.json", json.dumps(SCHEMA))
    project.agent("contact", output_schema="contact")
    project.suite("contact", '''
        tests:
          - name: nullable and an unchecked format pass
            payload: hi
            expected_result: output.note == None
          - name: a documented keyword is enforced
            payload: hi
            expected_result: status == "failed" and "at code" in error
    ''')
    project.replies("contact", "nullable and an unchecked format pass", '{"email": "not an email", "note": null}')
    project.replies("contact", "a documented keyword is enforced", '{"email": "a@b.io", "note": "x", "code": "long"}')

    result = project.run("-q", "-W", "always")

    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert out.count("uses keywords outside the subset Connic documents") == 1
    result.stdout.fnmatch_lines([
        ("*schemas/contact.json: output_schema 'contact' (agent 'contact', agents/contact.yaml) uses keywords "
        "outside the subset Connic documents, which Connic does not enforce and neither does pytest-connic: "
        "properties.email: format*"),
    ])


def test_a_schema_that_does_not_load_is_warned_about_and_the_output_is_not_validated(project: ConnicProject) -> None:
    project.agent("loose", output_schema="nowhere")
    project.suite("loose", '''
        tests:
          - name: runs unvalidated, as on Connic
            payload: hi
            expected_result: output == "plain text"
    ''')
    project.replies("loose", "runs unvalidated, as on Connic", "plain text")

    result = project.run("-q", "-W", "always")

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        ("*agents/loose.yaml: output_schema 'nowhere' of agent 'loose' could not be loaded "
        "(schemas/nowhere.json: the file does not exist); Connic's loader skips it, so the agent's output "
        "is not validated, here as on Connic*"),
    ])
