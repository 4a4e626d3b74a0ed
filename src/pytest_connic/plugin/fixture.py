"""The ``connic`` fixture: run agents of the project from Python tests.

``connic.run(agent, payload, ...)`` runs an agent exactly as a suite case would
(same validation through Connic's ``TestCase`` model, same runtime, builders,
mocks, approvals, timeouts and concurrency) and returns one ``RunRecord`` per run
to assert on in Python. See docs/running.md, "The connic fixture".
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from pytest_connic.project.layout import find_project_root
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.records.run import RunRecord

if TYPE_CHECKING:
    from pytest_connic.execution.case import ProjectRuntime
    from pytest_connic.models.base import Model, RunModels, RunModelSource
    from pytest_connic.plugin.session import ConnicSession

#: the cassette folder of Python tests (under the cassette directory) unless ``cassette=`` says otherwise
DEFAULT_CASSETTE_FOLDER = "python"
_MAX_NAME = 120  #: Connic's limit for a case name


def _fail(message: str) -> NoReturn:
    pytest.fail(message, pytrace=False)


class _GivenRunModels:
    """Every agent invocation of a run answers from the one model given with ``model=``."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.notes: list[str] = []

    def model_for(self, agent_name: str, *, root: bool) -> Model:
        return self.model

    async def external(self, kind: str, name: str, arguments: object,
                       call: Callable[[], Awaitable[object]]) -> object:
        """No cassette: MCP servers, ``api:`` tools and hosted services are called for real."""
        return await call()

    def calls_live(self) -> bool:
        return True

    def finish(self, *, completed: bool) -> list[str]:
        return []


class _GivenModels:
    def __init__(self, model: Model) -> None:
        self.model = model

    def for_run(self, index: int) -> RunModels:
        return _GivenRunModels(self.model)


def _as_model(model: object) -> Model:
    from pytest_connic.models.base import Model
    from pytest_connic.runtime.services import _FunctionModel

    if callable(getattr(model, "complete", None)) and isinstance(model, Model):
        return model
    if callable(model):
        return _FunctionModel(model)
    _fail(
        f"connic.run(model=...): expected an object with `async complete(request)` or a function "
        f"request -> ModelResponse | str, got {type(model).__name__}"
    )


def _payload_text(payload: object) -> str:
    if isinstance(payload, str):
        return payload
    try:
        return json.dumps(payload, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        _fail(f"connic.run(payload=...): a payload must be a string or JSON-serialisable, got "
              f"{type(payload).__name__}: {exc}")


class ConnicRunner:
    """What the ``connic`` fixture returns. ``run()`` runs an agent of the project."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.request = request
        self.config = request.config
        #: the outcome of the last ``run()`` (runs, threshold verdict, records)
        self.last_outcome: CaseOutcome | None = None

    @property
    def session(self) -> ConnicSession:
        from pytest_connic.plugin.session import state

        return state(self.config)

    def project_root(self, project_root: str | os.PathLike[str] | None = None) -> Path:
        """The Connic project: ``project_root`` or the nearest folder with ``agents/`` at or
        above the test file's directory."""
        if project_root is not None:
            root = Path(project_root).resolve()
            if not (root / "agents").is_dir():
                _fail(f"connic.run(project_root={str(project_root)!r}): no agents/ folder there")
            return root
        start = Path(self.request.node.path).resolve().parent
        found = find_project_root(start)
        if found is None:
            _fail(
                f"connic fixture: no Connic project (a folder with agents/) at or above {start}; "
                "pass project_root= to connic.run()"
            )
        return found

    def runtime(self, project_root: str | os.PathLike[str] | None = None) -> ProjectRuntime:
        """The session's runtime of the project (built once, shared with suite cases)."""
        from pytest_connic.project.load import ProjectError

        root = self.project_root(project_root)
        try:
            runtime = self.session.runtimes.runtime(root)
        except ProjectError as exc:
            problem = str(exc)
        else:
            return runtime
        _fail(f"Connic project {root}: {problem}")

    def run(
        self,
        agent: str,
        payload: str | dict[str, Any] | list[Any] | None = None,
        *,
        runs: int = 1,
        success_threshold: int = 100,
        mocks: str | None = None,
        files: list[str] | None = None,
        builder: str | None = None,
        builder_args: dict[str, Any] | None = None,
        approval_decisions: list[dict[str, Any]] | None = None,
        strict_mocks: bool = False,
        strict_hook_mocks: bool = False,
        strict_middleware_mocks: bool = False,
        strict_guardrail_mocks: bool = False,
        strict_approval_decisions: bool = False,
        timeout_s: int = 120,
        expected_result: str | None = None,
        expected_tool_calls: list[Any] | None = None,
        expected_tool_call_order: list[str] | None = None,
        expected_no_tool_calls: list[str] | None = None,
        expected_child_agents: dict[str, Any] | None = None,
        model: object | None = None,
        cassette: str | None = None,
        project_root: str | os.PathLike[str] | None = None,
        check: bool = True,
    ) -> list[RunRecord]:
        """Run ``agent`` ``runs`` times; one ``RunRecord`` per run, in run order.

        The keyword arguments mean what the suite keys of the same names mean. The model
        is ``model=`` (an object with ``async complete(request)``, or a function of the
        request returning a ``ModelResponse`` or the answer text), else what
        ``pytest_connic_make_model`` supplies, else the cassette
        ``<cassette dir>/<cassette or "python">/<test name>.yaml``.

        With ``check`` (the default) the test fails, with the suite failure report, when
        the runs miss the threshold: a run fails on a cassette problem (missing, out of
        turns, turns left unused), a strictness violation or a builder cleanup verdict,
        and, when any ``expected_*`` is given, on those checks exactly as in a suite. A
        case that cannot start (a missing fixture, builder or mocks module) always fails.
        """
        from pytest_connic.execution.outcomes import new_outcome
        from pytest_connic.execution.target import CaseDefinitionError, CaseTarget, resolve_case

        runtime = self.runtime(project_root)
        self._check_agent(runtime, agent)
        name = self.request.node.name
        fields: dict[str, Any] = {
            "name": name[:_MAX_NAME], "runs": runs, "success_threshold": success_threshold,
            "timeout_s": timeout_s, "files": list(files or []), "builder": builder, "builder_args": builder_args,
            "mocks": mocks, "approval_decisions": list(approval_decisions or []),
            "strict_mocks": strict_mocks, "strict_hook_mocks": strict_hook_mocks,
            "strict_middleware_mocks": strict_middleware_mocks, "strict_guardrail_mocks": strict_guardrail_mocks,
            "strict_approval_decisions": strict_approval_decisions,
        }
        if payload is not None or builder is None:
            fields["payload"] = "" if payload is None else _payload_text(payload)
        expectations = {
            "expected_result": expected_result, "expected_tool_calls": expected_tool_calls,
            "expected_tool_call_order": expected_tool_call_order,
            "expected_no_tool_calls": expected_no_tool_calls, "expected_child_agents": expected_child_agents,
        }
        fields.update({k: v for k, v in expectations.items() if v is not None})
        fields = {k: v for k, v in fields.items() if v is not None}
        problem: str | None = None
        try:
            resolved, compiled = resolve_case(fields, agent)
        except CaseDefinitionError as exc:
            problem = str(exc)
        if problem is not None:  # failed outside the except block: no chained traceback
            _fail(f"connic.run({agent!r}): {problem}")
        where, line = _call_site(self.config.rootpath)
        outcome = new_outcome(self.request.node.nodeid, where, line, agent, name, runs=resolved["runs"],
                              success_threshold=resolved["success_threshold"])
        models = self._models(runtime, model, cassette, name)
        target = CaseTarget(agent, resolved, compiled, models, outcome,
                            evaluate=any(v is not None for v in expectations.values()))
        runtime.execute(target)
        self.last_outcome = outcome
        if outcome.setup_error is not None or (check and not outcome.passed):
            from pytest_connic.reports.failure import failure_text

            _fail(failure_text(outcome, self.session.masker))
        return list(outcome.records)

    def run_one(self, agent: str, payload: str | dict[str, Any] | list[Any] | None = None,
                **kwargs: Any) -> RunRecord:
        """``run()`` with one run; returns its record."""
        if "runs" in kwargs:
            raise TypeError("run_one() runs the agent once; use run(..., runs=N) for more")
        return self.run(agent, payload, **kwargs)[0]

    def _check_agent(self, runtime: ProjectRuntime, agent: str) -> None:
        if agent in runtime.project.agents:
            return
        import difflib

        known = sorted(runtime.project.agents)
        close = difflib.get_close_matches(agent, known, n=3)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        errors = "".join(f"\n  {e}" for e in runtime.project.load_errors)
        _fail(f"connic.run: unknown agent '{agent}'{hint} (agents: {', '.join(known) or 'none'}){errors}")

    def _models(self, runtime: ProjectRuntime, model: object | None, cassette: str | None, name: str) -> RunModelSource:
        if model is not None:
            return _GivenModels(_as_model(model))
        from pytest_connic.execution.models import case_cassette, models_at
        from pytest_connic.models.base import CassetteError

        folder = cassette or DEFAULT_CASSETTE_FOLDER
        source = runtime.options.models
        try:
            path = case_cassette(source, runtime.services, folder, name)
        except CassetteError as exc:
            problem = str(exc)
        else:
            return models_at(source, runtime.services, path, None)
        _fail(f"connic.run(cassette={cassette!r}): {problem}")


def _call_site(rootpath: Path) -> tuple[str, int]:
    """``path``, ``line`` of the test code that called ``run()`` (for the failure summary)."""
    frame = sys._getframe(1)
    here = os.path.normcase(__file__)
    while frame is not None and os.path.normcase(frame.f_code.co_filename) == here:
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return "<unknown>", 0
    filename = Path(frame.f_code.co_filename)
    try:
        shown = filename.resolve().relative_to(rootpath.resolve()).as_posix()
    except ValueError:
        shown = str(filename)
    return shown, frame.f_lineno


def make_runner(request: pytest.FixtureRequest) -> ConnicRunner:
    """The object behind the ``connic`` fixture."""
    return ConnicRunner(request)
