"""Run one case of a Connic project below pytest: no session, no items, the typed outcome back.

As pytest-xdist's ``test_remote.py`` drives one worker, these tests drive the execution layer
(``ProjectRuntime``) directly and assert on the records a run leaves (``CaseOutcome``,
``RunRecord``), not on rendered terminal text.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pytest_connic.execution.case import ProjectRuntime, RuntimeOptions
from pytest_connic.execution.models import ModelSource
from pytest_connic.project.loaded import LoadedProject
from pytest_connic.records.run import CaseOutcome
from pytest_connic.runtime.ports import NullHost
from pytest_connic.secrets import Masker
from pytest_connic.suite.loader import load_suite


def runtime_for(root: Path, *, isolation: str = "none", masker: Masker | None = None,
                **models: Any) -> ProjectRuntime:
    """The project's runtime as a session builds it; ``models``: fields of ``ModelSource``
    (``mode``, ``replay``, ``match_rules``, ...)."""
    masker = masker or Masker(())
    concurrency = models.pop("concurrency", 8)
    source = ModelSource(cassette_dir=models.pop("cassette_dir", "cassettes"), mode=models.pop("mode", "none"),
                         masker=masker, aliases=dict)
    source = dataclasses.replace(source, **models)
    options = RuntimeOptions(concurrency=concurrency, early_stop=False, env=None, models=source,
                             isolation=isolation)
    project = LoadedProject(root, static=isolation == "process")
    return ProjectRuntime(project, options, masker=masker, host=NullHost())


@contextmanager
def project_runtime(root: Path, **kwargs: Any) -> Iterator[ProjectRuntime]:
    """``runtime_for``, closed afterwards."""
    runtime = runtime_for(root, **kwargs)
    try:
        yield runtime
    finally:
        runtime.close()


def run_case(runtime: ProjectRuntime, suite: str, case: str) -> CaseOutcome:
    """Run the case ``case`` of ``tests/<suite>.yaml`` and return its outcome (warnings the run
    emits are recorded, not raised: see ``outcome.records``)."""
    root = runtime.project.root
    loaded = load_suite(root / "tests" / f"{suite}.yaml", root)
    assert loaded is not None, f"tests/{suite}.yaml is no suite"
    spec = next((c for c in loaded.cases if c.name == case), None)
    assert spec is not None, f"no case {case!r} in tests/{suite}.yaml: {[c.name for c in loaded.cases]}"
    assert spec.error is None, spec.error
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        return runtime.run_case(loaded, spec, f"tests/{suite}.yaml::{case}")


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
