"""What one case needs to run, wherever it was defined: a suite's case or the ``connic``
fixture's arguments, validated and resolved with Connic's SDK exactly as a suite case is
(``resolve_case``), as a ``CaseTarget`` that ``execution/case.py`` runs."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_connic.checks.compiled import CompiledCase, ResolvedCase, compile_case
from pytest_connic.errors import ConnicError
from pytest_connic.expressions.values import ExpressionError
from pytest_connic.models.base import RunModelSource
from pytest_connic.records.outcome import CaseOutcome

__all__ = ["CaseDefinitionError", "CaseTarget", "resolve_case"]


class CaseDefinitionError(ConnicError):
    """A case built from Python arguments that Connic's schema refuses (the message lists why)."""


def resolve_case(fields: dict[str, object], agent_name: str) -> tuple[ResolvedCase, CompiledCase]:
    """Validate one case with the SDK's own models and resolve it exactly as a suite case is
    (``TestFile.resolved``), then compile its expressions.

    ``fields`` are the keys of a suite case (``name``, ``payload``, ``runs``, ...), no defaults.
    Raises ``CaseDefinitionError`` with Connic's messages.
    """
    from pydantic import ValidationError

    from pytest_connic.project.sdk import TestCase, TestDefaults, TestFile


    try:
        model = TestCase.model_validate(fields)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "case"
            msg = str(err["msg"]).removeprefix("Value error, ")
            problems.append(f"{where}: {msg}")
        raise CaseDefinitionError("; ".join(problems)) from None
    resolved: ResolvedCase = TestFile.model_construct(
        version="1.0", agent=agent_name, defaults=TestDefaults(), tests=[model]
    ).resolved(model)
    try:
        compiled = compile_case(resolved)
    except ExpressionError as exc:
        where = ".".join(str(p) for p in getattr(exc, "key_path", ()))
        raise CaseDefinitionError(f"{where}: {exc}" if where else str(exc)) from None
    return resolved, compiled


@dataclass
class CaseTarget:
    """Everything one case needs to run, wherever it was defined."""

    agent_name: str
    case: ResolvedCase  #: the resolved record (``TestFile.resolved``)
    compiled: CompiledCase
    models: RunModelSource  #: optionally ``save()``
    outcome: CaseOutcome
    #: evaluate the ``expected_*`` checks (and the implicit ``status == "completed"``);
    #: the connic fixture without expectations leaves the verdict to the Python test
    evaluate: bool = True
