"""Replay you can trust (issue 38), below pytest: what a recorded request keeps, which values vary
without the agent behaving otherwise, and what a divergence says (never a value that replays
identically)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import pytest

from pytest_connic.models import ModelRequest
from pytest_connic.models.base import CassetteError, ModelResponse, ToolCallRequest
from pytest_connic.models.cassette import parse_cassette
from pytest_connic.models.divergence import Divergence, find, texts_by_index
from pytest_connic.models.fingerprint import TEXT_LIMIT, echo_now, kinds_of, normalised, section
from pytest_connic.models.volatile import KINDS, Volatile

RECORDED_AT = dt.datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=dt.timezone.utc)
A_DAY_LATER = RECORDED_AT + dt.timedelta(days=1, minutes=7)
USER = {"role": "user", "content": "a new ticket please"}


def req(*messages: dict[str, Any], system: str = "You file tickets.", schema: Any = None) -> ModelRequest:
    return ModelRequest("desk", "openai/gpt-4o-mini", system, list(messages), output_schema=schema)


def tool(value: object, name: str = "db_insert") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "call_1", "name": name,
            "content": value if isinstance(value, str) else json.dumps(value)}


def recorded(request: ModelRequest, *, at: dt.datetime = RECORDED_AT, response: ModelResponse | None = None,
             kinds: tuple[str, ...] = KINDS) -> dict[str, Any]:
    return section(normalised(request, (), kinds, at), kinds, since=0, system=True, response=response)


def diverges(fingerprint: dict[str, Any], request: ModelRequest, *, at: dt.datetime = A_DAY_LATER) -> Divergence | None:
    normal = normalised(request, (), kinds_of(fingerprint), at)
    return find(fingerprint, normal, request, texts_by_index([fingerprint]))


def test_a_recorded_request_keeps_its_digests_the_kinds_and_the_text_it_added() -> None:
    fingerprint = recorded(req(USER, tool({"ok": True})))
    assert fingerprint["volatile"] == ["uuid", "hex", "time"]
    assert {"model", "digest", "system", "messages", "tools"} <= set(fingerprint)
    assert fingerprint["text"] == {"system": "You file tickets.", "messages": [
        {"at": 0, "role": "user", "content": "a new ticket please"},
        {"at": 1, "role": "tool", "name": "db_insert", "content": '{"ok": true}'}]}


def test_text_is_cut_and_a_second_turn_keeps_only_what_it_added() -> None:
    long = req(USER, tool("x" * (TEXT_LIMIT * 2)))
    fingerprint = section(normalised(long, (), KINDS, RECORDED_AT), KINDS, since=1, system=False)
    assert "system" not in fingerprint["text"]
    (entry,) = fingerprint["text"]["messages"]
    assert entry["at"] == 1 and len(entry["content"]) == TEXT_LIMIT and entry["content"].endswith("…")


def test_a_tools_uuid4_and_now_replay_quietly_a_day_later() -> None:
    """The `db_insert` of the issue: a UUID and the current time in a tool's result; one
    recording, then a replay a (simulated) day later matches."""
    def inserted(at: dt.datetime) -> ModelRequest:
        row = {"id": str(uuid.uuid4()), "created_at": at.isoformat(), "epoch": int(at.timestamp()),
               "token": uuid.uuid4().hex, "day": at.date().isoformat()}
        return req(USER, tool(row), system=f"Today is {at:%a, %d %b %Y %H:%M:%S} GMT.")

    fingerprint = recorded(inserted(RECORDED_AT))
    assert diverges(fingerprint, inserted(A_DAY_LATER)) is None
    assert "<uuid-1>" in fingerprint["text"]["messages"][1]["content"]


def test_a_fixed_value_far_from_the_run_is_still_compared() -> None:
    """A date in a tool's data is not "now": a change to it is a divergence, and the diff shows
    that field only, never the id that replays identically."""
    order = {"id": "6f1c3e0a-3c1b-4d4e-9a57-1d2c0ffee000", "delivery": "2026-03-19", "total": 10}
    fingerprint = recorded(req(USER, tool(order)))
    changed = diverges(fingerprint, req(USER, tool({**order, "delivery": "2026-03-20"})))
    assert changed is not None
    assert changed.text() == 'message 1 (tool) differs: delivery "2026-03-19" → "2026-03-20"'
    assert "6f1c3e0a" not in changed.text() and changed.name == "db_insert" and changed.role == "tool"


def test_which_id_went_where_is_still_compared() -> None:
    """Placeholders are numbered by first appearance: a tool that now passes one id twice where
    the recording had two ids differs."""
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    fingerprint = recorded(req(USER, tool(f"moved {a} to {b}")))
    c, d = str(uuid.uuid4()), str(uuid.uuid4())
    assert diverges(fingerprint, req(USER, tool(f"moved {c} to {d}"))) is None
    same = diverges(fingerprint, req(USER, tool(f"moved {c} to {c}")))
    assert same is not None and same.diff == "recorded → now: …moved <uuid-1> to [-<uuid-2>-]{+<uuid-1>+}"


def test_a_replayed_answer_repeats_the_values_that_took_the_recorded_ones_place() -> None:
    """The model passed on the id a tool made; in a replay the tool makes another, and the
    replayed tool call carries the new one (``echoed``)."""
    old = str(uuid.uuid4())
    answer = ModelResponse(tool_calls=[ToolCallRequest("c2", "db_update", {"id": old, "done": True})])
    fingerprint = recorded(req(USER, tool({"id": old})), response=answer)
    assert fingerprint["echoed"] == {"<uuid-1>": old}
    new = str(uuid.uuid4())
    now = normalised(req(USER, tool({"id": new})), (), KINDS, A_DAY_LATER)
    assert echo_now(fingerprint, now.found) == {old: new}


@pytest.mark.parametrize(("text", "shown"), [
    ("at 2026-12-01T10:00:01Z", "at <time>"),
    ("at 2026-12-01 11:00:01.5+01:00", "at <time>"),
    ("at 2026-12-01T09:59", "at <time>"),  # no zone: local time or UTC
    ("Tue, 01 Dec 2026 10:00:00 GMT", "<time>"),
    ("epoch 1796119200 ms 1796119200123", "epoch <time> ms <time>"),
    ("due 2026-12-02, since 2026-11-30, on 2026-12-01", "due <today+1>, since <today-1>, on <today>"),
    ("shipped 2026-03-19T08:00:00Z", "shipped 2026-03-19T08:00:00Z"),  # far from the run: compared
    ("order 1234567890123456 token DEADBEEF00112233", "order 1234567890123456 token <hex-1>"),
    ("call_abc123def4567890ab", "call_abc123def4567890ab"),  # inside a word: left alone
])
def test_volatile_values_and_what_they_become(text: str, shown: str) -> None:
    assert Volatile(KINDS, RECORDED_AT).text(text) == shown


def test_an_epoch_number_near_the_run_is_a_time() -> None:
    volatile = Volatile(KINDS, RECORDED_AT)
    assert volatile.data({"at": int(RECORDED_AT.timestamp()), "n": 7, "ok": True}) == {"at": "<time>", "n": 7, "ok": True}


def test_a_kind_left_out_is_compared_exactly() -> None:
    fingerprint = recorded(req(USER, tool({"id": str(uuid.uuid4())})), kinds=("time",))
    assert fingerprint["volatile"] == ["time"]
    assert diverges(fingerprint, req(USER, tool({"id": str(uuid.uuid4())}))) is not None


def test_a_system_prompt_that_changed_shows_the_words() -> None:
    fingerprint = recorded(req(USER, system="Refund up to 100 EUR."))
    changed = diverges(fingerprint, req(USER, system="Refund up to 200 EUR."))
    assert changed is not None and changed.part == "system"
    assert changed.text() == "system prompt differs: recorded → now: …Refund up to [-100-]{+200+}"


def test_an_output_schema_that_changed_is_said() -> None:
    fingerprint = recorded(req(USER, schema={"type": "object"}))
    changed = diverges(fingerprint, req(USER, schema={"type": "object", "required": ["id"]}))
    assert changed is not None and changed.part == "schema" and changed.text() == "the output schema differs"


def test_a_message_the_recording_did_not_have_is_quoted() -> None:
    fingerprint = recorded(req(USER))
    changed = diverges(fingerprint, req(USER, tool({"id": 1})))
    assert changed is not None and changed.part == "added" and changed.index == 1
    assert changed.text() == "message 1 (tool) is new: 1 more message(s) than recorded: now '{\"id\": 1}'"


@pytest.mark.parametrize(("request_text", "message"), [
    ("{volatile: [uuid, dates]}", "runs[0].turns[0].request.volatile: expected a list of the kinds uuid, hex, time"),
    ("{text: {system: 3}}", "runs[0].turns[0].request.text: 'system' must be a string"),
    ("{text: {messages: [{at: one, role: user, content: x}]}}", "runs[0].turns[0].request.text: 'messages' must be"),
    ("{echoed: [a]}", "runs[0].turns[0].request.echoed: expected a mapping of placeholders"),
])
def test_a_bad_request_section_is_a_located_cassette_error(request_text: str, message: str) -> None:
    text = f"version: 1\nruns:\n  - turns:\n      - content: hi\n        request: {request_text}\n"
    with pytest.raises(CassetteError) as info:
        parse_cassette(text, "c.yaml")
    assert str(info.value).startswith("c.yaml:5:") and message in str(info.value)


def test_a_hand_written_section_is_compared_on_the_parts_it_has() -> None:
    request = req(USER, tool({"id": 1}))
    assert diverges({"model": "openai/gpt-4o-mini"}, request) is None
    changed = diverges({"model": "openai/gpt-4.1"}, request)
    assert changed is not None and changed.text() == "model differs: recorded 'openai/gpt-4.1', now 'openai/gpt-4o-mini'"
