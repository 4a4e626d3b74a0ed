"""The suite schema is stated once: the shipped JSON Schema's case keys are the SDK's ``TestCase``
fields, and the ``connic`` fixture's keyword parameters are checked against them here, so a new
suite key that the fixture does not take (or a default that differs from Connic's) fails."""

from __future__ import annotations

import inspect
import json
from importlib import resources
from typing import Any

from pytest_connic.plugin.fixture import ConnicRunner
from pytest_connic.project import sdk

#: the fixture's own parameters, not suite keys (docs/fixture.md)
FIXTURE_ONLY = {"model", "cassette", "project_root", "check"}
#: suite keys the fixture takes otherwise: the case's name is the test's, the payload is positional
NOT_KEYWORDS = {"name", "payload"}


def _case_keys() -> set[str]:
    text = resources.files("pytest_connic").joinpath("schema/suite.schema.json").read_text("utf-8")
    properties: dict[str, Any] = json.loads(text)["$defs"]["case"]["properties"]
    return set(properties)


def _keywords() -> dict[str, inspect.Parameter]:
    parameters = inspect.signature(ConnicRunner.run).parameters
    return {n: p for n, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}


def test_the_shipped_schema_names_the_sdk_case_fields() -> None:
    assert _case_keys() == set(sdk.TestCase.model_fields)


def test_the_fixture_takes_every_suite_key_and_nothing_else() -> None:
    keywords = _keywords()
    assert set(keywords) - FIXTURE_ONLY == _case_keys() - NOT_KEYWORDS
    assert "payload" in inspect.signature(ConnicRunner.run).parameters


def test_the_fixture_defaults_are_connics() -> None:
    keywords = _keywords()
    for name, field in sdk.TestDefaults.model_fields.items():
        assert keywords[name].default == field.default, name
    for name in _case_keys() - NOT_KEYWORDS - set(sdk.TestDefaults.model_fields):
        assert keywords[name].default is None, name  # an expectation or input the case leaves out
