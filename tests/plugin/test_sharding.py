"""The sharding recipe (docs/performance.md): pytest-split over deterministic node ids.

Two shards run separately must together give exactly the full run's results.
"""

from __future__ import annotations

import json

import pytest

from helpers.project import ConnicProject

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

pytest.importorskip("pytest_split")


def _cases(result_path: str, project: ConnicProject) -> dict[str, tuple[bool, int, int]]:
    report = json.loads((project.root / result_path).read_text())
    return {c["nodeid"]: (c["passed"], c["successes"], c["runs"]) for c in report["cases"]}


def test_two_shards_together_equal_the_full_run(calc: ConnicProject) -> None:
    for s in range(3):
        calc.suite(
            f"echo_{s}",
            "agent: echo\ntests:\n"
            + "".join(
                f"  - name: case {c}\n    payload: '{{\"n\": {c}}}'\n    runs: 2\n"
                f"    expected_result: output.got.n == {c if (s + c) % 4 else -1}\n"
                for c in range(4)
            ),
        )
    full = calc.run("--connic-json=full.json")
    shard_results = [
        calc.run("--splits=2", f"--group={g}", f"--connic-json=shard{g}.json") for g in (1, 2)
    ]
    everything = _cases("full.json", calc)
    shards = [_cases(f"shard{g}.json", calc) for g in (1, 2)]
    assert len(everything) == 12
    assert shards[0] and shards[1], "both shards must run something"
    assert not set(shards[0]) & set(shards[1]), "a case ran in both shards"
    assert {**shards[0], **shards[1]} == everything
    failed = sum(1 for passed, _, _ in everything.values() if not passed)
    assert full.ret == 1 and failed == 3
    assert sum(r.parseoutcomes().get("failed", 0) for r in shard_results) == failed
