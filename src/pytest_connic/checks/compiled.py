"""A case's expressions, compiled once at collection (each place's bindings: https://connic.co/docs/v1/test/assertions)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict

from pytest_connic.expressions.expression import Expression, compile_expression, split_tool_call_expression
from pytest_connic.expressions.values import ExpressionError
from pytest_connic.yamlpos import KeyPath

RESULT_NAMES = ("output", "error", "status", "context")
TOOL_CALL_NAMES = ("params", "result", "invocations", "context")
APPROVAL_NAMES = ("params", "context")
PAYLOAD_NAMES = ("payload", "payload_raw", "context")

#: an ``expected_tool_calls`` entry: a tool name, or ``{tool: expression}``
ToolCallEntry = str | dict[str, str]


class ChildExpectations(TypedDict):
    """An ``expected_child_agents`` entry as Connic resolves it (``ChildAgentExpectation``)."""

    expected_triggered: int
    expected_payload: str | None
    expected_result: str | None
    expected_tool_calls: list[ToolCallEntry]
    expected_tool_call_order: list[str]
    expected_no_tool_calls: list[str]
    expected_child_agents: dict[str, ChildExpectations] | None


class ApprovalDecisionData(TypedDict):
    """An ``approval_decisions`` entry as Connic resolves it (``TestApprovalDecision``)."""

    tool: str
    params: str | None
    decision: Literal["approve", "reject", "timeout"]
    reason: str | None
    response: str | None


class ResolvedCase(TypedDict):
    """A case with its suite's defaults merged: what Connic's ``TestFile.resolved`` returns."""

    name: str
    payload: str | None
    files: list[str]
    builder: str | None
    builder_args: dict[str, object] | None
    mocks: str | None
    strict_mocks: bool
    strict_hook_mocks: bool
    strict_middleware_mocks: bool
    strict_guardrail_mocks: bool
    approval_decisions: list[ApprovalDecisionData]
    strict_approval_decisions: bool
    runs: int
    success_threshold: int
    timeout_s: int
    expected_result: str | None
    expected_tool_calls: list[ToolCallEntry]
    expected_tool_call_order: list[str]
    expected_no_tool_calls: list[str]
    expected_child_agents: dict[str, ChildExpectations] | None


@dataclass
class ToolCallCheck:
    """One ``expected_tool_calls`` entry."""

    tool: str
    source: str | None  #: None for a bare entry (called at least once)
    filters: Sequence[Expression] = ()
    counts: Sequence[Expression] = ()
    mixed: Sequence[Expression] = ()

    @property
    def label(self) -> str:
        return self.tool if self.source is None else f"{self.tool}: {self.source}"


@dataclass
class ChildCheck:
    """One ``expected_child_agents`` entry, recursively."""

    name: str
    expected_triggered: int
    payload: Expression | None
    checks: Checks


@dataclass
class Checks:
    """The run-level assertions of a case or of a child expectation.

    A check a case does not have is an empty tuple, not a new empty list: a large collection
    holds one ``Checks`` per case, and every list is one more object for the garbage collector.
    """

    result: Expression | None = None
    tool_calls: Sequence[ToolCallCheck] = ()
    order: Sequence[str] = ()
    no_calls: Sequence[str] = ()
    children: Sequence[ChildCheck] = ()

    @property
    def needs_run(self) -> bool:
        """Whether a child with these checks must have been waited for."""
        return bool(self.result or self.tool_calls or self.order or self.no_calls or self.children)


@dataclass
class ApprovalDecision:
    """One scripted approval decision."""

    index: int
    tool: str
    params: Expression | None
    decision: str
    reason: str | None
    response: str | None


@dataclass
class CompiledCase:
    """Everything of a case that is evaluated at run time."""

    checks: Checks
    approvals: Sequence[ApprovalDecision] = ()


def _compile(source: str, names: tuple[str, ...], where: str, key_path: KeyPath) -> Expression:
    try:
        return compile_expression(source, names, where=where)
    except ExpressionError as exc:
        exc.key_path = key_path  # type: ignore[attr-defined]
        raise


def _tool_calls(entries: list[ToolCallEntry], key_path: KeyPath) -> Sequence[ToolCallCheck]:
    if not entries:
        return ()
    checks = []
    for i, entry in enumerate(entries):
        if isinstance(entry, str):
            checks.append(ToolCallCheck(tool=entry, source=None))
            continue
        ((tool, source),) = entry.items()
        expr = _compile(source, TOOL_CALL_NAMES, f"expected_tool_calls ({tool})", (*key_path, i, tool))
        filters, counts, mixed = split_tool_call_expression(expr)
        checks.append(ToolCallCheck(tool=tool, source=source, filters=filters, counts=counts, mixed=mixed))
    return checks


def _checks(spec: ResolvedCase | ChildExpectations, key_path: KeyPath) -> Checks:
    result = spec.get("expected_result")
    return Checks(
        result=(
            _compile(result, RESULT_NAMES, "expected_result", (*key_path, "expected_result"))
            if result is not None
            else None
        ),
        tool_calls=_tool_calls(spec.get("expected_tool_calls") or [], (*key_path, "expected_tool_calls")),
        order=list(spec.get("expected_tool_call_order") or ()) or (),
        no_calls=list(spec.get("expected_no_tool_calls") or ()) or (),
        children=_children(spec.get("expected_child_agents") or {}, (*key_path, "expected_child_agents")),
    )


def _children(children: dict[str, ChildExpectations], key_path: KeyPath) -> Sequence[ChildCheck]:
    if not children:
        return ()
    out = []
    for name, spec in children.items():
        payload = spec.get("expected_payload")
        out.append(
            ChildCheck(
                name=name,
                expected_triggered=int(spec.get("expected_triggered", 1)),
                payload=(
                    _compile(payload, PAYLOAD_NAMES, "expected_payload", (*key_path, name, "expected_payload"))
                    if payload is not None
                    else None
                ),
                checks=_checks(spec, (*key_path, name)),
            )
        )
    return out


def compile_case(resolved: ResolvedCase) -> CompiledCase:
    """Compile a resolved case record (``TestFile.resolved``). Raises ``ExpressionError``
    with a ``key_path`` attribute relative to the case."""
    approvals = []
    for i, decision in enumerate(resolved.get("approval_decisions") or []):
        params = decision.get("params")
        approvals.append(
            ApprovalDecision(
                index=i,
                tool=decision["tool"],
                params=(
                    _compile(params, APPROVAL_NAMES, "approval_decisions params", ("approval_decisions", i, "params"))
                    if params is not None
                    else None
                ),
                decision=decision["decision"],
                reason=decision.get("reason"),
                response=decision.get("response"),
            )
        )
    return CompiledCase(checks=_checks(resolved, ()), approvals=approvals or ())
