"""pytest-cov sees the user code that runs in the worker processes (docs/ci.md "Coverage of your
tools"): each worker measures with the session's configuration and saves its data where
coverage's combine step finds it, so the default process isolation reports the lines of
``tools/`` that ``--connic-isolation=none`` reports."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers.project import ConnicProject

pytest.importorskip("pytest_cov")

TOOLS = '''
def shout(payload: dict) -> dict:
    """The body of a tool agent: every line below runs in a worker process."""
    text = str(payload.get("text", ""))
    loud = text.upper()
    if loud.endswith("!"):
        return {"said": loud}
    return {"said": loud + "!"}


def never(payload: dict) -> dict:
    """Never called."""
    return {"never": True}
'''


def measured(project: ConnicProject, *args: str) -> dict[str, float]:
    result = project.run_subprocess("--cov=tools", "--cov-report=json:cov.json", *args)
    result.assert_outcomes(passed=2)
    # pytest's process (each xdist worker's) measured none of tools/: its data is the workers'
    output = result.stdout.str() + result.stderr.str()
    assert "CoverageWarning" not in output and "No data was collected" not in output, output
    files = json.loads((project.root / "cov.json").read_text("utf-8"))["files"]
    return {name: data["summary"]["percent_covered"] for name, data in files.items()}


@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["single", "xdist"])
def test_worker_processes_report_the_lines_they_ran(project: ConnicProject, xdist: tuple[str, ...]) -> None:
    project.tool("loud", TOOLS)
    project.agent("loud", type="tool", tool_name="loud.shout")
    project.suite("loud", """
        tests:
          - name: adds the mark
            payload: '{"text": "hi"}'
            expected_result: output.said == "HI!"
          - name: keeps the mark
            payload: '{"text": "hey!"}'
            expected_result: output.said == "HEY!"
    """)
    in_workers = measured(project, *xdist)
    in_process = measured(project, "--connic-isolation=none", *xdist)
    assert in_workers == in_process
    # every line but the body of `never`: the import-time lines alone would be far fewer
    assert in_workers["tools/loud.py"] > 85
    assert not list(project.root.glob(".coverage.*"))  # every worker's data was combined


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "order-desk"


def test_order_desk_tools_coverage_is_the_same_under_both_isolations(pytester: pytest.Pytester) -> None:
    """The issue's repro: ``pytest --cov=tools`` on examples/order-desk reports the line coverage of
    ``tools/`` under the default isolation that ``--connic-isolation=none`` reports (within 2 points;
    import-time lines alone were 22-35%)."""
    shutil.copytree(EXAMPLE, pytester.path, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))

    def total(*args: str) -> float:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--cov=tools",
                                               "--cov-report=json:cov.json", *args)
        assert result.ret == 0, result.stdout.str()
        return float(json.loads((pytester.path / "cov.json").read_text("utf-8"))["totals"]["percent_covered"])

    in_workers, in_process = total(), total("--connic-isolation=none")
    assert abs(in_workers - in_process) <= 2, (in_workers, in_process)
    assert in_workers > 60
