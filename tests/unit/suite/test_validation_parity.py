"""Parity with Connic's validator: the corpus under ``tests/corpus/`` is validated by the SDK's
``TestFile`` (as ``connic test`` does it) and by ``load_suite``; both must agree.

Folders and the verdicts they stand for:

- ``valid/``: Connic accepts (or skips an empty document); pytest-connic accepts (or skips).
- ``invalid/``: Connic rejects; pytest-connic rejects with ``file:line:column`` and the key path.
- ``unknown_keys/``: Connic accepts (it ignores unknown keys); pytest-connic rejects on purpose,
  naming the key and the closest known key.
- ``plugin_only/``: Connic accepts (it evaluates expressions on its side); pytest-connic compiles
  expressions at collection and rejects one that its expression language cannot evaluate.

Each corpus file starts with ``# rule:`` (what it checks) and, where a rejection is about a key,
``# path:`` (the key path the message must name; ``-`` for a file that is not YAML at all), or
``# unknown:`` / ``# closest:`` for the unknown-key corpus.

The shipped editor schema (``schema/suite.schema.json``) is checked against the same corpus.
"""

from __future__ import annotations

import functools
import json
import re
import string
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from connic import test_schema as connic_schema
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pytest_connic.suite.loader import SuiteError, load_suite

CORPUS = Path(__file__).resolve().parents[2] / "corpus"
FOLDERS = ("valid", "invalid", "unknown_keys", "plugin_only")
# the SDK's models, under names pytest does not try to collect
FileModel, CaseModel = connic_schema.TestFile, connic_schema.TestCase
DefaultsModel, ChildModel = connic_schema.TestDefaults, connic_schema.ChildAgentExpectation
LOCATED = re.compile(r"^tests/[^:]+:(\d+):(\d+): ")

#: invalid suites whose rule JSON Schema cannot express (the schema's description says so)
SCHEMA_CANNOT_EXPRESS = {"duplicate_names": "unique case names"}


def corpus(folder: str) -> list[Path]:
    return sorted((CORPUS / folder).glob("*.yaml"))


def params(folder: str) -> list[Any]:
    return [pytest.param(path, id=path.stem) for path in corpus(folder)]


def headers(path: Path) -> dict[str, str]:
    """The ``# key: value`` comment lines at the top of a corpus file."""
    out = {}
    for line in path.read_text("utf-8").splitlines():
        match = re.match(r"# (\w+): (.*)$", line)
        if not match:
            break
        out[match[1]] = match[2]
    return out


def sdk_verdict(path: Path) -> str:
    """What ``connic test`` does with the file (``cli._discover_test_suites``)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except yaml.YAMLError:
        return "reject"
    if doc is None:
        return "skip"
    try:
        FileModel(**doc)
    except Exception:  # noqa: BLE001 - the SDK turns any exception into a suite error too
        return "reject"
    return "accept"


def plugin_verdict(path: Path, tmp_path: Path) -> tuple[str, list[str]]:
    """``load_suite`` on the file placed in a fresh project as ``tests/<name>``."""
    project = tmp_path / "project"
    (project / "agents").mkdir(parents=True)
    (project / "tests").mkdir()
    target = project / "tests" / path.name
    target.write_bytes(path.read_bytes())
    try:
        suite = load_suite(target, project)
    except SuiteError as exc:
        return "reject", [str(exc)]
    if suite is None:
        return "skip", []
    errors = [case.error for case in suite.cases if case.error is not None]
    return ("reject" if errors else "accept"), errors


def assert_located(path: Path, messages: list[str]) -> None:
    """Every line of every message starts with ``tests/<file>:line:column: `` inside the file."""
    assert messages
    n_lines = len(path.read_text("utf-8").splitlines()) + 1
    for message in messages:
        for line in message.splitlines():
            if line.startswith("    "):  # an expression's echo and its caret, under its message
                continue
            match = LOCATED.match(line)
            assert match, f"not located: {line!r}"
            assert line.startswith(f"tests/{path.name}:")
            assert 1 <= int(match[1]) <= n_lines and int(match[2]) >= 1, line


def schema() -> dict[str, Any]:
    text = resources.files("pytest_connic").joinpath("schema/suite.schema.json").read_text("utf-8")
    result: dict[str, Any] = json.loads(text)
    return result


VALIDATOR = jsonschema.Draft202012Validator(schema())


def json_keys(data: Any) -> bool:
    """Whether every mapping key is a string, as in JSON."""
    if isinstance(data, dict):
        return all(isinstance(k, str) and json_keys(v) for k, v in data.items())
    if isinstance(data, list):
        return all(json_keys(v) for v in data)
    return True


def all_errors(errors: Any) -> list[jsonschema.ValidationError]:
    """Schema errors including those nested in anyOf/oneOf contexts."""
    out = []
    for error in errors:
        out.append(error)
        out += all_errors(error.context or [])
    return out


# --- the corpus itself


def test_corpus_covers_every_folder() -> None:
    counts = {folder: len(corpus(folder)) for folder in FOLDERS}
    assert sum(counts.values()) >= 60, counts
    assert all(counts.values()), counts
    for folder in FOLDERS:
        for path in corpus(folder):
            if path.stat().st_size:
                assert "rule" in headers(path), f"{path} has no '# rule:' line"


@pytest.mark.parametrize("folder", FOLDERS)
def test_connic_verdict_is_what_the_folder_says(folder: str) -> None:
    expected = {"valid": {"accept", "skip"}, "invalid": {"reject"}}.get(folder, {"accept"})
    verdicts = {path.name: sdk_verdict(path) for path in corpus(folder)}
    assert {name: v for name, v in verdicts.items() if v not in expected} == {}


# --- parity: the same verdict as Connic, located messages


@pytest.mark.parametrize("path", params("valid"))
def test_valid_suite_is_accepted_like_connic(path: Path, tmp_path: Path) -> None:
    verdict, errors = plugin_verdict(path, tmp_path)
    assert (verdict, errors) == (sdk_verdict(path), [])


@pytest.mark.parametrize("path", params("valid"))
def test_valid_suite_resolves_to_connic_records(path: Path, tmp_path: Path) -> None:
    """Each case's record (defaults merged, ``.py`` stripped, builder_args as given) is Connic's."""
    doc = yaml.safe_load(path.read_text("utf-8"))
    if doc is None:
        pytest.skip("empty document")
    parsed = FileModel(**doc)
    (tmp_path / "agents").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / path.name).write_bytes(path.read_bytes())
    suite = load_suite(tmp_path / "tests" / path.name, tmp_path)
    assert suite is not None
    assert [case.resolved for case in suite.cases] == [parsed.resolved(case) for case in parsed.tests]


@pytest.mark.parametrize("path", params("invalid"))
def test_invalid_suite_is_rejected_like_connic_with_location(path: Path, tmp_path: Path) -> None:
    assert sdk_verdict(path) == "reject"
    verdict, messages = plugin_verdict(path, tmp_path)
    assert verdict == "reject"
    assert_located(path, messages)
    key_path = headers(path)["path"]  # "-": the file is not YAML or not a mapping, no key to name
    if key_path != "-":
        assert any(f": {key_path}: " in m for m in messages), (key_path, messages)


@pytest.mark.parametrize("path", params("unknown_keys"))
def test_unknown_key_is_rejected_on_purpose(path: Path, tmp_path: Path) -> None:
    assert sdk_verdict(path) == "accept"  # Connic ignores the key silently
    verdict, messages = plugin_verdict(path, tmp_path)
    assert verdict == "reject"
    assert_located(path, messages)
    head = headers(path)
    name = head["unknown"].rsplit(".", 1)[-1]
    (message,) = messages
    assert f": {head['unknown']}: unknown key '{name}'" in message
    if head["closest"] == "-":
        assert "known keys: " in message
    else:
        assert f"did you mean '{head['closest']}'?" in message


@pytest.mark.parametrize("path", params("plugin_only"))
def test_expression_the_dsl_cannot_compile_is_rejected_at_collection(path: Path, tmp_path: Path) -> None:
    assert sdk_verdict(path) == "accept"  # Connic evaluates expressions server-side
    verdict, messages = plugin_verdict(path, tmp_path)
    assert verdict == "reject"
    assert_located(path, messages)
    assert any(f": {headers(path)['path']}: " in m for m in messages), messages


# YAML-only values have no JSON counterpart, so they are kept out of the corpus (whose valid
# files the JSON Schema must accept); the loader must still agree with Connic on them.
YAML_ONLY = {
    "binary_name": ("tests:\n  - name: !!binary YWJj\n    payload: x\n", "accept"),
    "set_lists": (
        "tests:\n  - name: a\n    payload: x\n    files: !!set {a.pdf, b.pdf}\n    expected_no_tool_calls: !!set {x}\n",
        "accept",
    ),
    "omap_builder_args": ("tests:\n  - name: a\n    builder: b\n    builder_args: !!omap [a: 1]\n", "reject"),
    "custom_tag_on_mapping": ("tests:\n  - !case {name: a, payload: x}\n", "reject"),
    "date_name": ("tests:\n  - name: 2024-01-31\n    payload: x\n", "reject"),
    "timestamp_payload": ("tests:\n  - name: a\n    payload: 2024-01-31T10:00:00Z\n", "reject"),
    "merge_of_list": ("base: &b [1]\ntests:\n  - <<: *b\n    name: a\n", "reject"),
}


@pytest.mark.parametrize(("text", "expected"), list(YAML_ONLY.values()), ids=list(YAML_ONLY))
def test_yaml_only_values_agree_with_connic(text: str, expected: str, tmp_path: Path) -> None:
    source = tmp_path / "source.yaml"
    source.write_text(text, "utf-8")
    assert sdk_verdict(source) == expected
    verdict, messages = plugin_verdict(source, tmp_path)
    assert verdict == expected, messages
    if expected == "reject":
        assert_located(source, messages)


# --- the editor schema


@pytest.mark.parametrize("path", params("valid") + params("plugin_only"))
def test_schema_accepts_what_connic_accepts(path: Path) -> None:
    data = yaml.safe_load(path.read_text("utf-8"))
    if data is None:
        pytest.skip("empty document: not a suite")
    assert [e.message for e in VALIDATOR.iter_errors(data)] == []


@pytest.mark.parametrize("path", params("invalid"))
def test_schema_rejects_what_connic_rejects(path: Path) -> None:
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except yaml.YAMLError:
        pytest.skip("not YAML: no data for the schema")
    if not json_keys(data):
        pytest.skip("a non-string mapping key is not JSON (jsonschema cannot match patterns on it)")
    errors = list(VALIDATOR.iter_errors(data))
    if path.stem in SCHEMA_CANNOT_EXPRESS:
        assert errors == []  # documented in the schema's description
    else:
        assert errors, "the schema accepts a suite that Connic rejects"


@pytest.mark.parametrize("path", params("unknown_keys"))
def test_schema_reports_the_unknown_key(path: Path) -> None:
    unknown = headers(path)["unknown"]
    data = yaml.safe_load(path.read_text("utf-8"))
    hits = [
        e
        for e in all_errors(VALIDATOR.iter_errors(data))
        if e.validator == "additionalProperties" and f"'{unknown.rsplit('.', 1)[-1]}'" in e.message
    ]
    assert hits, "the schema does not report the unknown key"
    parent = re.split(r"\.|\[(\d+)\]", unknown.rsplit(".", 1)[0]) if "." in unknown else []
    expected = [int(p) if p.isdigit() else p for p in parent if p]
    assert [list(e.absolute_path) for e in hits] == [expected]


@functools.cache
def _subvalidator(subschema: str) -> jsonschema.Draft202012Validator:
    return VALIDATOR.evolve(schema={"$defs": schema()["$defs"], "$ref": f"#/$defs/{subschema}"})


def _validates(subschema: str, value: Any) -> bool:
    return bool(_subvalidator(subschema).is_valid(value))


def _connic_accepts(model: Any, field: str, value: Any) -> bool:
    base = {"name": "x", "payload": ""} if model is CaseModel else {}
    try:
        model.model_validate({**base, field: value})
    except ValidationError:
        return False
    return True


INT_TEXT = st.one_of(
    st.from_regex(r"[ \t\n]?[+-]?[0-9_]{1,6}(\.[0-9_]{0,2})?[ \t\n]?", fullmatch=True),
    st.integers(-3, 4000).map(str),
    st.text(alphabet="0123456789_+-. \n", max_size=6),
)
FIELDS = [
    ("runs", DefaultsModel, "runs"),
    ("success_threshold", DefaultsModel, "success_threshold"),
    ("timeout_s", DefaultsModel, "timeout_s"),
    ("expected_triggered", ChildModel, "expected_triggered"),
]


@pytest.mark.parametrize(("subschema", "model", "field"), FIELDS, ids=[f[0] for f in FIELDS])
@settings(max_examples=200, deadline=None)
@given(value=st.one_of(INT_TEXT, st.integers(-2, 4000), st.floats(-2, 4000), st.booleans()))
def test_schema_integer_coercions_match_connic(subschema: str, model: Any, field: str, value: Any) -> None:
    assert _validates(subschema, value) == _connic_accepts(model, field, value)


BOOL_WORDS = ["0", "1", "true", "false", "yes", "no", "on", "off", "t", "f", "y", "n"]
BOOL_TEXT = st.one_of(
    st.tuples(st.sampled_from(BOOL_WORDS), st.lists(st.booleans(), min_size=5, max_size=5)).map(
        lambda wc: "".join(c.upper() if up else c for c, up in zip(wc[0], wc[1]))
    ),
    st.sampled_from(BOOL_WORDS).map(lambda w: f" {w}"),
    st.sampled_from(BOOL_WORDS).map(lambda w: f"{w}\n"),
    st.text(alphabet="01tTrRuUeEfFaAlLsSyYnNoO ", max_size=5),
)


@settings(max_examples=200, deadline=None)
@given(value=st.one_of(BOOL_TEXT, st.booleans(), st.integers(-1, 2), st.sampled_from([0.0, 1.0, 0.5]), st.none()))
def test_schema_boolean_coercions_match_connic(value: Any) -> None:
    assert _validates("lax_bool", value) == _connic_accepts(DefaultsModel, "strict_mocks", value)


@settings(max_examples=200, deadline=None)
@given(value=st.one_of(st.text(alphabet=string.ascii_letters[:4] + "._-/\\ ä?\n", max_size=8),
                       st.sampled_from(["README", "a.tar.gz", ".env", "..hidden.pdf", "a..b.pdf", "x.py"])))
def test_schema_safe_references_match_connic(value: str) -> None:
    accepted = _connic_accepts(CaseModel, "files", [value])
    assert _validates("safe_ref", value) == accepted
