"""Issue 16, output schemas as Connic validates them, below pytest: its documented keyword subset
(``nullable`` honoured, other keywords warned and not enforced), and a schema that does not load
warned about (a load warning of the project), not skipped in silence (docs/fidelity.md)."""

from __future__ import annotations

import json

from helpers.harness import CaseProject
from pytest_connic.project.index import index_project

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


def test_connics_keyword_subset_decides_the_verdict(case_project: CaseProject) -> None:
    case_project.write("schemas/contact.json", json.dumps(SCHEMA))
    case_project.agent("contact", output_schema="contact")
    case_project.suite("contact", '''
        tests:
          - name: nullable and an unchecked format pass
            payload: hi
          - name: a documented keyword is enforced
            payload: hi
    ''')
    case_project.replies("contact", "nullable and an unchecked format pass", '{"email": "not an email", "note": null}')
    case_project.replies("contact", "a documented keyword is enforced", '{"email": "a@b.io", "note": "x", "code": "long"}')

    outcomes = case_project.cases("contact")

    (unchecked,) = outcomes["nullable and an unchecked format pass"].records
    assert (unchecked.status, unchecked.output) == ("completed", {"email": "not an email", "note": None})
    (enforced,) = outcomes["a documented keyword is enforced"].records
    assert enforced.status == "failed" and enforced.error is not None and "at code" in enforced.error
    # once per runtime (a session), however many runs meet the schema
    assert [w for w in case_project.warnings if "output_schema" in w] == [
        ("schemas/contact.json: output_schema 'contact' (agent 'contact', agents/contact.yaml) uses keywords "
         "outside the subset Connic documents, which Connic does not enforce and neither does pytest-connic: "
         "properties.email: format"),
    ]


def test_a_schema_that_does_not_load_is_warned_about_and_the_output_is_not_validated(case_project: CaseProject) -> None:
    case_project.agent("loose", output_schema="nowhere")
    case_project.suite("loose", '''
        tests:
          - name: runs unvalidated, as on Connic
            payload: hi
    ''')
    case_project.replies("loose", "runs unvalidated, as on Connic", "plain text")

    (record,) = case_project.case("loose", "runs unvalidated, as on Connic").records

    assert (record.status, record.output) == ("completed", "plain text")
    (warning,) = [w for w in index_project(case_project.root).warnings if w.key == "output_schema:loose"]
    assert warning.message == (
        "agents/loose.yaml: output_schema 'nowhere' of agent 'loose' could not be loaded "
        "(schemas/nowhere.json: the file does not exist); Connic's loader skips it, so the agent's output "
        "is not validated, here as on Connic")
    assert (warning.path, warning.line) == (case_project.root / "agents/loose.yaml", 6)
