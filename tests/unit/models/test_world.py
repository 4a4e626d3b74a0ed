"""The ``world:`` section of a cassette run (models/world.py): read, written, replayed."""

from __future__ import annotations

import datetime as dt

import pytest

from pytest_connic.models.base import CassetteError
from pytest_connic.models.cassette import parse_cassette
from pytest_connic.models.cassette_write import cassette_to_data
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
    # hostile values (issue 39): the cassette's line, never a user's tool overflowing
    ("{elapsed: [1.0e+308]}", "runs[0].world.elapsed: expected a list of seconds (numbers from 0 to"),
    ("{elapsed: [.nan]}", "runs[0].world.elapsed: expected a list of seconds"),
    ('{started_at: "9999-12-31T23:59:59+00:00"}', "runs[0].world.started_at: expected a time between 1970 and 9000"),
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
    # user code reads the real clock (a request it signs for a real service must be of now): only
    # the seed crosses to its worker
    assert world.for_call(100.1) == (None, 5)
    assert abs(world.wall_now(101.0) - dt.datetime.now(dt.timezone.utc)) < dt.timedelta(minutes=5)


def test_a_recording_world_records_what_it_hands_out() -> None:
    world = RunWorld(None, recording=True, now=0.0)
    ids = (world.run_id(), world.run_id(), world.new_id())
    started = world.world.started_at
    assert started is not None and started.tzinfo is not None
    assert world.for_call(0.25) == (None, world.world.seed)
    assert (world.world.run_ids, world.world.ids, world.world.elapsed) == (list(ids[:2]), [ids[2]], [])


def test_a_copy_of_a_recorded_run_gets_ids_of_its_own_the_same_every_time() -> None:
    """`runs: 3` over a one-run cassette: runs 2 and 3 replay run 1, each with its own run ids,
    derived from the recorded ones (so a replay is still deterministic)."""
    recorded = World(None, ["11111111-2222-4333-8444-555555555555", "child"], ["x"], [], 5)
    first, second, third = (RunWorld(copy_world(recorded), recording=False, now=0.0, copy=c) for c in (0, 1, 2))
    ids = [(w.run_id(), w.run_id(), w.new_id()) for w in (first, second, third)]
    assert ids[0] == ("11111111-2222-4333-8444-555555555555", "child", "x")
    assert len({i for group in ids for i in group}) == 9  # no id shared by two runs
    again = RunWorld(copy_world(recorded), recording=False, now=0.0, copy=2)
    assert (again.run_id(), again.run_id(), again.new_id()) == ids[2]
    assert all(w.for_call(0.0) == (None, 5) for w in (first, second, third))  # the one recorded seed


def copy_world(world: World) -> World:
    import copy

    return copy.deepcopy(world)