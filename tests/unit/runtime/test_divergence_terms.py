"""A replay that diverged, in the user's terms (``runtime/divergence.py``): recorded against a
scripted provider, then one thing changed, the case's failure says what changed (a tool's new
error cut to one short line, the prompt its middleware fills, the payload after the middleware)
and the command that re-records this case alone. The example project's broken tool and a failing
child are tests/unit/execution/test_replay_trust.py's."""

from __future__ import annotations

import shlex
from pathlib import Path

from helpers.harness import (
    Scripted,
    answer,
    first_failure,
    llm_agent,
    project_runtime,
    run_case,
    write_project,
)
from pytest_connic.runtime import divergence

CASE = "it's the desk"
DESK = {
    "agents/helper.yaml": llm_agent("helper", "Answer in a {tone} tone.", ["desk.lookup"]),
    "tools/desk.py": '''
        def lookup(key: str) -> dict:
            """Look a key up."""
            return {"key": key, "value": 1}
    ''',
    "middleware/helper.py": '''
        TONE = "calm"
        PREFIX = "[desk] "


        def before(content, context):
            context["tone"] = TONE
            return {**content, "parts": [{"text": PREFIX}] + list(content.get("parts") or [])}
    ''',
    "tests/helper.yaml": f"""
        tests:
          - name: "{CASE}"
            payload: find a
            expected_result: status == "completed"
    """,
}
SCRIPT = {"helper": [answer(None, ("lookup", {"key": "a"})), answer("found")]}
RERECORD = f"pytest {shlex.quote(f'tests/helper.yaml::{CASE}')} --connic-record-mode=all"


def recorded_then(tmp_path: Path, path: str, old: str, new: str) -> str:
    """The first failure of the case replayed after ``old`` became ``new`` in ``path``."""
    root = write_project(tmp_path, DESK)
    with project_runtime(root, mode="once", live=Scripted(SCRIPT)) as runtime:
        assert run_case(runtime, "helper", CASE).verdict_passed
    changed = root / path
    text = changed.read_text("utf-8")
    assert text.count(old) == 1
    changed.write_text(text.replace(old, new), "utf-8")
    with project_runtime(root) as runtime:
        outcome = run_case(runtime, "helper", CASE)
    assert not outcome.verdict_passed
    return first_failure(outcome)


def test_a_tool_that_now_raises_is_named_with_its_error_cut_to_one_short_line(tmp_path: Path) -> None:
    long = "x" * (divergence._ERROR * 2)
    reason = recorded_then(tmp_path, "tools/desk.py", 'return {"key": key, "value": 1}',
                           f'raise LookupError("{long}\\nsecond line")')
    quoted = f"LookupError: {long}"[: divergence._ERROR - 1] + "…"
    assert reason.startswith(f"replay diverged: lookup now raises {quoted} at tools/desk.py:"), reason
    assert "second line" not in reason
    assert reason.endswith(f"If the change is intended, re-record this case: {RERECORD}"), reason


def test_a_prompt_filled_from_the_context_names_the_middleware_that_sets_it(tmp_path: Path) -> None:
    reason = recorded_then(tmp_path, "middleware/helper.py", 'TONE = "calm"', 'TONE = "curt"')
    assert reason.startswith("replay diverged: the system prompt of agent 'helper' changed (it is filled from the "
                             "run's context, which middleware sets): recorded → now: "), reason
    assert "[-calm-]{+curt+}" in reason
    assert reason.endswith(f". Re-record this case: {RERECORD}"), reason  # no code "now" does otherwise


def test_a_payload_changed_by_the_before_middleware_says_so(tmp_path: Path) -> None:
    reason = recorded_then(tmp_path, "middleware/helper.py", 'PREFIX = "[desk] "', 'PREFIX = "[front desk] "')
    assert reason.startswith("replay diverged: the payload agent 'helper' receives changed (after the before "
                             "middleware of agent 'helper')"), reason
