"""A shard that cannot be merged is refused with its file and what is wrong (``reports/merge.py``),
below pytest: the session-level test (``tests/plugin/test_report_faults.py``) keeps the faults
that could hang or crash a session (a FIFO, a deep file); the others are read here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord
from pytest_connic.reports.json_report import build_json_report, report_text
from pytest_connic.reports.merge import MergeError, load_shards
from pytest_connic.secrets import Masker


def good_shard() -> str:
    record = RunRecord(run_id="r-1", agent_name="echo", index=0, duration_ms=12.0, status="completed")
    outcome = CaseOutcome(nodeid="tests/echo.yaml::echoes", suite_path="tests/echo.yaml", line=3, agent_name="echo",
                          case_name="echoes", runs=1, success_threshold=100, records=[record])
    return report_text(build_json_report([outcome], masker=Masker(), session_status="passed", environment_id=None))


def _first_run(text: str, key: str, value: object) -> str:
    data = json.loads(text)
    data["cases"][0]["runs_detail"][0][key] = value
    return json.dumps(data)


@pytest.mark.parametrize(("fault", "message"), [
    (lambda text: text[: len(text) // 2], "not a --connic-json report: invalid JSON: *"),
    (lambda text: text.replace('"cases": [', '"deep": ' + "[" * 100_000 + "]" * 100_000 + ', "cases": [', 1),
     "not a --connic-json report: nested deeper than 200 levels"),
    (lambda text: text.replace('"runs": 1', '"runs": "one"', 1), "cases[[]0].runs: not a --connic-json report *"),
    (lambda text: text.replace('"runs_detail": [', '"runs_detail": [{"run_id": 7}, ', 1),
     "cases[[]0].runs_detail[[]0].run_id: *"),
    (lambda text: _first_run(text, "duration_ms", "slow"), "cases[[]0].runs_detail[[]0].duration_ms: *"),
    (lambda text: _first_run(text, "failures", [{"not": "text"}]), "cases[[]0].runs_detail[[]0].failures: *"),
    (lambda text: text.replace('"runs": 1', '"runs": NaN', 1), "not a --connic-json report: invalid JSON: NaN *"),
])
def test_a_shard_that_cannot_be_merged_is_an_error_naming_it(tmp_path: Path, fault: object, message: str) -> None:
    from fnmatch import fnmatch

    good = good_shard()
    assert len(load_shards([_written(tmp_path / "good.json", good)]).outcomes) == 1
    with pytest.raises(MergeError) as caught:
        load_shards([_written(tmp_path / "bad.json", fault(good))])  # type: ignore[operator]
    assert fnmatch(str(caught.value), f"{tmp_path / 'bad.json'}: {message}"), str(caught.value)


def _written(path: Path, text: str) -> Path:
    path.write_text(text, "utf-8")
    return path
