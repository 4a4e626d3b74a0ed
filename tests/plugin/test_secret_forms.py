"""Planted secrets, in every form, never reach an artifact: the terminal, --connic-json,
--connic-html, --junitxml (junit_logging=all), --connic-traces, recorded cassettes, the history,
a comparison (--connic-compare, ``python -m pytest_connic compare``) and the Markdown summary.
The forms include the encoded ones: percent-encoded in a query string (``%20`` and ``+``) and in
base64, standard and URL-safe, of a longer text (``Authorization: Basic base64(user:secret)``);
tests/unit/test_secrets.py checks their masking exactly, at every alignment."""

from __future__ import annotations

import asyncio
import json
import sys
import urllib.parse
import warnings
from pathlib import Path
from typing import Any

import pytest

from helpers.fake_provider import FakeProvider, Reply, text, tool_call, unused_port
from helpers.leaks import LEAK_TOOL, PLAIN_LEAK_TEST, encoded, forms
from helpers.project import ConnicProject

pytest.importorskip("litellm", reason="the [live] extra (litellm) is not installed")

#: from the --connic-env file: non-ASCII (its ensure_ascii JSON is \u-escaped)
TOKEN = "tök€n-Ünïcødé-9f3a"
#: from os.environ: multi-line (each line is masked on its own too)
PEM = ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"
       "BKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n-----END PRIVATE KEY-----")
#: from os.environ: quotes and a backslash (its JSON and repr forms differ from it)
PASSWORD = "q\"u'o\\te-pass-77"
SECRETS = (TOKEN, PEM, PASSWORD)

TOOL = LEAK_TOOL
PLAIN_TEST = PLAIN_LEAK_TEST
BROKEN_MODULE = '''
import os

raise ImportError("broken at import: " + repr(os.environ["DB_PASSWORD"]) + " " + os.environ["PRIVATE_KEY"])
'''
SUITE = """
tests:
  - name: leaks everywhere
    payload: "leak it"
    expected_result: output == "never"
"""


def model(body: dict[str, Any]) -> Reply:
    """Asks for ``leak``, then answers with the secrets in their quoted forms."""
    if body["messages"][-1]["role"] == "tool":
        return text(f"answer {TOKEN} {json.dumps(PASSWORD)} {TOKEN!a} {PEM} {PASSWORD!r} "
                    f"{urllib.parse.quote_plus(PASSWORD)} {encoded(TOKEN)[2]}")
    return tool_call("leak", {"x": 1})


@pytest.fixture(scope="session", autouse=True)
def litellm_imported() -> None:
    """LiteLLM imported (and one call made) before any in-process run (see test_record_modes)."""
    from pytest_connic.models import LiteLLMModel, ModelRequest

    with FakeProvider(["ok"]) as fp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LiteLLM's lazy imports warn (pydantic), not ours
        live = LiteLLMModel(api_base=fp.base_url, api_key="unused")
        asyncio.run(live.complete(ModelRequest("warm-up", "openai/gpt-4o-mini", "", [{"role": "user", "content": "hi"}])))


@pytest.fixture
def leaky(project: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> ConnicProject:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-the-fake-provider")
    monkeypatch.setenv("OPENAI_API_BASE", f"http://127.0.0.1:{unused_port()}/v1")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("API_TOKEN", raising=False)
    monkeypatch.setenv("PRIVATE_KEY", PEM)
    monkeypatch.setenv("DB_PASSWORD", PASSWORD)
    project.tool("leaky", TOOL)
    project.agent("leaky", tools=["leaky.leak"], retry_options={"attempts": 1})
    project.suite("leaky", SUITE)
    project.write("tests/test_zz_plain.py", PLAIN_TEST)
    project.write("tests/test_zz_broken.py", BROKEN_MODULE)
    project.write(".env.staging", f'API_TOKEN="{TOKEN}"\n')
    return project


ARTIFACTS = ("--connic-json", "report.json", "--connic-html", "report.html", "--connic-traces", "traces",
             "--connic-history", "history.sqlite",
             "--junitxml", "junit.xml", "-o", "junit_logging=all", "-rA", "-l", "--tb=long",
             "--continue-on-collection-errors")


def artifacts(root: Path, result: pytest.RunResult) -> dict[str, str]:
    texts = {"terminal": result.stdout.str() + "\n" + result.stderr.str()}
    for name in ("report.json", "report.html", "junit.xml", "history.sqlite", "summary.md", "step-summary.md",
                 "comparison.json", "comparison.md"):
        if (root / name).exists():
            texts[name] = (root / name).read_bytes().decode("utf-8", "replace")  # the history is SQLite
    for folder in ("traces", "cassettes"):
        for path in sorted((root / folder).rglob("*")):
            if path.is_file():
                texts[str(path.relative_to(root))] = path.read_text("utf-8")
    return texts


@pytest.mark.parametrize("xdist", [False, True], ids=["in-process", "xdist"])
def test_no_secret_in_any_form_reaches_any_artifact(
    leaky: ConnicProject, monkeypatch: pytest.MonkeyPatch, xdist: bool
) -> None:
    # one xdist worker: every value crosses the worker-to-controller transport, and the worker
    # imports LiteLLM (seconds) once instead of twice. The equivalence session
    # (tests/plugin/test_xdist_reports.py) masks the env file's and the environment's secrets under
    # -n 2 too; what only this session has under xdist: a module that leaks at import (a collection
    # error), locals (-l), a live recording and its replay with a comparison and a step summary
    run = (lambda *a: leaky.run("-n", "1", *a)) if xdist else leaky.run
    with FakeProvider(model) as fp:
        monkeypatch.setenv("OPENAI_API_BASE", fp.base_url)
        result = run("--connic-env", "staging", "--connic-record-mode", "once", *ARTIFACTS)
    outcomes = result.parseoutcomes()
    assert (outcomes["failed"], outcomes["errors"]) == (2, 1), result.stdout.str()
    texts = artifacts(leaky.root, result)
    assert any(name.startswith("cassettes") for name in texts) and any(name.startswith("traces") for name in texts)
    # the sections were there, masked
    terminal = texts["terminal"]
    for marker in ("Captured stdout call", "Captured stderr call", "Captured log call", "warnings summary",
                   "plain raise", "plain warn", "warn ***", "answer ***", "broken at import: '***' ***"):
        assert marker in terminal, marker
    junit = texts["junit.xml"]
    for marker in ("plain stdout ***", "plain log", "stdout ***", "plain raise", "broken at import"):
        assert marker in junit, marker
    for name in ("terminal", "junit.xml", "report.json", "report.html"):  # the encoded forms, masked there
        assert "cb?token=***" in texts[name] and "Basic YWxpY2U6***" in texts[name], name
    leaks = [(name, form) for name, body in texts.items() for secret in SECRETS for form in forms(secret)
             if form in body]
    assert leaks == []
    # replayed from the cassette (no provider), compared with the recording as if it had answered
    # otherwise (its output diff holds the masked answer), a Markdown summary for GitHub: still nothing
    recorded = json.loads((leaky.root / "report.json").read_text("utf-8"))
    for case in recorded["cases"]:
        for detail in case.get("runs_detail") or []:
            detail["output"] = "an older answer"
    (leaky.root / "recorded.json").write_text(json.dumps(recorded), "utf-8")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(leaky.root / "step-summary.md"))
    replay = run("--connic-env", "staging", *ARTIFACTS, "--connic-compare", "recorded.json",
                 "--connic-summary", "summary.md")
    assert replay.parseoutcomes()["failed"] == 2, replay.stdout.str()
    cli = leaky.pytester.run(sys.executable, "-m", "pytest_connic", "compare", "last", "-2", "--history",
                             "history.sqlite", "--json", "comparison.json", "--summary", "comparison.md")
    assert cli.ret == 0, cli.stderr.str()
    texts = artifacts(leaky.root, replay)
    texts["compare"] = cli.stdout.str()
    assert "answer ***" in texts["terminal"] and "answer ***" in texts["history.sqlite"]  # the output diff, masked
    for name in ("summary.md", "step-summary.md"):  # Markdown escapes the mask: \*\*\*
        assert "- output: " in texts[name] and "\\*\\*\\*" in texts[name], name
    assert json.loads(texts["report.json"])["comparison"]["changed"]
    assert [(n, f) for n, body in texts.items() for s in SECRETS for f in forms(s) if f in body] == []
