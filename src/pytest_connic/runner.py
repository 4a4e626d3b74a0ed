"""Running a case: ``runs`` invocations (concurrent, bounded), builders, mocks,
assertions, and the threshold verdict → ``CaseOutcome``."""

from __future__ import annotations

import asyncio
import math
import tempfile
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import builders
from .assertions import evaluate_run
from .compiled import CompiledCase
from .mocks import MockSet, ModuleLoadError, load_fresh
from .project import RuntimeProject
from .records import CaseOutcome, RunRecord
from .reports.failure import failure_text, infrastructure_text
from .runtime import placeholders
from .runtime.invocation import Invocation, output_text
from .runtime.payload import FixtureError, load_fixtures
from .runtime.scope import RunScope
from .runtime.services import ProjectServices

if TYPE_CHECKING:
    from .collect import CaseItem
    from .state import ConnicSession
    from .suite import CaseSpec, Suite  # noqa: F401

STRICT_FLAGS = ("strict_mocks", "strict_hook_mocks", "strict_middleware_mocks", "strict_guardrail_mocks")


class ProjectRuntime:
    """One project's runtime within a session: services, models, and the case loop."""

    def __init__(self, session: ConnicSession, project: RuntimeProject) -> None:
        placeholders.install()
        self.session = session
        self.project = project
        self._data_dir = tempfile.TemporaryDirectory(prefix="connic-data-")
        env = session.settings.env or "default"
        config = session.config
        self.services = ProjectServices(
            project,
            data_dir=Path(self._data_dir.name) / env,
            masker=session.masker,
            hook=config.hook,
            config=config,
            warn_once=session.warn_once,
        )
        placeholders.rebind_modules(project.modules())

    def close(self) -> None:
        self.services.close()
        self._data_dir.cleanup()

    def models_for(self, suite: Suite, case: dict[str, Any]) -> Any:
        """The case's models: the user's hook, cassettes, or live providers."""
        from .models.factory import case_models

        return case_models(self.session, self.services, suite, case)

    def run_case(self, suite: Suite, spec: CaseSpec, nodeid: str) -> CaseOutcome:
        assert spec.resolved is not None and spec.compiled is not None
        outcome = CaseOutcome(
            nodeid=nodeid, suite_path=suite.relpath, line=spec.line, agent_name=suite.agent_name,
            case_name=spec.name, runs=spec.resolved["runs"], success_threshold=spec.resolved["success_threshold"],
        )
        executor = ThreadPoolExecutor(max_workers=max(4, self.session.settings.concurrency * 2),
                                      thread_name_prefix="connic-run")
        try:
            asyncio.run(CaseRun(self, suite, spec, outcome, executor).run())
        finally:
            executor.shutdown(wait=False, cancel_futures=True)
        return outcome


class CaseRun:
    """The runs of one case."""

    def __init__(self, runtime: ProjectRuntime, suite: Suite, spec: CaseSpec, outcome: CaseOutcome,
                 executor: ThreadPoolExecutor) -> None:
        self.runtime = runtime
        self.services = runtime.services
        self.suite = suite
        self.case: dict[str, Any] = spec.resolved or {}
        self.compiled: CompiledCase = spec.compiled  # type: ignore[assignment]
        self.outcome = outcome
        self.executor = executor
        self.settings = runtime.session.settings
        self.root = runtime.project.root
        self.fixtures: list[dict[str, str]] = []
        self.models: Any = None
        agent = self.services.agent(suite.agent_name)
        limits = [float(self.case["timeout_s"])] + ([float(agent.config.timeout)] if agent.config.timeout else [])
        self.timeout_s = min(limits)

    async def run(self) -> None:
        try:
            self.fixtures = load_fixtures(self.root, list(self.case.get("files") or []))
            self._check_modules()
        except (FixtureError, ModuleLoadError) as exc:
            self.outcome.setup_error = str(exc)
            return
        self.models = self.runtime.models_for(self.suite, self.case)
        semaphore = asyncio.Semaphore(self.settings.concurrency)
        records: list[RunRecord | None] = [None] * self.outcome.runs
        tasks = []
        for index in range(self.outcome.runs):
            await semaphore.acquire()
            reason = self._decided(records)
            if reason is not None:
                semaphore.release()
                self._skip_rest(records, index, reason)
                break
            tasks.append(asyncio.ensure_future(self._guarded(index, records, semaphore)))
        await asyncio.gather(*tasks)
        self.outcome.records = [r for r in records if r is not None]
        save = getattr(self.models, "save", None)
        if save is not None:
            save()

    def _check_modules(self) -> None:
        if self.case.get("builder"):
            path = builders.builder_path(self.root, self.case["builder"])
            if not path.is_file():
                raise ModuleLoadError(f"builder '{self.case['builder']}': tests/builders/{path.name} does not exist")
        if self.case.get("mocks"):
            path = builders.mocks_path(self.root, self.case["mocks"])
            if not path.is_file():
                raise ModuleLoadError(f"mocks '{self.case['mocks']}': tests/mocks/{path.name} does not exist")

    def _decided(self, records: list[RunRecord | None]) -> str | None:
        if not self.settings.early_stop:
            return None
        done = [r for r in records if r is not None]
        needed = math.ceil(self.outcome.success_threshold * self.outcome.runs / 100)
        passed = sum(1 for r in done if r.passed)
        failed = len(done) - passed
        if passed >= needed:
            return f"threshold reached ({passed} of {needed} needed runs passed)"
        if failed > self.outcome.runs - needed:
            return f"threshold out of reach ({failed} runs failed, at most {self.outcome.runs - needed} may)"
        return None

    def _skip_rest(self, records: list[RunRecord | None], start: int, reason: str) -> None:
        self.outcome.early_stop_reason = reason
        self.outcome.skipped_runs = self.outcome.runs - start
        for index in range(start, self.outcome.runs):
            records[index] = RunRecord(run_id=f"skipped-{index}", agent_name=self.suite.agent_name, index=index,
                                       status="cancelled", skipped=True)

    async def _guarded(self, index: int, records: list[RunRecord | None], semaphore: asyncio.Semaphore) -> None:
        try:
            records[index] = await self.run_one(index)
        finally:
            semaphore.release()

    async def run_one(self, index: int) -> RunRecord:
        """One run: fresh modules, builder, the agent, cleanup, assertions."""
        context: dict[str, Any] = {}
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
        )
        record, cleanup_failure = await self._invoke(scope, builder_module, context)
        completed = record.status == "completed" and not record.failures
        divergences = run_models.finish(completed=completed)
        record.failures.extend(divergences)
        record.events.extend({"type": "note", "text": n} for n in getattr(run_models, "notes", []))
        if not record.failures and record.infrastructure_error is None:
            record.failures.extend(evaluate_run(record, self.compiled.checks, context))
            record.failures.extend(self._unused_approvals(scope))
        if cleanup_failure:
            record.failures.append(cleanup_failure)
        return record

    def _load(self, kind: str, index: int) -> types.ModuleType | RunRecord | None:
        name = self.case.get("mocks" if kind == "mocks" else "builder")
        if not name:
            return None
        try:
            if kind == "builder":
                return builders.load_builder(self.root, name)
            return load_fresh(builders.mocks_path(self.root, name), f"mocks '{name}'")
        except ModuleLoadError as exc:
            record = RunRecord(run_id=f"setup-{index}", agent_name=self.suite.agent_name, index=index,
                               status="failed", error=str(exc))
            record.failures.append(str(exc))
            return record

    async def _invoke(self, scope: RunScope, builder_module: Any, context: dict[str, Any]) -> tuple[RunRecord, str | None]:
        payload: Any = self.case.get("payload")
        files = self.fixtures
        token = placeholders.BUILDER_SERVICES.set(self.services)
        try:
            if builder_module is not None:
                try:
                    built = await builders.build(scope.call, builder_module, context, self.case)
                except builders.BuilderError as exc:
                    record = RunRecord(run_id=f"build-{scope.run_index}", agent_name=self.suite.agent_name,
                                       index=scope.run_index, status="failed", error=str(exc))
                    record.failures.append(str(exc))
                    failure = await builders.cleanup(scope.call, builder_module,
                                                     {"input": None, "output": None, "context": {}}, context, self.case)
                    return record, failure
                payload, files = builders.merge_files(built, files)
            invocation = Invocation(scope, self.suite.agent_name, payload, files, root=True, timeout_s=self.timeout_s)
            record = await invocation.run()
            failure = None
            if builder_module is not None:
                run = {"input": record.input, "output": output_text(record.output_raw) if record.output_raw is not None
                       else None, "context": record.run_context}
                failure = await builders.cleanup(scope.call, builder_module, run, context, self.case)
            return record, failure
        finally:
            placeholders.BUILDER_SERVICES.reset(token)

    def _unused_approvals(self, scope: RunScope) -> list[str]:
        if not scope.strict_approvals:
            return []
        unused = [d for d in scope.approvals if d.index not in scope.approvals_used]
        if not unused:
            return []
        listed = ", ".join(f"#{d.index} {d.tool} ({d.decision})" for d in unused)
        return [f"strict_approval_decisions: {len(unused)} approval decision(s) were never used: {listed}"]


def run_case_item(session: ConnicSession, item: CaseItem) -> None:
    """Run the case behind ``item`` and raise on a bad verdict."""
    from .collect import CaseFailed, CaseInfrastructureError

    runtime: ProjectRuntime = session.runtime(item.project_root)
    outcome = runtime.run_case(item.suite, item.spec, item.nodeid)
    item.outcome = outcome
    session.outcomes.append(outcome)
    if outcome.infrastructure_error:
        session.infrastructure_errors += 1
        raise CaseInfrastructureError(infrastructure_text(outcome, session.masker), outcome)
    if not outcome.passed:
        raise CaseFailed(failure_text(outcome, session.masker), outcome)
