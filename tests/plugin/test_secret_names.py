"""Secrets in every encoding and in case names (issue 26): a value JSON-encoded inside JSON, a
token in a URL's user-info, and an env-file value in a case name are masked in every artifact
the plugin writes (the node id pytest prints is pytest's, docs/models.md "Secrets")."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from helpers.project import ConnicProject

SECRET = "s3cr3t-Vä\"lue\\xyz"  # from the env file: a quote and a backslash, so every encoding differs
TOKEN = "tok-9f3a7c1e55"  # only on the command line, in a URL's user-info
TOOL = '''
import json
import os


def leak(payload: dict) -> dict:
    """Return the secret JSON-encoded twice and three times."""
    value = os.environ["API_TOKEN"]
    twice = json.dumps({"i": json.dumps({"pw": value})})
    return {"twice": twice, "thrice": json.dumps({"o": twice}, ensure_ascii=True)}
'''
SUITE = """
agent: leaky
tests:
  - name: NAME
    payload: '{}'
    expected_result: output.twice == "never"
""".replace("NAME", json.dumps("logs in with " + SECRET))


def forms(value: str) -> set[str]:
    """``value`` as is and JSON-encoded one to three levels deep."""
    out, level = {value}, {value}
    for _ in range(3):
        level = {json.dumps(v, ensure_ascii=a)[1:-1] for v in level for a in (True, False)}
        out |= level
    return out


def test_secrets_in_nested_json_urls_and_case_names_are_masked(project: ConnicProject,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    project.tool("leak", TOOL)
    project.agent("leaky", type="tool", tool_name="leak.leak")
    project.suite("leaky", SUITE)
    project.write(".env.staging", "API_TOKEN=" + json.dumps(SECRET) + "\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")  # pytest-github-actions-annotate-failures annotates
    result = project.pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "--connic-env", "staging",
        "--connic-mcp-url", f"crm=https://user:{TOKEN}@127.0.0.1:9/mcp", "--connic-json", "r.json",
        "--connic-html", "r.html", "--connic-traces", "traces", "--junitxml", "j.xml",
        "--connic-history", "h.sqlite", timeout=120)
    assert result.ret == 1, result.stdout.str()
    root = project.root
    texts = {name: (root / name).read_text("utf-8") for name in ("r.json", "r.html", "j.xml")}
    texts |= {str(p): p.read_text("utf-8") for p in (root / "traces").iterdir()}
    with sqlite3.connect(root / "h.sqlite") as conn:
        texts["history"] = json.dumps(conn.execute("SELECT * FROM sessions").fetchall()
                                      + conn.execute("SELECT * FROM cases").fetchall())
    texts["annotations"] = "\n".join(line for line in result.stderr.lines if line.startswith("::error"))
    assert texts["annotations"] and "logs in with ***" in texts["annotations"]
    assert "logs in with ***" in texts["j.xml"] and "--connic-mcp-url" in texts["history"]
    leaks = [(name, form) for name, text in texts.items() for secret in (SECRET, TOKEN)
             for form in forms(secret) if form in text]
    assert leaks == []
    # the terminal: the output's encodings and the results table are masked; the node id in
    # pytest's own lines ("FAILED tests/leaky.yaml::logs in with ...") is pytest's
    terminal = "\n".join(line for line in result.stdout.lines if "tests/leaky.yaml::" not in line)
    assert "logs in with ***" in terminal
    assert [form for form in forms(SECRET) if form in terminal] == []
    assert Path(root / "r.json").exists()
