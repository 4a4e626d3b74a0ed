"""Run one case of a Connic project below pytest: no session, no items, the typed outcome back.

As pytest-xdist's ``test_remote.py`` drives one worker, these tests drive the execution layer
(``ProjectRuntime``) directly and assert on the records a run leaves (``CaseOutcome``,
``RunRecord``), not on rendered terminal text.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from helpers.project import ProjectFiles
from pytest_connic.execution.assembly import RunSettings, assemble, run_suite_case
from pytest_connic.execution.case import ProjectRuntime
from pytest_connic.execution.interruption import StopSignal
from pytest_connic.project.apispec import ApiRegistry
from pytest_connic.records.outcome import CaseOutcome
from pytest_connic.runtime import placeholders
from pytest_connic.runtime.ports import Host, NullHost
from pytest_connic.secrets import Masker


def runtime_for(root: Path, *, isolation: str = "none", masker: Masker | None = None,
                stop: StopSignal | None = None, **settings: Any) -> ProjectRuntime:
    """The project's runtime as a session builds it (``execution/assembly.py``); ``settings``:
    fields of ``RunSettings`` (``mode``, ``replay``, ``match_rules``, ``live``, ...); ``stop``: the
    session's stop request (a Ctrl-C), set by the test."""
    return assemble(root, RunSettings(isolation=isolation, **settings), masker=masker, stop=stop)


@contextmanager
def project_runtime(root: Path, **kwargs: Any) -> Iterator[ProjectRuntime]:
    """``runtime_for``, closed afterwards and the SDK's ``connic.tools`` placeholders put back (as
    ``CaseProject.runtime`` does: a test that checks them must not see another test's)."""
    runtime = runtime_for(root, **kwargs)
    try:
        yield runtime
    finally:
        runtime.close()
        placeholders.uninstall()


def run_case(runtime: ProjectRuntime, suite: str, case: str) -> CaseOutcome:
    """Run the case ``case`` of ``tests/<suite>.yaml`` and return its outcome."""
    return run_suite_case(runtime, f"tests/{suite}.yaml", case)


def first_failure(outcome: CaseOutcome) -> str:
    """The first failure of the first failing run (the text a report's first line shows)."""
    for record in outcome.records:
        if record.failures:
            return record.failures[0]
    raise AssertionError(f"no run failed: {[r.status for r in outcome.records]}")


def write_project(root: Path, files: dict[str, str]) -> Path:
    """Write a Connic project's files (``{"agents/a.yaml": "...", ...}``, dedented) under ``root``."""
    import textwrap

    (root / "agents").mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), "utf-8")
    return root


def llm_agent(name: str, prompt: str, tools: list[str]) -> str:
    """The YAML of an LLM agent ``name`` on ``openai/gpt-4o-mini`` with ``prompt`` and ``tools``."""
    return (f'version: "1.0"\nname: {name}\ntype: llm\nmodel: openai/gpt-4o-mini\ndescription: the {name} agent\n'
            f"system_prompt: {prompt}\ntools: [{', '.join(tools)}]\n")


def answer(content: str | None = None, *calls: tuple[str, dict[str, object]]) -> Any:
    """One scripted model turn: tool calls (``(name, arguments)``), or the final ``content``."""
    from pytest_connic.models.base import ModelResponse, ToolCallRequest

    return ModelResponse(content=content, input_tokens=10, output_tokens=2,
                         tool_calls=[ToolCallRequest(f"call_{n}", name, dict(args)) for n, (name, args) in enumerate(calls)])


class Scripted:
    """A provider stand-in for recording: each invocation of an agent answers its turns in order
    (``script[agent]``, a list of ``answer(...)``); the requests it got are kept."""

    def __init__(self, script: dict[str, list[Any]]) -> None:
        self.script = script
        self.requests: list[Any] = []

    def __call__(self, agent_name: str) -> Any:
        turns = iter(self.script[agent_name])
        outer = self

        class Invocation:
            async def complete(self, request: Any) -> Any:
                outer.requests.append(request)
                return next(turns)

        return Invocation()


class HookHost(NullHost):
    """A host that answers as a project's ``pytest_connic_*`` hooks would, from plain functions:
    ``make_model(agent, model, case, run_index)``, ``guardrail(rule, direction, content, context)``,
    ``predefined_tool(name, params, context)`` (each may be None: the runtime's default)."""

    def __init__(self, make_model: Callable[..., object] | None = None, guardrail: Callable[..., object] | None = None,
                 predefined_tool: Callable[..., object] | None = None) -> None:
        super().__init__()
        self._make_model, self._guardrail, self._predefined_tool = make_model, guardrail, predefined_tool

    def make_model(self, agent: Any, model: str, case: Any, run_index: int) -> object | None:
        return self._make_model(agent, model, case, run_index) if self._make_model else None

    def guardrail(self, rule: Any, direction: str, content: str, context: dict[str, object]) -> object | None:
        return self._guardrail(rule, direction, content, context) if self._guardrail else None

    def predefined_tool(self, name: str, params: dict[str, object], context: dict[str, object]) -> object | None:
        return self._predefined_tool(name, params, context) if self._predefined_tool else None


def conftest_hooks(source: str) -> HookHost:
    """The ``HookHost`` of a project ``conftest.py``'s source (such as ``helpers.models.SCRIPTED_MODEL``):
    its ``pytest_connic_make_model``, ``pytest_connic_guardrail`` and ``pytest_connic_predefined_tool``,
    called as pytest would call them (``config`` is None: no snippet here reads it)."""
    import textwrap

    namespace: dict[str, Any] = {}
    exec(compile(textwrap.dedent(source), "<conftest.py>", "exec"), namespace)  # noqa: S102  (the test's own text)

    def hook(name: str) -> Callable[..., object] | None:
        function = namespace.get(f"pytest_connic_{name}")
        return None if function is None else (lambda *args: function(None, *args))

    return HookHost(make_model=hook("make_model"), guardrail=hook("guardrail"), predefined_tool=hook("predefined_tool"))


class CaseProject(ProjectFiles):
    """A Connic project in a temporary folder whose cases run below pytest: ``case`` returns the
    typed ``CaseOutcome`` (records, events, tool calls, failures) to assert on. ``settings`` are
    ``RunSettings`` fields every run here gets (``isolation="none"`` unless a test says otherwise:
    user code in this process, as most tests do not test the worker processes). ``host``: what the
    project's ``pytest_connic_*`` hooks would answer (``HookHost``). ``masker``: the secrets its runs
    learnt (a sensitive approval input's response, ...), as the session's masker that its reports
    are rendered with."""

    def __init__(self, root: Path, *, host: Host | None = None, **settings: Any) -> None:
        super().__init__(root)
        self.settings: dict[str, Any] = {"isolation": "none", **settings}
        self.host = host
        self.masker = Masker()
        #: the project's OpenAPI specs as the session reads them (``project.apispec.load_registry``:
        #: ``--connic-api-spec``/``--connic-api-url``); None: no spec, so no ``api:`` tool resolves
        self.api: ApiRegistry | None = None
        #: the messages of the warnings the last ``case``/``cases`` call's runs emitted, in order
        self.warnings: list[str] = []
        #: those warnings as caught (their category, message, file and line)
        self.caught: list[warnings.WarningMessage] = []

    @contextmanager
    def runtime(self, **settings: Any) -> Iterator[ProjectRuntime]:
        """A runtime of the project (closed afterwards, and the SDK's ``connic.tools`` placeholders
        put back, as a session's end does), with ``settings`` over the project's."""
        runtime = assemble(self.root, RunSettings(**{**self.settings, **settings}), host=self.host, api=self.api,
                           masker=self.masker)
        try:
            yield runtime
        finally:
            runtime.close()
            placeholders.uninstall()

    def case(self, suite: str, name: str, **settings: Any) -> CaseOutcome:
        """Run the case ``name`` of ``tests/<suite>.yaml`` in a runtime of its own."""
        return self.cases(suite, name, **settings)[name]

    def cases(self, suite: str, *names: str, **settings: Any) -> dict[str, CaseOutcome]:
        """Run the cases ``names`` of ``tests/<suite>.yaml`` (all of them without names), in file
        order, in one runtime (as one session does); their outcomes by name."""
        from pytest_connic.suite.loader import load_suite

        loaded = load_suite(self.root / "tests" / f"{suite}.yaml", self.root)
        assert loaded is not None, f"tests/{suite}.yaml is no suite"
        wanted = list(names) or [c.name for c in loaded.cases]
        outcomes: dict[str, CaseOutcome] = {}
        with warnings.catch_warnings(record=True) as caught, self.runtime(**settings) as runtime:
            warnings.simplefilter("always")
            for name in wanted:
                outcomes[name] = run_suite_case(runtime, f"tests/{suite}.yaml", name)
        self.caught = list(caught)
        self.warnings = [str(w.message) for w in caught]
        return outcomes
