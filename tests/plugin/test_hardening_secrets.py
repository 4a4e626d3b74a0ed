"""Scan everything: the values of a ``--connic-env`` file and a provider key, echoed by a tool into
its output, its error, a tool parameter and the run context, appear in no file the session writes
(JSON, HTML, JUnit, traces, recorded cassettes) and not in its terminal output, with ``-n 2``."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.project import ConnicProject

pytestmark = pytest.mark.timeout(240)

TOKEN = "s3cr3t-env-token-4f9a1c"
PLAIN = "plain-env-value-7b2e"  # not secret-looking by name: masked because it is in the env file
PROVIDER_KEY = "sk-provider-key-0d8e5b3a"
SECRETS = (TOKEN, PLAIN, PROVIDER_KEY)

TOOLS = '''
import os


def leak(value: str, context) -> dict:
    """Echo the secrets everywhere it can.

    Args:
        value: whatever the model passed
    """
    token = os.environ["API_TOKEN"]
    context["token"] = token
    context["nested"] = {"plain": os.environ["PLAIN_NAME"], "key": os.environ["OPENAI_API_KEY"]}
    return {"echo": token, "param": value, "plain": os.environ["PLAIN_NAME"], "key": os.environ["OPENAI_API_KEY"]}


def fail(value: str) -> dict:
    """Raise with the secret in the message.

    Args:
        value: whatever the model passed
    """
    raise ValueError(f"bad token {os.environ['API_TOKEN']} / {value}")
'''

#: while recording, the "provider" asks for the tools with the secret as a parameter and answers
#: with the secrets in its final output
CONFTEST = '''
import os

import pytest_connic.models.live as live
from pytest_connic import ModelResponse, ToolCallRequest


class Provider:
    def __init__(self, **_):
        pass

    async def complete(self, request):
        token, tools = os.environ["API_TOKEN"], [m for m in request.messages if m["role"] == "tool"]
        if not tools:
            return ModelResponse(tool_calls=[ToolCallRequest("1", "leak", {"value": token}),
                                             ToolCallRequest("2", "fail", {"value": os.environ["PLAIN_NAME"]})],
                                 input_tokens=3, output_tokens=2)
        return ModelResponse(content=f"done {token} {os.environ['OPENAI_API_KEY']} {tools[0]['content']}")


live.LiteLLMModel = Provider
'''

SUITE = """
tests:
  - name: leaks and fails
    payload: hello
    runs: 2
    expected_result: output == "anything else"
    expected_tool_calls:
      - leak: params.value == "not the token"
  - name: leaks and passes
    payload: hello
    expected_tool_calls: [leak]
"""


def written_texts(root: Path, before: set[Path]) -> dict[str, str]:
    """Every file the session wrote or changed (as text, bytes decoded leniently)."""
    return {p.relative_to(root).as_posix(): p.read_bytes().decode("utf-8", "replace")
            for p in root.rglob("*") if p.is_file() and p not in before}


def test_no_secret_reaches_any_file_or_the_terminal(project: ConnicProject, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xdist")
    monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
    project.tool("leaky", TOOLS)
    project.agent("leaky", tools=["leaky.leak", "leaky.fail"])
    project.suite("leaky", SUITE)
    project.write("conftest.py", CONFTEST)
    project.write(".env.staging", f'API_TOKEN="{TOKEN}"\nPLAIN_NAME={PLAIN}\n')
    sources = {p for p in project.root.rglob("*") if p.is_file()}
    reports = ("--connic-json", "out/report.json", "--connic-html", "out/report.html", "--junitxml",
               "out/junit.xml", "--connic-traces", "out/traces", "--connic-env", "staging", "-n", "2", "-v")

    for mode in ("once", "none"):  # record the cassettes, then replay them
        result = project.pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:timeout",
                                                       "--connic-record-mode", mode, *reports, timeout=120)
        result.assert_outcomes(passed=1, failed=1)
        texts = written_texts(project.root, sources)
        texts["<terminal>"] = result.stdout.str() + result.stderr.str()
        assert {"out/report.json", "out/report.html", "out/junit.xml", "cassettes/leaky/leaks and fails.yaml",
                "cassettes/leaky/leaks and passes.yaml"} <= set(texts)
        assert len([t for t in texts if t.startswith("out/traces/")]) == 3
        for name, text in texts.items():
            for secret in SECRETS:
                assert secret not in text, f"{secret} in {name} ({mode})"
        # the values were there to leak: masked, not absent
        for name in ("out/report.json", "out/junit.xml", "<terminal>", "cassettes/leaky/leaks and fails.yaml"):
            assert "***" in texts[name], name
        assert "bad token ***" in texts["<terminal>"]  # the tool's error, in the failure report
        assert "bad token *** / ***" in texts["out/report.json"]
        assert '"token":"***"' in texts["out/report.json"].replace(" ", "")
