"""Running a case: ``runs`` invocations (concurrent, bounded), builders, mocks,
assertions, and the threshold verdict → ``CaseOutcome``.

A case comes from a suite (``ProjectRuntime.run_case``) or from Python (the ``connic``
fixture, ``ProjectRuntime.execute``); both become a ``CaseTarget`` (``execution/target.py``) (the resolved record Connic's SDK produces, compiled
expressions, the models) and run through the same ``CaseRun``.
"""

from __future__ import annotations

import asyncio
import tempfile
import types
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_connic.checks.compiled import CompiledCase, ResolvedCase
from pytest_connic.checks.evaluate import evaluate_run
from pytest_connic.execution import builders
from pytest_connic.execution.concurrency import RunGate, Ticket, case_concurrency, gate_for
from pytest_connic.execution.executors import ReusingDaemonExecutor
from pytest_connic.execution.interruption import StopSignal
from pytest_connic.execution.loop import CaseLoop
from pytest_connic.execution.outcomes import suite_outcome
from pytest_connic.execution.target import CaseTarget
from pytest_connic.models.base import RunModelSource
from pytest_connic.project.load import ProjectError
from pytest_connic.project.loaded import LoadedProject
from pytest_connic.project.located import relative
from pytest_connic.records.events import DivergenceNoteEvent
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord
from pytest_connic.runtime import placeholders
from pytest_connic.runtime.clock import RunClock
from pytest_connic.runtime.hosted import HostedSettings
from pytest_connic.runtime.invocation import Invocation, output_text
from pytest_connic.runtime.mocks import MockSet, ModuleLoadError, load_fresh
from pytest_connic.runtime.payload import FilesError, load_fixtures
from pytest_connic.runtime.services import RuntimeServices
from pytest_connic.runtime.signals import InfrastructureFailure, RunFailed, UserCodeEnded
from pytest_connic.runtime.state import RunScope
from pytest_connic.usertb import TracebackData, for_record, import_in, import_traceback, masked

if TYPE_CHECKING:
    from pytest_connic.execution.isolation.pool import Lease, WorkerPool
    from pytest_connic.execution.models import ModelSource
    from pytest_connic.history.budget import Budget
    from pytest_connic.runtime.ports import Host
    from pytest_connic.secrets import Masker
    from pytest_connic.suite.loader import CaseSpec, Suite

__all__ = ["CaseRun", "ProjectRuntime", "ReusingDaemonExecutor", "RunListener", "RuntimeOptions"]

STRICT_FLAGS = ("strict_mocks", "strict_hook_mocks", "strict_middleware_mocks", "strict_guardrail_mocks")

#: called with ``(outcome, record)`` as each run of a case finishes (``-v`` progress)
RunListener = Callable[[CaseOutcome, RunRecord], None]


@dataclass(frozen=True)
class RuntimeOptions:
    """What a project's runtime needs of the session's settings."""

    concurrency: int  #: runs of one case executing at once
    early_stop: bool  #: stop starting runs once the verdict is decided
    env: str | None  #: ``--connic-env`` (names the data folder of the local services)
    models: ModelSource
    #: where user code runs: ``process`` (a worker process leased per run) or ``none`` (in-process)
    isolation: str = "process"
    #: the address-space limit of a worker process in MiB (``connic_worker_memory_mb``)
    worker_memory_mb: int | None = None
    #: Connic's hosted services locally: the guardrail judge model, unjudged checks
    hosted: HostedSettings = field(default_factory=HostedSettings)
    #: ``--connic-mcp-url NAME=URL``: MCP servers pointed at another URL (runtime/mcp.py)
    mcp_urls: Mapping[str, str] = field(default_factory=dict)
    #: ``--connic-budget-tokens`` / ``--connic-budget-cost``: the session's shared ledger
    budget: Budget | None = None


#: what a worker runs to import a module of the project, and to describe an agent as the SDK
#: loads it for real (``project/loaded.py``), by reference
_WORKER_IMPORT = ("module", "pytest_connic.project.loaded", "worker_import")
_WORKER_DESCRIBE = ("module", "pytest_connic.project.loaded", "worker_describe")


class ProjectRuntime:
    """One project's runtime within a session: services, models, and the case loop."""

    def __init__(self, project: LoadedProject, options: RuntimeOptions, *, masker: Masker, host: Host,
                 run_listeners: Sequence[RunListener] = (), stop: StopSignal | None = None) -> None:
        """``stop``: the session's stop request (a real Ctrl-C or SIGTERM): no run starts after
        it, the runs in flight are cancelled and their ``cleanup()`` still runs."""
        placeholders.install()
        self.stop = stop if stop is not None else StopSignal()
        self.project = project
        self.options = options
        self.masker = masker
        #: the session's listeners (the list itself: a listener registered later is called too)
        self.run_listeners = run_listeners
        self._data_dir = tempfile.TemporaryDirectory(prefix="connic-data-")
        env = options.env or "default"
        self.services = RuntimeServices(project, data_dir=Path(self._data_dir.name) / env, masker=masker, host=host)
        self.services.hosted = options.hosted
        self.services.mcp_urls = dict(options.mcp_urls)
        placeholders.rebind_modules(project.modules())
        self.executor = ReusingDaemonExecutor()
        #: the event loop the cases run on, kept from case to case (``execution/loop.py``)
        self.loop = CaseLoop()
        self.pool: WorkerPool | None = None
        #: agents a worker could not describe (a crash, a hang): the message each of their cases gets
        self._undescribed: dict[str, str] = {}
        if options.isolation == "process":
            from pytest_connic.execution.isolation.pool import DEFAULT_MEMORY_MB, WorkerPool

            self.pool = WorkerPool(project.root, size=options.concurrency,
                                   memory_mb=options.worker_memory_mb or DEFAULT_MEMORY_MB)

    async def describe(self, agent_name: str, timeout_s: float) -> None:
        """Under process isolation, before ``agent_name`` (and the stages it runs) first runs: a
        worker imports its modules and describes it as the SDK loads it for real, which the static
        project adopts (``LoadedProject.adopt``: exact tool schemas, import errors, middleware that
        fails to load). ``ProjectError``: the agent's modules fail to load, or a worker could not
        import one (a crash; a hang, bounded by ``timeout_s``): the message names the module."""
        from pytest_connic.execution.isolation.pool import WorkerSpawnError, WorkerStartError

        project = self.project
        if self.pool is None or not project.static:
            return
        names = self._reachable(agent_name)
        undescribed = [name for name in names if name not in project.described]
        for name in names:
            if name in self._undescribed:
                raise ProjectError(self._undescribed[name])
            if name in project.described:
                continue
            doing = [f"loading agent '{name}'"]
            lease = self.pool.lease(timeout_s)
            failure = None
            try:  # the worker's start has its own bound (the pool's); the imports then get timeout_s
                finished, _ = await self.stop.race(lease.acquire())
                if finished:
                    finished, _ = await self.stop.race(asyncio.wait_for(self._describe_one(lease, name, doing),
                                                                        timeout_s))
            except asyncio.TimeoutError:  # a hang: each case waits its own timeout_s
                failure = f"{doing[-1]} did not finish within {timeout_s:g}s (timeout_s)"
            except WorkerSpawnError:  # no process could start: the case's infrastructure error
                raise
            except WorkerStartError as exc:
                failure = str(exc)
            except UserCodeEnded as exc:  # an exit or a crash at import: the agent's later cases are told at once
                failure = self._undescribed[name] = f"the Connic project failed to load: {exc}"
            except InfrastructureFailure as exc:  # a worker after a crash could not start (``Lease.call``)
                raise WorkerSpawnError(str(exc)) from None
            except RunFailed as exc:
                failure = str(exc)
            else:
                if not finished:
                    return
            finally:
                await lease.release()
            if failure is not None:
                raise ProjectError(failure if failure.startswith("the Connic project") else
                                   f"the Connic project failed to load: {failure}")
        errors = [e for name in names for e in project.import_errors_for(name)]
        if not errors and undescribed:  # imported without trouble: the template imports them once for every later run
            self.pool.preload([module for name in undescribed for module, _ in project.modules_of(name)], timeout_s)
        if errors:
            raise ProjectError("the Connic project failed to load:\n" + "\n".join(f"  {e}" for e in dict.fromkeys(errors)))

    async def _describe_one(self, lease: Lease, name: str, doing: list[str]) -> None:
        from pytest_connic.project.loaded import AgentReport, UserImportError

        root = str(self.project.root)
        for module, path in self.project.modules_of(name):
            doing.append(f"importing {relative(self.project.root, path)}")
            try:
                await lease.call(_WORKER_IMPORT, doing[-1], (root, module), {})
            except UserImportError:  # the agent's load error, from describing it
                pass
        doing.append(f"loading agent '{name}'")
        report = AgentReport.from_data(await lease.call(_WORKER_DESCRIBE, doing[-1], (root, name), {}))
        self.project.adopt(name, report)

    def _reachable(self, agent_name: str) -> list[str]:
        """``agent_name`` and the agents its stages name (sequential agents), transitively."""
        found: list[str] = []
        todo = [agent_name]
        while todo:
            name = todo.pop()
            agent = self.project.agents.get(name)
            if name in found or agent is None:
                continue
            found.append(name)
            todo.extend(str(n) for n in getattr(agent.config, "agents", None) or [])
        return found

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        self.loop.close()
        self.executor.shutdown()
        self.services.close()
        self._data_dir.cleanup()

    def models_for(self, suite: Suite, case: ResolvedCase) -> RunModelSource:
        """The case's models: the user's hook, cassettes, or live providers."""
        from pytest_connic.execution.models import case_models

        return case_models(self.options.models, self.services, suite, case)

    def run_case(self, suite: Suite, spec: CaseSpec, nodeid: str) -> CaseOutcome:
        """Run a suite case."""
        assert spec.resolved is not None and spec.compiled is not None
        outcome = suite_outcome(nodeid, suite, spec)
        target = CaseTarget(suite.agent_name, spec.resolved, spec.compiled,
                            self.models_for(suite, spec.resolved), outcome)
        return self.execute(target)

    def execute(self, target: CaseTarget) -> CaseOutcome:
        """Run every run of ``target`` and fill its outcome."""
        self.loop.run(CaseRun(self, target, self.executor).run())
        return target.outcome


class CaseRun:
    """The runs of one case."""

    def __init__(self, runtime: ProjectRuntime, target: CaseTarget, executor: Executor, *,
                 early_stop: bool | None = None, run_listeners: Sequence[RunListener] | None = None) -> None:
        """``early_stop`` and ``run_listeners`` default to the runtime's (an A/B arm has neither)."""
        self.runtime = runtime
        self.services = runtime.services
        self.target = target
        self.agent_name = target.agent_name
        self.case: ResolvedCase = target.case
        self.compiled: CompiledCase = target.compiled
        self.outcome = target.outcome
        self.executor = executor
        #: runs at once: the agent's ``max_concurrent_runs`` (Connic's default 1) and --connic-concurrency
        self.concurrency = case_concurrency(runtime.project.agents, target.agent_name, runtime.options.concurrency)
        self.early_stop = runtime.options.early_stop if early_stop is None else early_stop
        self.run_listeners = runtime.run_listeners if run_listeners is None else run_listeners
        self.root = runtime.project.root
        self.fixtures: list[dict[str, str]] = []
        self.models: RunModelSource = target.models
        self.gate: RunGate | None = None  #: the agent's ``concurrency`` key rule (set in ``run``)
        self.tickets: dict[int, Ticket] = {}

    async def run(self) -> None:
        from pytest_connic.execution.isolation.pool import WorkerSpawnError

        try:
            await self.runtime.describe(self.agent_name, float(self.case["timeout_s"]))
        except WorkerSpawnError as exc:  # the machine's trouble: an infrastructure error (exit 2)
            self.outcome.records = [RunRecord(run_id=f"worker-{i}", agent_name=self.agent_name, index=i, status="failed",
                                              error=str(exc), infrastructure_error=str(exc))
                                    for i in range(self.outcome.runs)]
            return
        try:
            names = list(self.case.get("files") or [])
            self.fixtures = load_fixtures(self.root, names) if names else []
            self._check_modules()
        except (FilesError, ModuleLoadError) as exc:
            self.outcome.setup_error = str(exc)
            return
        agent = self.runtime.project.agents.get(self.agent_name)
        self.gate = gate_for(self.agent_name, agent.config) if agent is not None else None
        semaphore = asyncio.Semaphore(self.concurrency)
        records: list[RunRecord | None] = [None] * self.outcome.runs
        tasks = []
        budget_spent = False
        for index in range(self.outcome.runs):
            await semaphore.acquire()
            reason = self._decided(records)
            budget_spent = reason is None and self._budget_spent()
            if reason is not None or budget_spent or self.runtime.stop.is_set():
                semaphore.release()
                if reason is not None:
                    self._skip_rest(records, index, reason)
                elif budget_spent:
                    self._skip_rest(records, index, "")
                break
            if self.gate is not None and not self.case.get("builder"):  # arrives in index order
                self.tickets[index] = self.gate.arrive(index, self.case.get("payload"))
            tasks.append(asyncio.ensure_future(self._guarded(index, records, semaphore)))
        await asyncio.gather(*tasks)
        if budget_spent:  # the runs not started were skipped with a reason set here
            self._budget_verdict(records)
        self._mark_interrupted(records)
        self.outcome.records = [r for r in records if r is not None]
        replayed = getattr(self.models, "replayed", None)
        if replayed is not None:
            self.outcome.replayed_runs, self.outcome.recorded_runs = replayed
        save = getattr(self.models, "save", None)
        if save is not None:
            save(interrupted=self.outcome.interrupted)
            self.outcome.recording_error = getattr(self.models, "unrecorded", None)

    def _check_modules(self) -> None:
        builder, mocks = self.case.get("builder"), self.case.get("mocks")
        if builder:
            path = builders.builder_path(self.root, builder)
            if not path.is_file():
                raise ModuleLoadError(f"builder '{builder}': tests/builders/{path.name} does not exist")
        if mocks:
            path = builders.mocks_path(self.root, mocks)
            if not path.is_file():
                raise ModuleLoadError(f"mocks '{mocks}': tests/mocks/{path.name} does not exist")

    def _decided(self, records: list[RunRecord | None]) -> str | None:
        return self._verdict(records) if self.early_stop else None

    def _verdict(self, records: list[RunRecord | None]) -> str | None:
        """The threshold's decision from the runs finished so far (None: not decided yet)."""
        from pytest_connic.execution.earlystop import decision

        done = [r for r in records if r is not None and not r.skipped]
        passed = sum(1 for r in done if r.passed)
        return decision(passed, len(done) - passed, self.outcome.runs, self.outcome.success_threshold)

    def _budget_spent(self) -> bool:
        budget = self.runtime.options.budget
        return budget is not None and budget.spent()

    def _budget_verdict(self, records: list[RunRecord | None]) -> None:
        """The budget was spent before every run started: the runs that finished keep the verdict
        when they decide it (as an early stop would), else the case is left out (skipped)."""
        from pytest_connic.history.budget import BUDGET_SPENT

        decided = self._verdict(records)
        if decided is not None:
            self.outcome.early_stop_reason = f"{BUDGET_SPENT}; {decided}"
        else:
            self.outcome.early_stop_reason = BUDGET_SPENT
            self.outcome.left_out = BUDGET_SPENT

    def _mark_interrupted(self, records: list[RunRecord | None]) -> None:
        """After a stop request: the runs never started are cancelled, the case interrupted."""
        stop = self.runtime.stop
        if not stop.is_set():
            return
        for index, record in enumerate(records):
            if record is None:
                records[index] = RunRecord(run_id=f"interrupted-{index}", agent_name=self.agent_name, index=index,
                                           status="cancelled", error=stop.reason, skipped=True)
        if any(r is not None and r.error == stop.reason for r in records):
            self.outcome.interrupted = stop.reason

    def _skip_rest(self, records: list[RunRecord | None], start: int, reason: str) -> None:
        self.outcome.early_stop_reason = reason
        self.outcome.skipped_runs = self.outcome.runs - start
        for index in range(start, self.outcome.runs):
            records[index] = RunRecord(run_id=f"skipped-{index}", agent_name=self.agent_name, index=index,
                                       status="cancelled", skipped=True)

    async def _guarded(self, index: int, records: list[RunRecord | None], semaphore: asyncio.Semaphore) -> None:
        try:
            try:
                record = records[index] = await self.run_one(index)
                budget = self.runtime.options.budget
                if budget is not None:
                    budget.charge(record.input_tokens + record.output_tokens, record.cost)
            finally:
                ticket = self.tickets.pop(index, None)
                if ticket is not None and self.gate is not None:
                    self.gate.release(ticket)
            for listener in self.run_listeners:
                listener(self.outcome, record)
        finally:
            semaphore.release()

    async def _admitted(self, index: int) -> RunRecord | None:
        """Wait for run ``index``'s turn at the agent's gate; the record of a run the gate cancels
        (``drop``, ``coalesce``): ``cancelled``, a run that did not pass."""
        ticket = self.tickets.get(index)
        if ticket is None or self.gate is None:
            return None
        reason = await self.gate.wait(ticket)
        if reason is None:
            return None
        record = RunRecord(run_id=f"concurrency-{index}", agent_name=self.agent_name, index=index,
                           status="cancelled", error=reason)
        record.failures.append(reason)
        return record

    def _location(self) -> tuple[Path, int]:
        """The suite file (or the Python test calling ``connic.run``) and line of the case; a path
        relative to the project, as every message names it."""
        return Path(self.outcome.suite_path), self.outcome.line

    async def run_one(self, index: int) -> RunRecord:
        """One run: fresh modules, builder, the agent, cleanup, assertions."""
        dropped = await self._admitted(index)
        if dropped is not None:
            return dropped
        context: dict[str, object] = {}
        mocks_module = self._load("mocks", index)
        builder_module = self._load("builder", index)
        if isinstance(mocks_module, RunRecord):
            return mocks_module
        if isinstance(builder_module, RunRecord):
            return builder_module
        run_models = self.models.for_run(index)
        scope = RunScope(
            services=self.services, case=self.case, run_index=index, builder_context=context,
            mocks=MockSet(mocks_module, {f: bool(self.case.get(f)) for f in STRICT_FLAGS}),
            models=run_models, executor=self.executor, approvals=list(self.compiled.approvals),
            strict_approvals=bool(self.case.get("strict_approval_decisions")),
            clock=RunClock(virtual=not getattr(self.models, "live", False)),  # live runs really wait
            location=self._location(), nodeid=self.outcome.nodeid or None,
        )
        lease = await self._lease(builder_module is not None, index)
        if isinstance(lease, RunRecord):
            return lease
        scope.runner = lease
        world = getattr(run_models, "world", None)  # a model source of cassettes records/replays one
        scope.world = world(scope.clock.now()) if world is not None else None
        try:
            record, cleanup_failure = await self._invoke(scope, builder_module, context, lease)
        finally:
            if lease is not None:
                await lease.release()
        prices = getattr(self.models, "prices", None)
        if prices is not None:  # before the budget, the A/B arms and the reports read the cost
            prices.price_run(record)
        completed = record.status == "completed" and not record.failures and not record.stopped
        divergences = run_models.finish(completed=completed)
        record.failures.extend(divergences)
        # ``name`` is the label of the event's line in the trace tree of a failure report
        record.events.extend(DivergenceNoteEvent(name=f"note: {n}", text=n) for n in getattr(run_models, "notes", []))
        if not record.failures and record.infrastructure_error is None:
            if self.target.evaluate:
                record.failures.extend(evaluate_run(record, self.compiled.checks, context))
            record.failures.extend(self._unused_approvals(scope))
        if cleanup_failure:
            record.failures.append(cleanup_failure)
            if record.error_traceback is None and not any(c.traceback for c in record.tool_calls):
                record.error_traceback = self._user_traceback(getattr(cleanup_failure, "raised", None),
                                                              "builder cleanup()")
        return record

    def _user_traceback(self, exc: BaseException | None, origin: str) -> TracebackData | None:
        """What the run record keeps of user code's traceback (``usertb.for_record``), masked."""
        return None if exc is None else for_record(exc, self.root, self.runtime.masker.text, origin)

    async def _lease(self, builds: bool, index: int = 0) -> Lease | RunRecord | None:
        """The run's worker process (``--connic-isolation=process``). Taken at the run's first call
        of user code (``Lease.call``: a tool, a hook, middleware, a guardrail, a mock), so a run
        that calls none (an LLM agent with predefined tools only, a replayed turn) takes no worker
        at all; with a builder (``builds``: its ``build()`` is the run's first call, before the
        run's clock starts), taken here. A worker that cannot load the project within the case's
        ``timeout_s`` (a hanging import) or is stopped meanwhile is that run's failure, and one that
        cannot start at all (no process, a failed fork) its infrastructure error."""
        from pytest_connic.execution.isolation.pool import WorkerSpawnError, WorkerStartError

        pool = self.runtime.pool
        if pool is None:
            return None
        lease = pool.lease(float(self.case["timeout_s"]))
        if not builds:
            return lease
        spawn = False
        try:
            finished, _ = await self.runtime.stop.race(lease.acquire())
        except WorkerStartError as exc:
            finished, error, spawn = True, str(exc), isinstance(exc, WorkerSpawnError)
        else:
            if finished:
                return lease
            error = str(self.runtime.stop.reason)
        await lease.release()
        record = RunRecord(run_id=f"worker-{index}", agent_name=self.agent_name, index=index,
                           status="failed" if finished else "cancelled", error=error)
        if spawn:  # no process could start: the machine's, an infrastructure error (exit 2)
            record.infrastructure_error = error
        else:  # the project did not load in time, or at all: the suite author's (exit 1)
            record.failures.append(error)
        return record

    def _load(self, kind: str, index: int) -> types.ModuleType | RunRecord | None:
        name = self.case.get("mocks") if kind == "mocks" else self.case.get("builder")
        if not name:
            return None
        try:
            static = self.runtime.project.static
            if kind == "builder":
                return builders.load_builder(self.root, name, static=static)
            return load_fresh(builders.mocks_path(self.root, name), f"mocks '{name}'", static=static)
        except ModuleLoadError as exc:
            record = RunRecord(run_id=f"setup-{index}", agent_name=self.agent_name, index=index,
                               status="failed", error=str(exc))
            record.failures.append(str(exc))
            trace = import_in(str(exc))  # the module raised at import: its traceback
            record.error_traceback = masked(trace, self.runtime.masker.text) if trace else None
            return record

    async def _invoke(self, scope: RunScope, builder_module: types.ModuleType | None, context: dict[str, object],
                      lease: Lease | None = None) -> tuple[RunRecord, str | None]:
        payload: object = self.case.get("payload")
        files = self.fixtures
        token = placeholders.BUILDER_SERVICES.set(self.services)
        try:
            if builder_module is not None:
                try:
                    finished, built = await self.runtime.stop.race(builders.build(
                        scope.call, builder_module, context, self.case, timeout_s=float(self.case["timeout_s"])))
                    if not finished:
                        raise builders.BuilderError(str(self.runtime.stop.reason))
                except builders.BuilderError as exc:
                    record = RunRecord(run_id=f"build-{scope.run_index}", agent_name=self.agent_name,
                                       index=scope.run_index, status="failed", error=str(exc))
                    record.failures.append(str(exc))
                    trace = import_traceback(exc)  # the builder's module raised at import, in the worker
                    record.error_traceback = (masked(trace, self.runtime.masker.text) if trace else
                                              self._user_traceback(exc.__cause__, "builder build()"))
                    if lease is not None:  # a fresh worker after a kill, started outside cleanup's bound
                        await lease.acquire()
                    failure = await builders.cleanup(scope.call, builder_module,
                                                     {"input": None, "output": None, "context": {}}, context, self.case,
                                                     timeout_s=float(self.case["timeout_s"]))
                    return record, failure
                payload, files = builders.merge_files(built, files)
                if self.gate is not None:  # the key is read from the payload the builder built
                    self.tickets[scope.run_index] = self.gate.arrive(scope.run_index, payload)
                    dropped = await self._admitted(scope.run_index)
                    if dropped is not None:
                        failure = await builders.cleanup(
                            scope.call, builder_module, {"input": payload, "output": None, "context": {}}, context,
                            self.case, timeout_s=float(self.case["timeout_s"]))
                        return dropped, failure
            invocation = Invocation(scope, self.agent_name, payload, files, root=True,
                                    timeout_s=float(self.case["timeout_s"]), timeout_label="timeout_s")
            failure = None
            try:
                finished, result = await self.runtime.stop.race(invocation.run())
                record = result if finished and result is not None else self._cancelled(invocation.record)
            finally:  # also when the run is cancelled (Ctrl-C): the builder's fixtures are released
                if builder_module is not None:
                    done = invocation.record
                    run = {"input": done.input, "output": output_text(done.output_raw) if done.output_raw is not None
                           else None, "context": done.run_context}
                    if lease is not None:  # a fresh worker after a kill, started outside cleanup's bound
                        await lease.acquire()
                    failure = await builders.cleanup(scope.call, builder_module, run, context, self.case,
                                                     timeout_s=float(self.case["timeout_s"]))
            return record, failure
        finally:
            placeholders.BUILDER_SERVICES.reset(token)

    def _cancelled(self, record: RunRecord) -> RunRecord:
        """A run whose agent was cancelled by the stop request (its cleanup still runs)."""
        record.status, record.error = "cancelled", self.runtime.stop.reason
        return record

    def _unused_approvals(self, scope: RunScope) -> list[str]:
        if not scope.strict_approvals:
            return []
        unused = [d for d in scope.approvals if d.index not in scope.approvals_used]
        if not unused:
            return []
        listed = ", ".join(f"#{d.index} {d.tool} ({d.decision})" for d in unused)
        return [f"strict_approval_decisions: {len(unused)} approval decision(s) were never used: {listed}"]
