"""Replay you can trust (issue 38), one case at a time below pytest: a change of the code under test
never passes on a stale recording, and the failure says what changed in the user's terms."""

from __future__ import annotations

import datetime as dt
import shutil
import time
from pathlib import Path

import pytest
import yaml

from helpers.harness import (
    Scripted,
    answer,
    first_failure,
    llm_agent,
    project_runtime,
    run_case,
    write_project,
)
from pytest_connic.records.events import DivergenceNoteEvent

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "order-desk"
BROKEN_LOOKUP = '''    return _with_shipping(dict(order))


def _with_shipping(order):
    order["shipping_cost"] = order["shipping"]["cost"]
    return order
'''


@pytest.fixture(scope="module")
def broken_desk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/order-desk with ``lookup_order`` calling a helper that raises ``KeyError``."""
    root = tmp_path_factory.mktemp("desk") / "order-desk"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".pytest_cache", "__pycache__"))
    tools = root / "tools" / "orders.py"
    source = tools.read_text("utf-8")
    assert source.count("    return dict(order)\n") == 1
    tools.write_text(source.replace("    return dict(order)\n", BROKEN_LOOKUP), "utf-8")
    return root


CALLS_LOOKUP = ["reports the status of a shipped order", "refunds a damaged item",
                "escalates a refund above the auto-refund limit", "finds the order of a returning customer"]


@pytest.mark.parametrize("case", CALLS_LOOKUP)
def test_a_broken_tool_fails_every_case_whose_recording_calls_it(broken_desk: Path, case: str) -> None:
    with project_runtime(broken_desk) as runtime:
        outcome = run_case(runtime, "order-assistant", case)
    assert not outcome.verdict_passed
    reason = first_failure(outcome)
    line = (Path("tools") / "orders.py").as_posix()
    assert reason.startswith(f"replay diverged: lookup_order now raises KeyError: 'shipping' at {line}:")
    assert f"re-record this case: pytest 'tests/order-assistant.yaml::{case}' --connic-record-mode=all" in reason


def test_the_cases_that_never_call_the_broken_tool_still_pass(broken_desk: Path) -> None:
    with project_runtime(broken_desk) as runtime:
        assert run_case(runtime, "order-assistant", "rejects an empty message").verdict_passed
        assert run_case(runtime, "product-search", "asks which product the customer means").verdict_passed


def test_lenient_replay_keeps_the_verdict_and_notes_the_difference(broken_desk: Path) -> None:
    """``connic_replay = lenient``: the documented opt-out (a note, the case's own verdict)."""
    with project_runtime(broken_desk, replay="lenient") as runtime:
        outcome = run_case(runtime, "order-assistant", "refunds a damaged item")
    assert outcome.verdict_passed
    notes = [e.text for r in outcome.records for e in r.events if isinstance(e, DivergenceNoteEvent)]
    assert len(notes) == 1 and "message 2 (tool) differs" in notes[0]


# -- recorded against a scripted provider, then changed ---------------------------------------

NOTIFIER = {
    "agents/analyzer.yaml": llm_agent("analyzer", "You alert the right team.", ["trigger_agent"]),
    "agents/dispatcher.yaml": """
        version: "1.0"
        name: dispatcher
        type: tool
        description: sends the alert
        tool_name: notify.dispatch
    """,
    "tools/notify.py": '''
        import uuid


        def dispatch(payload: dict) -> dict:
            """Send an alert to a channel."""
            return {"sent_to": payload["channel"], "message_id": str(uuid.uuid4())}
    ''',
    "tests/analyzer.yaml": """
        tests:
          - name: alerts ops
            payload: '{"table": "orders", "op": "UPDATE"}'
            expected_result: output.alerted == true
    """,
}
NOTIFIER_SCRIPT = {"analyzer": [
    answer(None, ("trigger_agent", {"agent_name": "dispatcher", "payload": '{"channel": "ops"}'})),
    answer('{"alerted": true}'),
]}


def record(root: Path, script: dict[str, list[object]], suite: str, case: str, **settings: object) -> None:
    with project_runtime(root, mode="once", live=Scripted(script), **settings) as runtime:
        outcome = run_case(runtime, suite, case)
    assert outcome.verdict_passed, outcome.failure_reason


def test_a_parent_whose_child_now_fails_fails_naming_the_child_and_its_error(tmp_path: Path) -> None:
    root = write_project(tmp_path, NOTIFIER)
    record(root, NOTIFIER_SCRIPT, "analyzer", "alerts ops")
    recorded = yaml.safe_load((root / "cassettes" / "analyzer" / "alerts ops.yaml").read_text())
    said = recorded["runs"][0]["turns"][1]["request"]["text"]["messages"][0]
    assert said["name"] == "trigger_agent" and '"status": "completed"' in said["content"]
    with project_runtime(root) as runtime:  # replayed as recorded: the child's new uuid4 is volatile
        assert run_case(runtime, "analyzer", "alerts ops").verdict_passed
    tools = root / "tools" / "notify.py"
    tools.write_text(tools.read_text().replace('return {"sent_to"', 'raise ConnectionError("smtp down")\n    return {"sent_to"'))
    with project_runtime(root) as runtime:
        outcome = run_case(runtime, "analyzer", "alerts ops")
    reason = first_failure(outcome)
    assert reason.startswith("replay diverged: the child agent 'dispatcher' (trigger_agent) now ends failed: "), reason
    assert "ConnectionError: smtp down" in reason and "tools/notify.py:" in reason
    assert outcome.records[0].run_id not in reason  # no run id quoted


MOCKED = {
    "agents/billing.yaml": llm_agent("billing", "You charge the customer.", ["pay.charge"]),
    "tools/pay.py": '''
        def charge(amount: float) -> dict:
            """Charge the customer."""
            raise RuntimeError("no real payments in tests")
    ''',
    "tests/mocks/payments.py": '''
        def mock_pay_charge(tool_name, params, context):
            return {"status": "paid", "amount": params["amount"], "at": "2026-01-05"}
    ''',
    "tests/billing.yaml": """
        tests:
          - name: charges the invoice
            payload: charge 12 EUR
            mocks: payments
            expected_result: status == "completed"
    """,
}


def test_a_note_for_a_changed_mock_names_the_mock_never_the_clock_or_a_run_id(tmp_path: Path) -> None:
    root = write_project(tmp_path, MOCKED)
    record(root, {"billing": [answer(None, ("charge", {"amount": 12})), answer("charged")]}, "billing",
           "charges the invoice")
    mock = root / "tests" / "mocks" / "payments.py"
    mock.write_text(mock.read_text().replace('"status": "paid"', '"status": "declined"'))
    with project_runtime(root) as runtime:
        outcome = run_case(runtime, "billing", "charges the invoice")
    reason = first_failure(outcome)
    assert reason.startswith("replay diverged: the mock "), reason
    assert "of tool charge now answers differently" in reason
    assert 'status "paid" → "declined"' in reason
    started = yaml.safe_load((root / "cassettes" / "billing" / "charges the invoice.yaml").read_text())
    started_at = started["runs"][0]["world"]["started_at"]
    assert started_at[:10] not in reason and outcome.records[0].run_id not in reason


STAMPED = {
    "agents/tickets.yaml": llm_agent("tickets", "You file tickets.", ["db.insert"]),
    "tools/db.py": '''
        import datetime
        import uuid


        def insert(title: str) -> dict:
            """Insert a ticket."""
            return {"id": str(uuid.uuid4()), "title": title,
                    "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    ''',
    "middleware/tickets.py": '''
        import datetime


        def before(content, context):
            stamp = datetime.datetime.now().isoformat()
            return {**content, "parts": [{"text": f"[{stamp}] "}] + list(content.get("parts") or [])}
    ''',
    "tests/tickets.yaml": """
        tests:
          - name: files a ticket
            payload: the printer is on fire
            expected_tool_calls: [db.insert]
    """,
}
TICKET_SCRIPT = {"tickets": [answer(None, ("insert", {"title": "printer fire"})), answer("filed")]}


def test_uuid4_and_now_in_a_tool_and_a_prompt_replay_quietly_a_day_later(tmp_path: Path) -> None:
    """One recording, then a replay a (simulated) day later, without sleeping: the tool's new
    ``uuid4()`` and ``datetime.now()``, and the middleware's time in the prompt, are volatile."""
    time_machine = pytest.importorskip("time_machine")
    root = write_project(tmp_path, STAMPED)
    record(root, TICKET_SCRIPT, "tickets", "files a ticket")
    a_day_later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1, hours=3)
    with time_machine.travel(a_day_later, tick=True), project_runtime(root) as runtime:
        outcome = run_case(runtime, "tickets", "files a ticket")
    assert outcome.verdict_passed, outcome.failure_reason


SIGNER = {
    "agents/signer.yaml": llm_agent("signer", "You sign.", ["sign.request"]),
    "tools/sign.py": '''
        import os
        import time


        def request(path: str) -> dict:
            """Sign a request as a service checks it: within 15 minutes of the real time."""
            skew = abs(time.time() - float(os.environ["CONNIC_TEST_REAL_NOW"]))
            if skew > 900:
                raise PermissionError(f"RequestTimeTooSkewed: {skew:.0f}s")
            return {"signed": path}
    ''',
    "tests/signer.yaml": """
        tests:
          - name: signs
            payload: sign /orders
            expected_tool_calls: [sign.request]
    """,
}


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_a_tool_signing_against_the_real_clock_passes_in_a_month_old_replay(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolation: str) -> None:
    """User code reads the real clock in a replay, whatever the recording's time (a service rejects
    a request more than ~15 minutes old)."""
    root = write_project(tmp_path, SIGNER)
    monkeypatch.setenv("CONNIC_TEST_REAL_NOW", str(time.time()))
    record(root, {"signer": [answer(None, ("request", {"path": "/orders"})), answer("signed")]}, "signer", "signs",
           isolation=isolation)
    cassette = root / "cassettes" / "signer" / "signs.yaml"
    data = yaml.safe_load(cassette.read_text())
    a_month_ago = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=31)
    data["runs"][0]["world"]["started_at"] = a_month_ago.isoformat()
    data["runs"][0]["world"]["elapsed"] = [0.01]  # what older versions held the worker's clock at
    cassette.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("CONNIC_TEST_REAL_NOW", str(time.time()))
    with project_runtime(root, isolation=isolation) as runtime:
        outcome = run_case(runtime, "signer", "signs")
    assert outcome.verdict_passed, outcome.failure_reason


COUNTER = {
    "agents/counter.yaml": llm_agent("counter", "You count.", ["count.tick"]),
    "tools/count.py": '''
        def tick(context) -> dict:
            """Tick, saying which run ticked."""
            return {"run": context["run_id"]}
    ''',
    "tests/counter.yaml": """
        tests:
          - name: ticks
            payload: tick
            runs: RUNS
            expected_tool_calls: [count.tick]
    """,
}


def test_runs_beyond_the_recording_are_said_and_each_has_its_own_run_id(tmp_path: Path) -> None:
    files = dict(COUNTER)
    files["tests/counter.yaml"] = files["tests/counter.yaml"].replace("RUNS", "1")
    root = write_project(tmp_path, files)
    record(root, {"counter": [answer(None, ("tick", {})), answer("ticked")]}, "counter", "ticks")
    suite = root / "tests" / "counter.yaml"
    suite.write_text(suite.read_text().replace("runs: 1", "runs: 3"))
    with project_runtime(root) as runtime:
        outcome = run_case(runtime, "counter", "ticks")
    assert outcome.verdict_passed, outcome.failure_reason
    assert (outcome.recorded_runs, outcome.replayed_runs, outcome.copies) == (1, 3, 2)
    assert outcome.replay_note == "3 runs replayed from 1 recorded run"
    run_ids = [r.run_id for r in outcome.records]
    assert len(set(run_ids)) == 3
    assert [r.tool_calls[0].result for r in outcome.records] == [{"run": i} for i in run_ids]
    recorded = yaml.safe_load((root / "cassettes" / "counter" / "ticks.yaml").read_text())
    assert run_ids[0] == recorded["runs"][0]["world"]["run_ids"][0]


def test_a_backtracking_matching_rule_fails_its_case_with_its_location(tmp_path: Path) -> None:
    """A rule that would spin ``re.sub`` for ever is stopped by its bound: the case fails, naming
    the rule's line in the cassette (issue 39)."""
    files = dict(COUNTER)
    files["tests/counter.yaml"] = files["tests/counter.yaml"].replace("RUNS", "1").replace("tick\n", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!\n")
    root = write_project(tmp_path, files)
    record(root, {"counter": [answer(None, ("tick", {})), answer("ticked")]}, "counter", "ticks")
    cassette = root / "cassettes" / "counter" / "ticks.yaml"
    cassette.write_text("match:\n  - replace: '(a|aa)+$'\n" + cassette.read_text())
    with project_runtime(root) as runtime:
        outcome = run_case(runtime, "counter", "ticks")
    reason = first_failure(outcome)
    assert reason.startswith("cassettes/counter/ticks.yaml:2:5: match[0].replace: the regular expression "), reason
    assert "ran past its bound" in reason



def test_a_cassette_that_cannot_be_written_is_the_cases_error_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-recording on a full disk: the case errs with the cassette's path and the reason, no
    traceback, and the file already there is left as it was (issue 39)."""
    import errno

    from pytest_connic.models import replay

    files = dict(COUNTER)
    files["tests/counter.yaml"] = files["tests/counter.yaml"].replace("RUNS", "1")
    root = write_project(tmp_path, files)
    record(root, {"counter": [answer(None, ("tick", {})), answer("ticked")]}, "counter", "ticks")
    cassette = root / "cassettes" / "counter" / "ticks.yaml"
    before = cassette.read_bytes()

    def full(path: Path, text: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(replay, "write_text_atomic", full)
    script = Scripted({"counter": [answer(None, ("tick", {})), answer("ticked")]})
    with project_runtime(root, mode="all", live=script) as runtime:
        outcome = run_case(runtime, "counter", "ticks")
    assert outcome.status == "error"
    assert outcome.recording_error == ("cassettes/counter/ticks.yaml: the cassette could not be written (No space "
                                       "left on device); the file already there, if any, was left as it was")
    assert cassette.read_bytes() == before
