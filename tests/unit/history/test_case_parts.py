"""The parts of a case's configuration (plugin/digests.py) and what changed between two rows."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from pytest_connic.history.compare import changed_parts
from pytest_connic.plugin.digests import SETTINGS_PART, CaseParts, combined

FILES = {
    "agents/_defaults.yaml": "temperature: 0\n",
    "agents/desk.yaml": "name: desk\ntools: [billing.refund, lookup.*]\noutput_schema: answer\n"
                        "guardrails: {input: [{type: custom, name: polite}]}\n",
    "agents/pipeline.yaml": "name: pipeline\ntype: sequential\nagents: [desk]\n",
    "agents/summarizer.yaml": "name: summarizer\n",
    "agents/unrelated.yaml": "name: unrelated\ntools: [other.x]\n",
    "tools/billing.py": "def refund():\n    return trigger_agent('summarizer')\n",
    "tools/lookup.py": "def find(): ...\n",
    "tools/other.py": "def x(): ...\n",
    "middleware/desk.py": "async def before(content, context): return content\n",
    "hooks/desk.py": "",
    "guardrails/polite.py": "",
    "schemas/answer.json": "{}",
    "tests/desk.yaml": "agent: pipeline\ndefaults: {mocks: shared}\ntests:\n  - name: refunds\n    builder: refund\n"
                       "  - name: other\n",
    "tests/builders/refund.py": "",
    "tests/mocks/shared.py": "",
    "conftest.py": "",
}


def project(tmp_path: Path) -> Path:
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, "utf-8")
    return tmp_path


def settings(**changes: object) -> SimpleNamespace:
    base: dict[str, object] = {"record_mode": "none", "live": False, "cassette_dir": "cassettes", "model_alias": ()}
    return SimpleNamespace(**{**base, **changes})


def test_a_case_depends_on_its_suite_agents_reached_and_their_code(tmp_path: Path) -> None:
    root = project(tmp_path)
    parts = CaseParts(settings()).parts(root, "tests/desk.yaml", "refunds", "pipeline")
    assert sorted(parts) == sorted([
        "agents/_defaults.yaml", "agents/pipeline.yaml", "agents/desk.yaml",  # a stage of the pipeline
        "agents/summarizer.yaml",  # named by a tool of desk (trigger_agent)
        "tools/billing.py", "tools/lookup.py", "middleware/desk.py", "hooks/desk.py", "guardrails/polite.py",
        "schemas/answer.json", "tests/desk.yaml", "tests/builders/refund.py", "tests/mocks/shared.py",
        "conftest.py", SETTINGS_PART,
    ])
    # the other case of the suite names no builder; the defaults' mocks count for it too
    other = CaseParts(settings()).parts(root, "tests/desk.yaml", "other", "pipeline")
    assert "tests/builders/refund.py" not in other and "tests/mocks/shared.py" in other


def test_an_edit_or_a_setting_is_named_as_the_part_that_changed(tmp_path: Path) -> None:
    root = project(tmp_path)
    before = CaseParts(settings()).parts(root, "tests/desk.yaml", "refunds", "pipeline")
    (root / "tools/lookup.py").write_text("def find(): return 1\n", "utf-8")
    (root / "tools/other.py").write_text("changed, but desk never reaches it\n", "utf-8")
    after = CaseParts(settings(record_mode="all")).parts(root, "tests/desk.yaml", "refunds", "pipeline")
    assert combined(after) != combined(before)
    assert changed_parts(json.dumps(after), json.dumps(before)) == [SETTINGS_PART, "tools/lookup.py"]
    assert changed_parts(json.dumps(after), None) == []  # a row of an older version: nothing to name


def test_each_file_is_read_once_per_session(tmp_path: Path) -> None:
    root = project(tmp_path)
    parts = CaseParts(settings())
    first = parts.parts(root, "tests/desk.yaml", "refunds", "pipeline")
    (root / "tools/lookup.py").write_text("edited while the session runs\n", "utf-8")
    assert parts.parts(root, "tests/desk.yaml", "other", "pipeline")["tools/lookup.py"] == first["tools/lookup.py"]
