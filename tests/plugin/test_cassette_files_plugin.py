"""Cassette files in a session: names that used to share a file get their own, an old colliding
name is named with how to rename it, and cassettes that are not regular files (or too big) fail
their case with a located message while the other cases run."""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from typing import Any

import pytest

from helpers.fake_provider import FakeProvider, Reply, text
from helpers.project import ConnicProject

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

NAMES = ["a/b", "a:b", "a_b", "a?b", ".", "..", "Adds", "adds"]


def echo_model(body: dict[str, Any]) -> Reply:
    """Answers with the user's message (each case's payload is its own name)."""
    return text(json.dumps({"said": body["messages"][-1]["content"]}))


@pytest.fixture(scope="module")
def litellm_imported() -> None:
    pytest.importorskip("litellm", reason="the [live] extra (litellm) is not installed")
    from pytest_connic.models import LiteLLMModel, ModelRequest

    with FakeProvider(["ok"]) as fp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LiteLLM's lazy imports warn (pydantic), not ours
        live = LiteLLMModel(api_base=fp.base_url, api_key="unused")
        asyncio.run(live.complete(ModelRequest("warm-up", "openai/gpt-4o-mini", "", [{"role": "user", "content": "hi"}])))


def _suite(names: list[str]) -> str:
    cases = "".join(f"  - name: {json.dumps(n)}\n    payload: {json.dumps(n)}\n"
                    f"    expected_result: 'output.said == {json.dumps(n)}'\n" for n in names)
    return "tests:\n" + cases


def test_names_that_shared_a_file_record_and_replay_their_own(
    calc: ConnicProject, monkeypatch: pytest.MonkeyPatch, litellm_imported: None
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-the-fake-provider")
    calc.suite("calc", _suite(NAMES))
    with FakeProvider(echo_model) as fp:
        monkeypatch.setenv("OPENAI_API_BASE", fp.base_url)
        calc.run("--connic-record-mode", "once").assert_outcomes(passed=len(NAMES))
    files = sorted(p.name for p in (calc.root / "cassettes" / "calc").iterdir())
    assert files == sorted(["a%2Fb.yaml", "a%3Ab.yaml", "a_b.yaml", "a%3Fb.yaml", "%2E.yaml", "%2E%2E.yaml",
                            "%41dds.yaml", "adds.yaml"])
    assert len({f.casefold() for f in files}) == len(NAMES)
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:9/v1")  # replay needs no provider
    calc.run().assert_outcomes(passed=len(NAMES))


def test_a_cassette_under_its_old_colliding_name_is_not_read_and_says_how_to_rename_it(calc: ConnicProject) -> None:
    calc.suite("calc", _suite(["a/b", "other"]))
    calc.replies("calc", "a_b", '{"said": "a/b"}')  # where an older version kept case 'a/b'
    calc.replies("calc", "other", '{"said": "other"}')
    result = calc.run()
    result.assert_outcomes(passed=1, failed=1)
    old, new = calc.root / "cassettes" / "calc" / "a_b.yaml", calc.root / "cassettes" / "calc" / "a%2Fb.yaml"
    result.stdout.fnmatch_lines([
        (f"*{old}: this cassette has the file name older versions of pytest-connic gave this case*"
        f"(git mv {old} {new})*"),
    ])
    old.rename(new)
    calc.run().assert_outcomes(passed=2)


@pytest.mark.timeout(60)  # a hang guard: the FIFO is never opened
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "outside", "dangling", "oversize"])
def test_a_cassette_that_is_not_a_regular_file_in_the_project_fails_its_case(
    calc: ConnicProject, tmp_path_factory: pytest.TempPathFactory, kind: str
) -> None:
    calc.suite("calc", _suite(["bad", "good"]))
    calc.replies("calc", "good", '{"said": "good"}')
    path = calc.root / "cassettes" / "calc" / "bad.yaml"
    shown = path.relative_to(calc.root)  # messages name cassettes relative to the project
    outside = tmp_path_factory.mktemp("outside") / "c.yaml"
    outside.write_text("version: 1\nruns:\n  - turns:\n      - content: '{\"said\": \"bad\"}'\n")
    if kind == "fifo":
        os.mkfifo(path)
        expected = f"*{shown}: the cassette is a named pipe (FIFO); only a regular file is read*"
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
        expected = f"*{shown}: the cassette leads out of the project (to /dev/zero)*"
    elif kind == "outside":
        path.symlink_to(outside)
        expected = f"*{shown}: the cassette leads out of the project (to {outside.resolve()})*"
    elif kind == "dangling":
        path.symlink_to(calc.root / "gone.yaml")
        expected = f"*{shown}: the cassette is a dangling symbolic link (to {calc.root / 'gone.yaml'}, which does*"
    else:
        path.write_text("version: 1\nruns:\n  - turns:\n      - content: x\n" + "#" * 5000 + "\n")
        calc.pytester.makeini("[pytest]\nconnic_cassette_size_limit = 4096\n")
        expected = f"*{shown}: the cassette is 50?? bytes, more than the limit of 4096 bytes (ini connic_cassette_size_limit)*"
    result = calc.run("--connic-json", "report.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([expected])
    report = json.loads((calc.root / "report.json").read_text("utf-8"))
    assert sorted((c["test_name"], c["passed"]) for c in report["cases"]) == [("bad", False), ("good", True)]



def test_suites_whose_names_shared_a_folder_each_replay_their_own_cassette(calc: ConnicProject) -> None:
    """``tests/calc:v2.yaml``, ``calc_v2.yaml``, ``calc?v2.yaml``, and two names that differ only in
    case (macOS, Windows) once all read ``cassettes/calc_v2/``: each now has its own folder."""
    suites = {"calc:v2": "calc%3Av2", "calc_v2": "calc_v2", "calc?v2": "calc%3Fv2", "Calc_V2": "%43alc_%562"}
    for suite, folder in suites.items():
        calc.suite(suite, f"agent: calc\ntests:\n  - name: adds\n    payload: hi\n"
                          f"    expected_result: 'output.said == {json.dumps(suite)}'\n")
        calc.write(f"cassettes/{folder}/adds.yaml",
                   f"version: 1\nruns:\n  - turns:\n      - content: '{json.dumps({'said': suite})}'\n")
    result = calc.run()
    result.assert_outcomes(passed=len(suites))
    assert sorted(p.name for p in (calc.root / "cassettes").iterdir()) == sorted(suites.values())
