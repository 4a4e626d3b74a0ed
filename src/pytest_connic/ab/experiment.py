"""Running the arms of an A/B comparison for one case (control = the base agent, variant).

Both arms run the case as the ordinary item does (payload, files, builder, mocks,
checks) through ``execution.case.CaseRun``; only the agent and the model source
differ. Run ``i`` of an arm replays run ``i`` of its cassette (``runs[i % len]``), so
control run ``i`` and variant run ``i`` form a pair. The control arm starts with the
runs the ordinary item already made and adds runs as the comparison needs them.

The result of one case is a plain dict (it travels from xdist workers as JSON):
per arm the observations of every run, in index order, and the looks, the
recommendation and the safety state. ``analysis.py`` turns it into the report.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_connic.ab.arms import ArmStats
from pytest_connic.ab.options import ABOptions
from pytest_connic.ab.safety import SafetyMonitor
from pytest_connic.ab.sequential import LookResult, analyze_look
from pytest_connic.errors import ConnicError

if TYPE_CHECKING:
    from pytest_connic.execution.case import ProjectRuntime
    from pytest_connic.models.base import RunModels, RunModelSource
    from pytest_connic.records.outcome import CaseOutcome
    from pytest_connic.records.run import RunRecord
    from pytest_connic.suite.loader import CaseSpec, Suite

#: the replay error of a case without a cassette (models/replay.py): the arm cannot be compared
NO_CASSETTE = "no cassette for this case"


@dataclass(frozen=True)
class ComparedCase:
    """The suite case an experiment compares (a valid one: ``spec.resolved`` is set)."""

    nodeid: str
    suite: Suite
    spec: CaseSpec


class ArmError(ConnicError):
    """An arm could not run (setup error, provider down, no cassette): the case is not compared."""


def variant_cassette_name(case_name: str, variant: str) -> str:
    """The variant's cassette sits beside the case's: ``cassettes/<suite>/<case>@<variant>.yaml``."""
    return f"{case_name}@{variant}"


class _Shifted:
    """An arm's model source as one batch sees it: batch run ``i`` is arm run ``start + i``.
    It has no ``save``: the arm writes its recordings once, at the end."""

    def __init__(self, models: RunModelSource, start: int) -> None:
        self.models = models
        self.start = start

    def for_run(self, index: int) -> RunModels:
        return self.models.for_run(self.start + index)


class Arm:
    """One arm of one case: its runs by index, run on demand in batches."""

    def __init__(self, runtime: ProjectRuntime, case: ComparedCase, agent: str, models: RunModelSource, *,
                 pool: list[RunRecord] | None = None, save: bool = False) -> None:
        self.runtime = runtime
        self.case = case
        self.agent = agent
        self.models = models
        self.save = save
        self.records: dict[int, RunRecord] = {r.index: r for r in pool or ()}

    def first(self, count: int) -> list[RunRecord]:
        """Runs ``0 .. count-1``, running the missing ones (one batch, concurrently)."""
        missing = [i for i in range(count) if i not in self.records]
        if missing:
            self._run(missing[0], count - missing[0])
        return [self.records[i] for i in range(count)]

    def _run(self, start: int, count: int) -> None:
        """One batch: never stopped by ``--connic-early-stop`` (which judges the case threshold,
        not the comparison), and without the ``-v`` per-run progress lines, which belong to the
        case's own runs."""
        from pytest_connic.execution.case import CaseRun
        from pytest_connic.execution.executors import ReusingDaemonExecutor
        from pytest_connic.execution.outcomes import suite_outcome
        from pytest_connic.execution.target import CaseTarget

        spec, suite = self.case.spec, self.case.suite
        assert spec.resolved is not None and spec.compiled is not None
        outcome = suite_outcome(self.case.nodeid, suite, spec, agent_name=self.agent, runs=count)
        target = CaseTarget(self.agent, spec.resolved, spec.compiled, _Shifted(self.models, start), outcome)
        executor = ReusingDaemonExecutor("connic-ab")
        try:
            asyncio.run(CaseRun(self.runtime, target, executor, early_stop=False, run_listeners=()).run())
        finally:
            executor.shutdown()
        if outcome.setup_error is not None:
            raise ArmError(outcome.setup_error)
        for offset, record in enumerate(outcome.records):
            record.index = start + offset
            self._check(record)
            self.records[record.index] = record

    def _check(self, record: RunRecord) -> None:
        if record.infrastructure_error:
            raise ArmError(f"{self.agent}: run {record.index + 1}: {record.infrastructure_error}")
        missing = next((f for f in record.failures if NO_CASSETTE in f), None)
        if missing is not None:
            raise ArmError(f"{self.agent}: {missing}")

    def finish(self) -> list[str]:
        """Write what the arm recorded (variant arms only); the cassette's divergence notes."""
        base = getattr(self.models, "base", None)
        if base is None:
            return []
        if self.save:
            base.save()
        return list(base.notes)


def observation(record: RunRecord) -> dict[str, object]:
    """What the analysis needs of one run."""
    return {
        "index": record.index,
        "passed": record.passed,
        "status": record.status,
        "duration_ms": record.duration_ms,
        "tokens": record.input_tokens + record.output_tokens,
        "cost": record.cost,
    }


def counts(records: list[RunRecord]) -> ArmStats:
    """Runs and successes of an arm (the looks need no metrics)."""
    return ArmStats(len(records), sum(1 for r in records if r.passed))


def look_dict(result: LookResult, runs_per_arm: int) -> dict[str, object]:
    """One look as the reports show it."""
    return {
        "look": result.look,
        "runs_per_arm": runs_per_arm,
        "control_successes": result.control.successes,
        "variant_successes": result.variant.successes,
        "effect": result.effect,
        "z": result.z,
        "boundary": result.boundary,
        "adjusted_interval": list(result.adjusted_interval),
        "conditional_power": result.conditional_power,
        "recommendation": result.recommendation,
        "reason": result.reason,
    }


def _feed(monitor: SafetyMonitor, records: list[RunRecord]) -> None:
    """A run fails for the safety rule when it ends with status ``failed`` (an agent error, a
    timeout): the platform's runs have no expectations, and a run that completed but missed the
    case's checks counts against the variant's pass rate, not its safety."""
    for record in records:
        monitor.observe(record.status != "failed")


def exploratory(control: Arm, variant: Arm, runs: int, options: ABOptions) -> dict[str, object]:
    """Both arms to ``runs`` runs; the variant in windows, so that a safety pause stops it."""
    control.first(runs)
    monitor = SafetyMonitor(options.safety_window, options.safety_max_failure_rate)
    done = 0
    while done < runs and not monitor.paused:
        stop = min(runs, done + options.safety_window)
        _feed(monitor, variant.first(stop)[done:])
        done = stop
    return {"runs_per_arm": runs, "variant_runs": done, "looks": [], "recommendation": None,
            "reason": None, **_safety(monitor)}


def confidence(control: Arm, variant: Arm, options: ABOptions) -> dict[str, object]:
    """The planned looks, stopping at the first that decides (``run_sequential``'s rules)."""
    plan = options.plan()
    assert plan is not None
    monitor = SafetyMonitor(options.safety_window, options.safety_max_failure_rate)
    looks, done = [], 0
    for index, target in enumerate(plan.looks):
        c_runs, v_runs = control.first(target), variant.first(target)
        result = analyze_look(plan, index, counts(c_runs), counts(v_runs))
        _feed(monitor, v_runs[done:])
        done = target
        if monitor.paused:
            result = dataclasses.replace(result, recommendation="inconclusive",
                                         reason=f"safety pause: {monitor.reason}")
        looks.append(look_dict(result, target))
        if result.recommendation != "continue":
            break
    return {"runs_per_arm": done, "variant_runs": done, "looks": looks,
            "recommendation": looks[-1]["recommendation"], "reason": looks[-1]["reason"], **_safety(monitor)}


def _safety(monitor: SafetyMonitor) -> dict[str, object]:
    return {"paused": monitor.paused, "pause_reason": monitor.reason}


def _entry(case: ComparedCase, base: str, variant: str, options: ABOptions) -> dict[str, object]:
    return {
        "nodeid": case.nodeid, "suite": case.suite.relpath, "line": case.spec.line, "test_name": case.spec.name,
        "base": base, "variant": variant, "mode": options.mode, "error": None, "notes": [],
        "runs": {"control": [], "variant": []}, "looks": [], "recommendation": None, "reason": None,
        "paused": False, "pause_reason": None,
    }


def _ordinary_pool(outcome: CaseOutcome) -> list[RunRecord]:
    """The ordinary runs, when they are runs 0..k-1 of the case (an early stop skips a tail)."""
    pool = sorted(outcome.executed, key=lambda r: r.index)
    if [r.index for r in pool] != list(range(len(pool))) or outcome.setup_error is not None:
        return []
    return pool


def control_models(runtime: ProjectRuntime, case: ComparedCase) -> RunModelSource:
    """The control arm replays the case's cassette (which the item has just recorded, if it had to),
    wrapping around its runs, and never writes it; live providers with ``--connic-live``."""
    from pytest_connic.execution.models import case_cassette, models_at

    assert case.spec.resolved is not None
    source = runtime.options.models
    if source.mode == "live":
        return runtime.models_for(case.suite, case.spec.resolved)
    path = case_cassette(source, runtime.services, case.suite.relpath, case.spec.name)
    return models_at(source.replaying(), runtime.services, path, case.spec.resolved)


def variant_arm(runtime: ProjectRuntime, case: ComparedCase, variant: str) -> Arm:
    """The variant arm: its own cassette (``<case>@<variant>.yaml``), in the session's record mode."""
    from pytest_connic.execution.models import case_cassette, models_at

    source = runtime.options.models
    path = case_cassette(source, runtime.services, case.suite.relpath, variant_cassette_name(case.spec.name, variant))
    return Arm(runtime, case, variant, models_at(source, runtime.services, path, case.spec.resolved), save=True)


def _count(value: object) -> int:
    if not isinstance(value, int):
        raise TypeError(f"expected a number of runs, found {value!r}")
    return value


def _compare(control: Arm, variant: Arm, runs: int, options: ABOptions, entry: dict[str, object]) -> None:
    try:
        result = confidence(control, variant, options) if options.confidence else exploratory(
            control, variant, runs, options)
    except ArmError as exc:
        entry["error"] = str(exc)
    except Exception as exc:  # noqa: BLE001 -- a bug here must not turn into an INTERNALERROR
        entry["error"] = f"the comparison failed: {type(exc).__name__}: {exc}"
    else:
        entry.update(result)
        entry["runs"] = {"control": [observation(r) for r in control.first(_count(result["runs_per_arm"]))],
                         "variant": [observation(r) for r in variant.first(_count(result["variant_runs"]))]}
    try:
        entry["notes"] = variant.finish()
    except OSError as exc:
        entry["notes"] = [f"the variant's cassette could not be written: {exc}"]


def compare_case(runtime: ProjectRuntime, case: ComparedCase, outcome: CaseOutcome, base: str,
                 variants: list[str], options: ABOptions) -> list[dict[str, object]]:
    """Compare ``base`` with each of ``variants`` on ``case``; one entry per variant.

    The control arm is shared: a run of the control counts for every variant. Errors
    (an arm that cannot run) are reported in the entry, never raised: the ordinary
    verdict of the case is already final and the comparison must not touch it.
    """
    assert case.spec.resolved is not None  # the plugin compares valid cases only
    control = Arm(runtime, case, base, control_models(runtime, case), pool=_ordinary_pool(outcome))
    runs = max(int(case.spec.resolved["runs"]), options.min_runs)
    entries = []
    for name in variants:
        entry = _entry(case, base, name, options)
        entries.append(entry)
        if outcome.setup_error is not None or outcome.infrastructure_error is not None:
            entry["error"] = f"the case did not run: {outcome.setup_error or outcome.infrastructure_error}"
            continue
        _compare(control, variant_arm(runtime, case, name), runs, options, entry)
    return entries
