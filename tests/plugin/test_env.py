"""``--connic-env NAME`` / ini ``connic_env``: ``.env.NAME`` for user code, masked in every report.
Under xdist (the workers load the env file; the controller, which writes the reports, never does):
the equivalence session, tests/plugin/test_xdist_reports.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers.equivalence import write_keeper
from helpers.project import ConnicProject

TOKEN = "s3cr3t-token-value"  # 18 characters
NAME = "staging-name-value"
ENV_FILE = f"""
# staging credentials
export API_TOKEN="{TOKEN}"
ENV_NAME={NAME}  # a comment
"""


@pytest.fixture
def keeper(project: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> ConnicProject:
    """An agent whose tool, builder, mock and model hook read ``.env.staging``'s values."""
    monkeypatch.delenv("API_TOKEN", raising=False)
    monkeypatch.setenv("ENV_NAME", "from-the-shell")
    write_keeper(project, ENV_FILE)
    return project


REPORTS = ("--connic-json", "report.json", "--junitxml", "junit.xml", "--connic-html", "report.html",
           "--connic-traces", "traces")


def report_texts(root: Path) -> dict[str, str]:
    texts = {name: (root / name).read_text("utf-8") for name in ("report.json", "junit.xml", "report.html")}
    texts.update({p.name: p.read_text("utf-8") for p in (root / "traces").iterdir()})
    return texts


def test_env_file_reaches_user_code_and_is_masked_everywhere(keeper: ConnicProject) -> None:
    result = keeper.run("--connic-env", "staging", *REPORTS)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*case 'builder and mock see env' (keeper) failed",
        "    0/1 runs passed*expected_result not satisfied: output == \"something else\"*",
        '        Input:   {"token":"***","name":"***"}',
        '*secret_of(name="API_TOKEN") → {"value":"***","length":18,"mocked":true} [[]mocked by *]*',
    ])
    texts = report_texts(keeper.root) | {"stdout": result.stdout.str() + result.stderr.str()}
    assert len(texts) == 3 + 3 + 1  # three reports, three trace files, the terminal
    for name, text in texts.items():
        assert TOKEN not in text and NAME not in text, name
    for name in ("report.json", "junit.xml", "report.html", "stdout",
                 "tests.keeper__builder_and_mock_see_env__run0.json", "tests.keeper__tool_sees_env__run0.json"):
        assert "***" in texts[name], name
    report = json.loads(texts["report.json"])
    assert report["environment_id"] == "staging"
    failed = next(c for c in report["cases"] if c["test_name"] == "builder and mock see env")
    reason = 'expected_result not satisfied: output == "something else" where output = "done"'
    assert failed["runs_detail"][0]["failures"] == [reason]
    # restored: what the shell had comes back, what it did not have goes away
    assert "API_TOKEN" not in os.environ
    assert os.environ["ENV_NAME"] == "from-the-shell"


def test_without_the_env_file_user_code_does_not_see_it(keeper: ConnicProject) -> None:
    result = keeper.run()
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(["*expected tool call secret_of*not satisfied*"])


def test_ini_connic_env(keeper: ConnicProject) -> None:
    keeper.pytester.makeini("[pytest]\nconnic_env = staging\n")
    result = keeper.run("--connic-json", "report.json")
    result.assert_outcomes(passed=2, failed=1)
    assert json.loads((keeper.root / "report.json").read_text("utf-8"))["environment_id"] == "staging"


def test_missing_env_file_fails_the_cases_clearly(keeper: ConnicProject) -> None:
    result = keeper.run("--connic-env", "prod", "--connic-json", "report.json")
    result.assert_outcomes(failed=3)
    assert result.ret == 1
    message = f"--connic-env prod: .env.prod not found in {keeper.root} (from --connic-env)"
    result.stdout.fnmatch_lines(["tests/keeper.yaml:2: case 'tool sees env' (keeper) could not be set up",
                                 f"    {message}"])
    report = json.loads((keeper.root / "report.json").read_text("utf-8"))
    assert [(c["status"], c["agent_run_ids"], c["setup_error"]) for c in report["cases"]] == [("error", [], message)] * 3


def test_env_name_must_stay_in_the_project(keeper: ConnicProject) -> None:
    result = keeper.run("--connic-env", "../elsewhere")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(["*--connic-env '../elsewhere': use a plain environment name such as 'staging'*"])


def test_bad_line_in_env_file(keeper: ConnicProject) -> None:
    keeper.write(".env.broken", "GOOD=1\nthis is not an assignment\n")
    result = keeper.run("--connic-env", "broken")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(["*.env.broken:2: expected KEY=VALUE, found 'this is not an assignment'*"])
