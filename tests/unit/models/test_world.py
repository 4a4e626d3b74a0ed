"""The ``world:`` section of a cassette run (models/world.py): read, written, replayed."""

from __future__ import annotations

import datetime as dt

import pytest

from pytest_connic.models.base import CassetteError
from pytest_connic.models.cassette import cassette_to_data, parse_cassette
from pytest_connic.models.world import RunWorld, World

TEXT = """
version: 1
runs:
  - turns: [{content: ok}]
    world:
      started_at: "2026-12-01T10:00:00+01:00"
      run_ids: [root, child]
      ids: [scheduled]
      elapsed: [0.5]
      seed: 7
"""


def test_a_world_section_round_trips() -> None:
    cassette = parse_cassette(TEXT)
    world = cassette.runs[0].world
    assert world is not None and world.run_ids == ["root", "child"] and world.seed == 7
    assert cassette_to_data(cassette)["runs"][0]["world"] == {
        "started_at": "2026-12-01T10:00:00+01:00", "run_ids": ["root", "child"], "ids": ["scheduled"],
        "elapsed": [0.5], "seed": 7}


def test_a_run_without_world_writes_none() -> None:
    cassette = parse_cassette("version: 1\nruns:\n  - turns: [{content: ok}]\n")
    assert cassette.runs[0].world is None
    assert "world" not in cassette_to_data(cassette)["runs"][0]


@pytest.mark.parametrize(("section", "message"), [
    ("{started_at: yesterday}", "runs[0].world.started_at: expected an ISO 8601 time with an offset"),
    ('{started_at: "2026-12-01T10:00:00"}', "runs[0].world.started_at: expected an ISO 8601 time with an offset"),
    ("{seed: -1}", "runs[0].world.seed: expected an integer >= 0"),
    ("{run_ids: [1]}", "runs[0].world.run_ids: expected a list of strings"),
    ("{elapsed: [x]}", "runs[0].world.elapsed: expected a list of seconds"),
    ("{sead: 1}", "unknown key 'sead'; did you mean 'seed'?"),
])
def test_bad_values_are_located(section: str, message: str) -> None:
    with pytest.raises(CassetteError, match=r"^c\.yaml:\d+:\d+: ") as info:
        parse_cassette(f"version: 1\nruns:\n  - turns: [{{content: ok}}]\n    world: {section}\n", "c.yaml")
    assert message in str(info.value)


def test_a_replayed_world_gives_the_recorded_values_then_fresh_ones() -> None:
    start = dt.datetime(2026, 12, 1, 10, tzinfo=dt.timezone.utc)
    world = RunWorld(World(start, ["root"], ["x"], [2.0], 5), recording=False, now=100.0)
    assert (world.run_id(), world.new_id()) == ("root", "x")
    assert world.run_id() not in ("root", "")  # past the recorded ones: a fresh id
    assert world.for_call(100.1) == ("2026-12-01T10:00:02+00:00", 5)  # the recorded elapsed
    assert world.for_call(103.0)[0] == "2026-12-01T10:00:03+00:00"  # past them: the run's own
    # an invocation starting now reads the latest call's time: the same instant in the recording
    assert world.wall_now(101.0) == start + dt.timedelta(seconds=3)


def test_a_recording_world_records_what_it_hands_out() -> None:
    world = RunWorld(None, recording=True, now=0.0)
    ids = (world.run_id(), world.run_id(), world.new_id())
    started = world.world.started_at
    assert started is not None and started.tzinfo is not None
    assert world.wall_now(0.1) == started  # before any call: the run's start itself
    # the recording holds user code's clock where the replay will: start + the call's elapsed
    assert world.for_call(0.25) == ((started + dt.timedelta(seconds=0.25)).isoformat(), world.world.seed)
    assert (world.world.run_ids, world.world.ids, world.world.elapsed) == (list(ids[:2]), [ids[2]], [0.25])
    assert world.wall_now(0.3) == started + dt.timedelta(seconds=0.25)
