"""``--connic-ab``: A/B comparisons of a base agent and its variant through real pytest runs.

The project: the ``calc`` agent and its variant ``calc-test-fast``; the variant's cassettes (or a
conftest ``pytest_connic_make_model``) make it measurably worse. Library-level statistics are
tested in ``test_ab_stats.py``.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from helpers.project import ConnicProject, esc
from pytest_connic.ab.analysis import LATENCY_KEYS, overall_recommendation
from pytest_connic.ab.options import ABOptions
from pytest_connic.ab.selection import select

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

SUITE = """
tests:
  - name: adds
    payload: "4 + 6?"
    runs: 2
    expected_tool_calls:
      - calc.add
    expected_result: output.sum == 10
  - name: wrong sum
    payload: "4 + 6?"
    expected_result: output.sum == 11
"""

GOOD = {"turns": [{"tool_calls": [{"name": "add", "arguments": {"a": 4, "b": 6}}]},
                  {"content": '{"sum": 10}', "usage": {"input_tokens": 100, "output_tokens": 10}}]}
#: a wrong answer without the tool call: the run completes but misses the case's checks
WRONG = {"turns": [{"content": '{"sum": 9}', "usage": {"input_tokens": 60, "output_tokens": 5}}]}
#: the model asks for a tool and the cassette has no answer after it: the run ends ``failed``
BROKEN = {"turns": [{"tool_calls": [{"name": "add", "arguments": {"a": 4, "b": 6}}]}]}
#: run i replays runs[i % 10]: runs 6..9 of every ten are wrong, so the variant passes 60%
WORSE = [GOOD] * 6 + [WRONG] * 4

#: a plan small enough for a test: 35 runs per arm at most, looks after 9, 18, 27 and 35 runs
SMALL_PLAN = ("--connic-ab-baseline", "80", "--connic-ab-mde", "20")
CONNIC_KEYS = ("agent_name", "test_name", "passed", "successes", "runs", "success_threshold", "failure_reason")


@pytest.fixture(scope="module", autouse=True)
def numerics_imported() -> None:
    """Import NumPy and SciPy in this process before an in-process pytest run does: pytester drops
    the modules an inner run imported, and NumPy cannot be imported twice in one process."""
    import numpy  # noqa: F401
    import scipy.stats  # noqa: F401


@pytest.fixture
def ab(calc: ConnicProject) -> ConnicProject:
    """calc and calc-test-fast (another prompt); the variant's cassettes answer worse on ``adds``."""
    calc.agent("calc-test-fast", tools=["calc.add", "calc.multiply"], system_prompt="You are calc, but fast.")
    calc.suite("calc", SUITE)
    for case in ("adds", "wrong sum"):
        calc.cassette("calc", case, [GOOD])
    calc.cassette("calc", "adds@calc-test-fast", WORSE)
    calc.cassette("calc", "wrong sum@calc-test-fast", [GOOD])
    return calc


def run_json(project: ConnicProject, *args: str, name: str = "report.json") -> tuple[pytest.RunResult, dict[str, Any]]:
    result = project.run("--connic-json", name, *args)
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    return result, json.loads((project.root / name).read_text("utf-8"))


def case_of(report: dict[str, Any], name: str, comparison: int = 0) -> dict[str, Any]:
    cases = report["ab"]["comparisons"][comparison]["cases"]
    return next(c for c in cases if c["test_name"] == name)


def connic_part(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: c[k] for k in CONNIC_KEYS} for c in report["cases"]]


def without_latency(value: Any) -> Any:
    """The section without latencies, the only numbers that differ between identical runs."""
    if isinstance(value, dict):
        return {k: without_latency(v) for k, v in value.items() if k not in LATENCY_KEYS}
    if isinstance(value, list):
        return [without_latency(v) for v in value]
    return value


def test_confidence_mode_recommends_control_and_keeps_the_ordinary_verdicts(ab: ConnicProject,
                                                                          wide_terminal: None) -> None:
    plain, plain_report = run_json(ab, name="plain.json")
    result, report = run_json(ab, "--connic-ab", "calc-test-fast", "--connic-ab-mode", "confidence", *SMALL_PLAN)

    # the items keep their control-arm verdicts, and Connic's keys are what they are without --connic-ab
    plain.assert_outcomes(passed=1, failed=1)
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == plain.ret == 1
    assert connic_part(report) == connic_part(plain_report)
    assert "ab" not in plain_report

    plan = report["ab"]["plan"]
    assert (plan["runs_per_arm"], plan["looks"]) == (35, [9, 18, 27, 35])
    adds = case_of(report, "adds")
    assert [look["recommendation"] for look in adds["looks"]] == ["continue", "continue", "control"]
    assert adds["control"]["runs"] == adds["variant"]["runs"] == 27  # the runs stopped at look 3
    assert adds["control"]["successes"] == 27 and adds["variant"]["successes"] == 18
    assert adds["difference"]["pass_rate"] == pytest.approx(-1 / 3)
    final = adds["looks"][-1]
    assert final["z"] <= -final["boundary"] and final["adjusted_interval"][1] < 0
    assert adds["recommendation"] == "control" and adds["variant"]["mean_tokens"] < adds["control"]["mean_tokens"]
    wrong = case_of(report, "wrong sum")  # both arms always fail: no boundary is ever crossed
    assert wrong["recommendation"] == "inconclusive" and wrong["control"]["runs"] == 35
    overall = report["ab"]["comparisons"][0]["overall"]
    assert overall["recommendation"] == "control" and not overall["paused"]
    assert overall["paired"]["mcnemar"]["control_only"] == 9 and overall["paired"]["mcnemar"]["variant_only"] == 0

    result.stdout.fnmatch_lines([
        "*connic A/B (confidence)*",
        "*plan: superiority, baseline 80.0%, MDE +20.0 pp*35 runs per arm*looks at 9/18/27/35*",
        "*calc (control) vs calc-test-fast (variant): 2 case(s)*",
        esc("*│ adds*│ control*│ 27*│ 100.0% [87.5, 100.0] *"),
        esc("*│*│ variant*│ 27*│ 66.7% [*"),
        esc("*│*│ Δ v − c*│ * │ -33.3 pp [*"),
        "*adds: look 3 of 4: z = -*control passes more often than variant*→ CONTROL",
        "*Recommendation: CONTROL: 1 case(s) (adds) favour control*",
    ])


def test_exploratory_mode_with_a_make_model_hook_shows_a_negative_difference(calc: ConnicProject) -> None:
    calc.agent("calc-test-fast", tools=["calc.add"])
    calc.suite("calc", 'tests:\n  - name: adds\n    payload: "4 + 6?"\n    runs: 2\n'
                       "    expected_result: output.sum == 10\n")
    calc.write("conftest.py", '''
        def pytest_connic_make_model(config, agent, model, case, run_index):
            with open("agents-seen.txt", "a") as fh:
                fh.write(f"{agent.config.name} {case['name']} {run_index}\\n")
            if agent.config.name == "calc-test-fast" and run_index % 2:
                return lambda request: '{"sum": 9}'
            return lambda request: '{"sum": 10}'
    ''')
    calc.pytester.makeini("[pytest]\nconnic_ab_min_runs = 12\n")
    result, report = run_json(calc, "--connic-ab", "fast", "--connic-html", "report.html", "-v")

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*run 2/2 passed*"])
    result.stdout.no_fnmatch_line("*run 3/*")  # -v progress lines are the case's runs, not the arms'

    adds = case_of(report, "adds")
    assert (adds["control"]["runs"], adds["control"]["successes"]) == (12, 12)  # min runs from the ini
    assert (adds["variant"]["runs"], adds["variant"]["successes"]) == (12, 6)
    assert adds["difference"]["pass_rate"] == -0.5
    low, high = adds["difference"]["pass_rate_interval_95"]
    assert low < -0.5 < high < 0  # Newcombe's interval excludes 0: a clearly negative difference
    assert adds["recommendation"] is None and report["ab"]["plan"] is None
    seen = set((calc.root / "agents-seen.txt").read_text().splitlines())
    # the hook was asked for the variant's model, with the case and the arm's run index
    assert {f"calc-test-fast adds {i}" for i in range(12)} <= seen and "calc adds 11" in seen

    result.stdout.fnmatch_lines([
        "*connic A/B (exploratory)*",
        esc("*│ adds*│ control*│ 12*│ 100.0% [*"),
        esc("*│*│ variant*│ 12*│ 50.0% [*"),
        esc("*│*│ Δ v − c*│ * │ -50.0 pp [-*, -*] *"),
        "*Exploratory: descriptive only*",
    ])
    page = (calc.root / "report.html").read_text("utf-8")
    assert "A/B comparison (exploratory)" in page and "-50.0 pp" in page and "calc-test-fast (variant)" in page
    # scripted models: the latencies are this machine's timings, said so and not judged
    assert report["ab"]["latencies"] == "local"
    result.stdout.fnmatch_lines(["*note: latencies are local timings (replayed or scripted models)*"])
    assert "Latencies are local timings" in page


@pytest.mark.parametrize("mode", ["exploratory", "confidence"])
def test_safety_rule_pauses_a_variant_whose_runs_fail(ab: ConnicProject, mode: str) -> None:
    ab.cassette("calc", "adds@calc-test-fast", [GOOD, BROKEN, BROKEN])  # 2 of every 3 runs end "failed"
    result, report = run_json(ab, "--connic-ab", "fast", "--connic-ab-mode", mode, "-k", "adds",
                              "--connic-ab-safety-window", "5", "--connic-ab-safety-threshold", "50", *SMALL_PLAN)

    result.assert_outcomes(passed=1)
    adds = case_of(report, "adds")
    assert adds["paused"] and "variant failed 3 of its last 5 finished runs" in adds["pause_reason"]
    overall = report["ab"]["comparisons"][0]["overall"]
    assert overall["paused"] and overall["paused_cases"] == ["tests/calc.yaml::adds"]
    if mode == "exploratory":
        assert (adds["control"]["runs"], adds["variant"]["runs"]) == (10, 5)  # stopped after one window
    else:
        assert adds["variant"]["runs"] == 9 and adds["recommendation"] == "inconclusive"  # after look 1
        assert adds["reason"].startswith("safety pause: ") and overall["recommendation"] == "inconclusive"
    result.stdout.fnmatch_lines(["*adds: variant PAUSED by the safety rule: variant failed 3 of its last 5*",
                                 "*safety: the variant was PAUSED on 1 case(s)*"])


def test_completed_runs_that_miss_the_checks_do_not_trip_the_safety_rule(ab: ConnicProject) -> None:
    ab.cassette("calc", "adds@calc-test-fast", [WRONG])
    _, report = run_json(ab, "--connic-ab", "fast", "-k", "adds", "--connic-ab-safety-window", "5")
    adds = case_of(report, "adds")
    assert adds["variant"]["successes"] == 0 and adds["variant"]["runs"] == 10 and not adds["paused"]


def test_all_variants_and_a_variant_name_that_matches_nothing_is_a_usage_error(ab: ConnicProject) -> None:
    _, report = run_json(ab, "--connic-ab", "all", "-k", "adds")  # "fast" and the full name: other tests
    assert [(c["base"], c["variant"]) for c in report["ab"]["comparisons"]] == [("calc", "calc-test-fast")]

    result = ab.run("--connic-ab", "slow")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    pattern = "*invalid value 'slow' from --connic-ab: no A/B variant agent matches*project: calc-test-fast"
    result.stderr.fnmatch_lines([pattern])
    result = ab.run("--connic-ab", "fast", "--connic-ab-mode", "confidence", "--connic-ab-baseline", "95")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no A/B confidence plan from --connic-ab-baseline: baseline + mde must not exceed 1*"])


def test_a_variant_without_cassette_is_not_compared(ab: ConnicProject) -> None:
    (ab.root / "cassettes" / "calc" / "adds@calc-test-fast.yaml").unlink()
    result, report = run_json(ab, "--connic-ab", "fast")
    result.assert_outcomes(passed=1, failed=1)
    adds = case_of(report, "adds")
    assert "no cassette for this case" in adds["error"] and "adds@calc-test-fast.yaml" in adds["error"]
    overall = report["ab"]["comparisons"][0]["overall"]
    assert (overall["cases"], overall["compared"], overall["errors"]) == (2, 1, 1)
    result.stdout.fnmatch_lines(["*adds: not compared: calc-test-fast: no cassette for this case*"])


def test_early_stop_ends_the_case_but_not_its_arms(ab: ConnicProject) -> None:
    ab.suite("calc", SUITE.replace("runs: 2", "runs: 6\n    success_threshold: 10"))
    _, report = run_json(ab, "--connic-ab", "fast", "-k", "adds", "--connic-early-stop", "--connic-concurrency", "1")
    assert report["cases"][0]["skipped_runs"] == 5  # the case stopped after its first run passed
    adds = case_of(report, "adds")
    assert adds["control"]["runs"] == adds["variant"]["runs"] == 10


@pytest.mark.timeout(600)
def test_xdist_gives_the_same_ab_report(ab: ConnicProject) -> None:
    args = ("--connic-ab", "fast", "--connic-ab-mode", "confidence", *SMALL_PLAN)
    _, single = run_json(ab, *args, name="single.json")
    result = ab.run("-n", "2", "--connic-json", "xdist.json", *args)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*Recommendation: CONTROL*"])
    distributed = json.loads((ab.root / "xdist.json").read_text("utf-8"))
    assert distributed["ab"]["comparisons"][0]["overall"]["recommendation"] == "control"
    assert without_latency(distributed["ab"]) == without_latency(single["ab"])


# -- pure parts ------------------------------------------------------------------------------------


def _agent(name: str, base: str | None = None, test: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(config=SimpleNamespace(name=name, is_test_variant=base is not None,
                                                  base_agent_name=base, test_name=test))


def test_select_by_full_name_test_name_or_all() -> None:
    agents = {a.config.name: a for a in (
        _agent("calc"), _agent("echo"), _agent("calc-test-fast", "calc", "fast"),
        _agent("echo-test-fast", "echo", "fast"), _agent("calc-test-b", "calc", "b"))}
    assert select(agents, "fast") == {"calc": ["calc-test-fast"], "echo": ["echo-test-fast"]}
    assert select(agents, "calc-test-fast") == {"calc": ["calc-test-fast"]}
    assert select(agents, "all") == {"calc": ["calc-test-b", "calc-test-fast"], "echo": ["echo-test-fast"]}
    assert select(agents, "calc") == {}


def _case(name: str, z: float, look: int, rec: str, paused: bool = False) -> dict[str, Any]:
    return {"test_name": name, "paused": paused, "pause_reason": "too many failed runs" if paused else None,
            "recommendation": rec, "looks": [{"look": look, "z": z}]}


def test_overall_recommendation_adjusts_for_the_number_of_cases() -> None:
    plan = ABOptions("v", mode="confidence", baseline=0.8, mde=0.2).plan()
    assert plan is not None
    c4 = plan.boundaries[3]  # 2.014 for one case
    # one case just past its own final boundary is a decision; among five cases it is not
    assert overall_recommendation(plan, [_case("a", -(c4 + 0.05), 4, "control")])[0] == "control"
    five = [_case("a", -(c4 + 0.05), 4, "control")] + [_case(n, 0.0, 4, "inconclusive") for n in "bcde"]
    rec, reason = overall_recommendation(plan, five)
    assert rec == "inconclusive" and "adjusted for 5 cases" in reason
    five[1] = _case("b", 4.0, 4, "variant")
    assert overall_recommendation(plan, five)[0] == "variant"
    five[0] = _case("a", -4.0, 4, "control")  # a clear regression anywhere keeps the control
    assert overall_recommendation(plan, five)[0] == "control"
    five[2] = _case("c", 0.0, 2, "inconclusive", paused=True)
    rec, reason = overall_recommendation(plan, five)
    assert rec == "inconclusive" and reason.startswith("safety pause on 1 case(s) (c)")


def test_overall_non_inferiority_needs_every_case() -> None:
    plan = ABOptions("v", mode="confidence", baseline=0.8, margin=0.2).plan()
    assert plan is not None and plan.objective == "non_inferiority"
    cases = [_case("a", 5.0, 2, "variant"), _case("b", 5.0, 1, "variant")]
    assert overall_recommendation(plan, cases)[0] == "variant"
    cases.append(_case("c", 1.0, 4, "inconclusive"))
    assert overall_recommendation(plan, cases)[0] == "inconclusive"


def test_no_ab_section_and_no_ab_text_without_the_option(ab: ConnicProject) -> None:
    result, report = run_json(ab, "--connic-html", "report.html")
    assert "ab" not in report
    result.stdout.no_fnmatch_line("*connic A/B*")
    assert 'id="ab"' not in (ab.root / "report.html").read_text("utf-8")


def test_what_the_comparison_warns_is_in_pytests_summary_not_raw_on_stderr(ab: ConnicProject) -> None:
    """The comparison runs after the case's protocol; the notice of a variant's hand-written
    cassette (no ``request`` digests) is the case's warning, in pytest's summary, as the
    control's is (a real session: in-process, a raw warning would reach this test's own capture)."""
    result = ab.run_subprocess("-p", "no:randomly", "-p", "no:xdist", "--connic-ab", "fast", *SMALL_PLAN)
    assert "ConnicWarning" not in result.stderr.str(), result.stderr.str()
    summary = result.stdout.str().split("warnings summary")[1]
    assert "adds@calc-test-fast.yaml:1: ConnicWarning" in summary and "adds.yaml:1: ConnicWarning" in summary
