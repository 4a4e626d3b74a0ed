"""One tool call, end to end (https://github.com/connic-org/connic-skill/blob/main/plugins/connic/skills/connic/references/tools-and-python.md; https://connic.co/docs/v1/test/fixtures-and-mocks):

approval gate → before hook → the tool (mocked, strict, real or predefined) →
after hook, recorded in the trace with params, result or error, and marks.
"""

from __future__ import annotations

import base64
import json
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping
from typing import TypedDict

from pytest_connic.errors import ConnicError
from pytest_connic.expressions.expression import compile_expression
from pytest_connic.jsonsafe import JsonObject, json_text, trace_data
from pytest_connic.models.base import CallFailed
from pytest_connic.project.located import exception_text
from pytest_connic.project.sdk import AbortTool, Tool, ToolFile, TransferCall
from pytest_connic.records.events import HookEvent
from pytest_connic.records.run import ToolCallRecord
from pytest_connic.runtime.api_tools import ApiArgumentError, call_api
from pytest_connic.runtime.approvals import ApprovalInputError, gate
from pytest_connic.runtime.mcp_calls import call_mcp_tool, model_view
from pytest_connic.runtime.mocks import signature_errors, tool_ladder
from pytest_connic.runtime.predefined_dispatch import run_predefined
from pytest_connic.runtime.services import predefined_description, predefined_schema
from pytest_connic.runtime.signals import PASS_THROUGH, RunAborted, RunFailed
from pytest_connic.runtime.signatures import accepts_positional, takes_context
from pytest_connic.runtime.state import CatalogEntry, InvocationState
from pytest_connic.secrets import MASK
from pytest_connic.usertb import TracebackData, for_record

DISCOVERY = ("search_tools", "use_tool")

#: a part of a message's content: ``{"type": "text", "text"}`` or a file part
#: (``{"type": "file", "mime_type", "data" | "uri", "name"?}``)
Part = dict[str, str | None]


class FoundTool(TypedDict):
    """A tool as ``search_tools`` describes it to the model."""

    name: str
    description: str
    parameters: JsonObject


async def call_middleware(inv: InvocationState, phase: str, func: Callable[..., object], *args: object) -> object:
    """Run a middleware phase (the real one or its mock; https://connic.co/docs/v1/build/middleware): ``StopProcessing``
    passes through, any other exception fails the run."""
    try:
        return await inv.scope.call(func, *args)
    except PASS_THROUGH:
        raise
    except Exception as exc:  # noqa: BLE001  (user code)
        raise RunFailed(
            f"middleware {phase} of agent '{inv.config.name}' raised {type(exc).__name__}: {exc}",
            traceback=_user_traceback(inv, exc, f"middleware {phase}"),
        ) from None


def _entry(tool: Tool, *, discoverable: bool) -> CatalogEntry:
    if tool.is_predefined or tool.func is None:
        kind = "discovery" if tool.name in DISCOVERY else "predefined"
        params = tool.parameters or predefined_schema(tool.name)
        if tool.name == "search_tools":
            params = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
        elif tool.name == "use_tool":
            params = {
                "type": "object",
                "properties": {"tool_name": {"type": "string"}, "arguments": {"type": "object"}},
                "required": ["tool_name"],
            }
        description = tool.description or predefined_description(tool.name)
        if (tool.ref or "").startswith("api:"):  # generated from an OpenAPI spec (runtime/api_tools.py)
            kind = "api"
        return CatalogEntry(tool.name, tool.ref or tool.name, description, params, kind, tool,
                            tool.condition, discoverable)
    return CatalogEntry(tool.name, tool.ref or tool.name, tool.description, tool.parameters, "custom", tool,
                        tool.condition, discoverable)


#: "max 100 tools per agent" [agent-yaml]
MAX_TOOLS = 100


def tool_catalog(inv: InvocationState) -> dict[str, CatalogEntry]:
    """Every tool of the agent by model-facing name (tools, discoverable tools, approval inputs).

    Refuses (``RunAborted``) an agent with more than :data:`MAX_TOOLS` tools: Connic's limit,
    counted over ``tools`` and ``discoverable_tools`` after wildcard expansion and the tools
    generated for ``approval.inputs`` (the SDK's README: "Generated input tools count toward the
    100-tool agent limit"), without the ``search_tools``/``use_tool`` that Connic injects."""
    if inv.catalog is not None:
        return inv.catalog
    approval = inv.config.approval
    inputs = len(approval.inputs) if approval else 0
    count = sum(1 for t in [*inv.agent.tools, *inv.agent.discoverable_tools] if t.name not in DISCOVERY)
    if count + inputs > MAX_TOOLS:
        config = inv.config
        counted = "tools and discoverable_tools after wildcard expansion"
        if inputs:
            counted += f", and {inputs} approval input tool{'s' if inputs > 1 else ''}"
        raise RunAborted(f"{config.source_path}: agent '{config.name}' has {count + inputs} tools ({counted}); "
                         f"Connic allows at most {MAX_TOOLS} tools per agent")
    catalog: dict[str, CatalogEntry] = {}
    for tool in inv.agent.tools:
        catalog[tool.name] = _entry(tool, discoverable=False)
    for tool in inv.agent.discoverable_tools:
        catalog[tool.name] = _entry(tool, discoverable=True)
    for item in approval.inputs if approval else []:
        ((name, spec),) = item.items()
        catalog[name] = CatalogEntry(name, name, spec.prompt, spec.parameters_schema(), "input")
    inv.catalog = catalog
    return catalog


def condition_holds(inv: InvocationState, condition: str | None) -> bool:
    """Whether a tool's (or an MCP server's) ``condition`` lets this run have it: there is none,
    or it is true over the run's ``context`` and ``input``. Evaluated strictly, as Connic does: a
    missing field, an unsupported operation or any other evaluation error makes it false."""
    if not condition:
        return True
    bindings = {"context": inv.context, "input": inv.delivered}
    try:
        expression = compile_expression(condition, ("context", "input"), where="tool condition")
        return expression.evaluate(bindings, strict=True)
    except Exception:  # noqa: BLE001  (ExpressionError, EvaluationError, a user object's odd comparison)
        return False


def available_tools(inv: InvocationState) -> dict[str, CatalogEntry]:
    """The catalog without the tools whose condition is false for this run: what any caller
    (the model, ``search_tools``, ``use_tool``) can reach."""
    return {name: e for name, e in tool_catalog(inv).items() if condition_holds(inv, e.condition)}


def _model_bytes(value: bytes | bytearray) -> str:
    """Bytes as the model reads them: the text when they are UTF-8, else base64."""
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(bytes(value)).decode("ascii")


def _model_default(value: object) -> object:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _model_bytes(bytes(value))
    if isinstance(value, ToolFile):
        return _file_summary(value)
    return trace_data(value)


def to_model_text(value: object) -> str:
    """A tool result as the model reads it: a string as is, anything else as JSON; bytes (such
    as ``file_read``'s ``content``) as their text when UTF-8, else base64. Never raises."""
    if isinstance(value, str):
        return value
    return json_text(value, default=_model_default)  # a cycle, a huge int, odd keys, deep nesting


def file_part(file: ToolFile) -> Part:
    """A ``ToolFile`` as a file part of a message, the shape user files have (``runtime/agents.py``
    ``user_message``): ``{"type": "file", "mime_type", "data"}`` (base64) or ``"uri"``, and ``name``."""
    part: Part = {"type": "file", "mime_type": file.mime_type}
    if file.data is not None:
        part["data"] = base64.b64encode(file.data).decode("ascii")
    else:
        part["uri"] = file.uri
    if file.name:
        part["name"] = file.name
    return part


def _file_summary(file: ToolFile) -> dict[str, dict[str, str | int]]:
    """A ``ToolFile`` in the trace: what it is, not its bytes."""
    return {"tool_file": {k: v for k, v in (("mime_type", file.mime_type), ("name", file.name),
                                            ("size_bytes", file.size_bytes), ("uri", file.uri)) if v is not None}}


def _files_of(value: object) -> list[object] | None:
    """The items of a result that carries files (one ``ToolFile``, or a list/tuple with some)."""
    if isinstance(value, ToolFile):
        return [value]
    if isinstance(value, (list, tuple)) and any(isinstance(v, ToolFile) for v in value):
        return list(value)
    return None


def to_model_content(value: object) -> str | list[Part]:
    """A tool result as the next model turn gets it: text (:func:`to_model_text`), or, when it
    carries ``ToolFile`` objects, a list of parts: each file a file part, each other item of a
    returned list or tuple a text part, in order (Connic: "files alongside JSON and text")."""
    items = _files_of(value)
    if items is None:
        return to_model_text(value)
    return [file_part(v) if isinstance(v, ToolFile) else {"type": "text", "text": to_model_text(v)}
            for v in items]


_RAW_BYTES = ("the tool returned raw bytes, which Connic rejects because they do not identify a MIME type; "
              "return connic.ToolFile(mime_type=..., data=...) instead")
_NESTED_FILE = "a ToolFile must be the tool's result or an item of a returned list or tuple"


def result_problem(value: object) -> str | None:
    """Why Connic would refuse a custom tool's result, or None: raw ``bytes`` anywhere ("they
    do not identify a MIME type" [tools-and-python]), or a ``ToolFile`` anywhere but the result
    itself or an item of a returned list or tuple."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    try:
        for item in items:
            problem = None if isinstance(item, ToolFile) else _nested_problem(item)
            if problem:
                return problem
    except RecursionError:  # a cycle or deep nesting: JSON rendering copes with it later
        return None
    return None


def _nested_problem(value: object) -> str | None:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _RAW_BYTES
    if isinstance(value, ToolFile):
        return _NESTED_FILE
    children = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    for child in children:
        problem = _nested_problem(child)
        if problem:
            return problem
    return None


class UserCodeError(ConnicError):
    """An exception raised by user code during a tool call (the tool, its mock, a hook, a
    predefined tool's implementation or the ``pytest_connic_predefined_tool`` hook): the model
    reads it as the tool's error. Anything else that escapes the pipeline is a pytest-connic bug."""

    def __init__(self, exc: Exception) -> None:
        super().__init__(exception_text(exc))  # an exception whose __str__ raises is still the user's
        self.exc = exc


async def user_code(awaitable: Awaitable[object]) -> object:
    """Await user code; its exceptions (other than control flow) become ``UserCodeError``."""
    try:
        return await awaitable
    except (AbortTool, *PASS_THROUGH):
        raise
    except TransferCall as exc:
        raise RunAborted(f"TransferCall({exc.number}) raised: transferring a voice call is a feature of "
                         "voice agents, and a voice call cannot be tested offline") from None
    except Exception as exc:  # user code: the model reads it
        raise UserCodeError(exc) from exc


def _user_traceback(inv: InvocationState, exc: BaseException, origin: str | None = None) -> TracebackData | None:
    """What the run record keeps of user code's traceback (``usertb.for_record``), masked."""
    return for_record(exc, inv.services.project.root, inv.services.masker.text, origin)


def internal_error(exc: BaseException, doing: str) -> RunAborted:
    """A located run failure for a bug of pytest-connic itself (never shown as the user's fault)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "pytest_connic" in f.filename]
    where = ""
    if frames:
        frame = frames[-1]
        module = "pytest_connic" + frame.filename.replace("\\", "/").rsplit("pytest_connic", 1)[-1]
        where = f" at {module}:{frame.lineno}"
    return RunAborted(
        f"internal error in pytest-connic while {doing}: {type(exc).__name__}: {exc}{where}. "
        "This is a bug in pytest-connic, not in your project: please report it with this message"
    )


async def call_tool(inv: InvocationState, name: str, arguments: object, *, body: bool = False,
                    via_discovery: bool = False) -> object:
    """Dispatch one call; returns what the model reads back (a result or an error text, or the
    parts of a result that carries files: :func:`to_model_content`); with ``body``, the result.

    What ends the run its own way (``signals.PASS_THROUGH``) propagates.
    With ``body`` (a tool agent's body) a tool error fails the run instead.
    """
    catalog = available_tools(inv)  # a tool hidden by its condition is unknown, whoever asks
    entry = catalog.get(name) or next((e for e in catalog.values() if e.ref == name), None)
    record = ToolCallRecord(seq=len(inv.record.tool_calls), name=name, ref=entry.ref if entry else name,
                            params=arguments if isinstance(arguments, dict) else {}, agent=inv.config.name,
                            via_discovery=via_discovery)
    if entry is not None and entry.name == "use_tool" and not body:
        return await _use_tool(inv, arguments, record)
    inv.record.tool_calls.append(record)
    started = time.perf_counter()
    try:
        checked, params = _checked_call(catalog, name, entry, arguments)
        result = await _pipeline(inv, checked, record, params)
    except (_ToolError, UserCodeError) as exc:
        return _failed_call(inv, record, exc, body=body)
    except PASS_THROUGH:
        raise
    except Exception as exc:  # not user code: our own bug, never the tool's error
        raise internal_error(exc, f"calling tool {name!r}") from exc
    finally:
        record.duration_ms = (time.perf_counter() - started) * 1000
    if body:
        return result
    if entry is not None and entry.kind == "mcp" and isinstance(result, dict):  # an McpResult
        return to_model_content(model_view(result))
    return to_model_content(result)


def _checked_call(catalog: dict[str, CatalogEntry], name: str, entry: CatalogEntry | None,
                  arguments: object) -> tuple[CatalogEntry, dict[str, object]]:
    """The entry a call names and a copy of its arguments, a JSON object: else the error the model
    reads."""
    if entry is None:
        offered = ", ".join(sorted(catalog)) or "none"
        raise _ToolError(f"unknown tool '{name}'; this agent's tools: {offered}")
    if not isinstance(arguments, dict):
        raise _ToolError(f"invalid arguments for {entry.ref}: expected a JSON object, got {str(arguments)[:200]!r}")
    return entry, dict(arguments)


def _failed_call(inv: InvocationState, record: ToolCallRecord, exc: _ToolError | UserCodeError, *,
                 body: bool) -> str:
    """A call that failed as the model sees it: its record says why (and where in user code);
    the model reads ``Error: ...``, or, in a tool agent's body, the run fails with it."""
    if isinstance(exc, UserCodeError):
        record.error = str(exc)
        record.traceback = _user_traceback(inv, exc.exc)
    else:
        record.error = exc.message
        record.traceback = exc.traceback
    if body:
        raise RunFailed(record.error, traceback=record.traceback) from None
    return f"Error: {record.error}"


class _ToolError(ConnicError):
    def __init__(self, message: str, traceback: TracebackData | None = None) -> None:
        super().__init__(message)
        self.message = message
        #: the user's traceback when a hook (or its mock) raised (``usertb.for_record``)
        self.traceback = traceback


class _Aborted(ConnicError):
    """An ``AbortTool`` and where it came from (for the trace)."""

    def __init__(self, result: object, origin: str) -> None:
        super().__init__(origin)
        self.result = result
        self.origin = origin


async def _pipeline(inv: InvocationState, entry: CatalogEntry, record: ToolCallRecord, params: dict[str, object]) -> object:
    try:
        decided = await gate(inv, entry, record, params)
    except ApprovalInputError as exc:  # the model called an approval input with bad arguments
        raise _ToolError(f"{type(exc).__name__}: {exc}") from None
    if decided is not None:  # rejected with on_rejection: continue, or an input tool's answer
        kind, value = decided
        if kind in ("result", "sensitive"):  # a short sensitive input response: masked in the record
            record.has_result, record.result = True, MASK if kind == "sensitive" else trace_data(value)
        return value
    # no agent hooks for approval inputs, nor for MCP tools (Connic: hooks "do not fire for tools
    # served by external MCP servers" [guardrails-schemas-mcp])
    hooks = inv.services.project.hooks(inv.config.name) if entry.kind not in ("input", "mcp") else None
    try:
        params = await _before_hook(inv, entry, hooks, params)
        record.params = params
        result = await _execute(inv, entry, record, params)
        result = await _after_hook(inv, entry, hooks, params, result)
        problem = result_problem(result) if entry.kind == "custom" else None
        if problem:
            raise _ToolError(f"{entry.ref}: {problem}")
    except _Aborted as abort:
        # documented for a before hook; from the tool, its mock or an after hook it means the
        # same: the model reads ``abort.result`` as the tool's answer, the trace marks an error
        record.aborted = True
        record.error = f"aborted by {abort.origin} (AbortTool): {_short(abort.result)}"
        return abort.result
    record.has_result, record.result = True, trace_result(result)
    return result


def trace_result(value: object) -> object:
    """A tool result for the trace: :func:`trace_data`, files as what they are (not their bytes)."""
    items = _files_of(value)
    if items is None:
        return trace_data(value)
    summaries = [_file_summary(v) if isinstance(v, ToolFile) else trace_data(v) for v in items]
    return summaries[0] if isinstance(value, ToolFile) else summaries


def _short(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(trace_data(value), ensure_ascii=False)
    return text if len(text) <= 200 else text[:199] + "…"


def _hook_func(inv: InvocationState, entry: CatalogEntry, hooks: object,
               phase: str) -> tuple[Callable[..., object] | None, str | None]:
    """The function for a hook phase (its mock, else the real hook) and the mock's name.

    A mock replaces only a phase that the agent's hooks file defines (https://connic.co/docs/v1/test/fixtures-and-mocks)."""
    real = getattr(hooks, phase, None) if hooks is not None else None
    if real is None:
        return None, None
    return inv.scope.mocks.choose(
        tool_ladder(entry.ref, f"_hook_{phase}"), "strict_hook_mocks",
        lambda tried: f"the {phase} hook of agent '{inv.config.name}' would run for {entry.ref} without a mock ({tried})",
        real)


def _origin(phase: str, mock: str | None) -> str:
    return f"{phase} hook mock {mock}" if mock else f"{phase} hook"


async def _before_hook(inv: InvocationState, entry: CatalogEntry, hooks: object,
                       params: dict[str, object]) -> dict[str, object]:
    func, mock = _hook_func(inv, entry, hooks, "before")
    if func is None:
        return params
    args: tuple[object, ...] = (entry.name, params, inv.context) if accepts_positional(func, 3) else (entry.name, params)
    inv.record.events.append(HookEvent(phase="before", tool=entry.ref, mock=mock))
    try:
        changed = await user_code(inv.scope.call(func, *args))
    except AbortTool as abort:
        raise _Aborted(abort.result, _origin("before", mock)) from None
    except UserCodeError as exc:
        raise _ToolError(f"{_origin('before', mock)} failed: {exc}",
                         _user_traceback(inv, exc.exc, _origin("before", mock))) from None
    if changed is None:  # None = params unchanged
        return params
    if not isinstance(changed, dict):
        raise _ToolError(f"{_origin('before', mock)} returned {type(changed).__name__}; "
                         "expected a dict of params or None")
    return {**params, **changed}


async def _after_hook(inv: InvocationState, entry: CatalogEntry, hooks: object, params: dict[str, object],
                      result: object) -> object:
    func, mock = _hook_func(inv, entry, hooks, "after")
    if func is None:
        return result
    args: tuple[object, ...] = (entry.name, params, result)
    if accepts_positional(func, 4):
        args = (*args, inv.context)
    inv.record.events.append(HookEvent(phase="after", tool=entry.ref, mock=mock))
    try:
        changed = await user_code(inv.scope.call(func, *args))
    except AbortTool as abort:
        raise _Aborted(abort.result, _origin("after", mock)) from None
    except UserCodeError as exc:
        raise _ToolError(f"{_origin('after', mock)} failed: {exc}",
                         _user_traceback(inv, exc.exc, _origin("after", mock))) from None
    return result if changed is None else changed  # None = keep the result


async def _execute(inv: InvocationState, entry: CatalogEntry, record: ToolCallRecord,
                   params: dict[str, object]) -> object:
    try:
        if entry.kind == "custom":
            return await _custom(inv, entry, record, params)
        if entry.kind == "discovery":
            return _search_tools(inv, params)
        if entry.kind == "api":
            return await _api(inv, entry, params)
        if entry.kind == "mcp":
            try:
                return await call_mcp_tool(inv, entry, params)
            except CallFailed as exc:  # the server refused or could not be reached: the model reads it
                raise _ToolError(f"{entry.ref} (MCP server '{entry.server}'): {exc}") from None
        # the local implementations refuse bad arguments by raising, as Connic's tools do
        return await user_code(run_predefined(inv, entry.name, params))
    except AbortTool as abort:
        origin = f"mock {record.mock_function}" if record.mocked else "the tool"
        raise _Aborted(abort.result, origin) from None


async def _custom(inv: InvocationState, entry: CatalogEntry, record: ToolCallRecord,
                  params: dict[str, object]) -> object:
    assert entry.tool is not None
    try:
        func, mock = inv.scope.mocks.choose(tool_ladder(entry.ref), "strict_mocks",
                                            lambda tried: f"{entry.ref} has no mock ({tried})", entry.tool.func)
    except RunAborted as exc:
        record.error = f"rejected by {exc.message}"
        raise
    assert func is not None
    if mock is not None:
        errors = signature_errors(params, entry.parameters, entry.tool.func)
        record.mocked, record.mock_function = True, mock
        if errors:  # the call's record says which mock refused it and why (not "no result")
            record.error = f"rejected by mock {mock}: the call does not match the tool's signature: {'; '.join(errors)}"
            raise RunAborted(f"mocked call to {entry.ref} does not match the tool's signature: {'; '.join(errors)}")
        return await user_code(inv.scope.call(func, entry.ref, params, inv.context))
    kwargs = dict(params)
    if takes_context(func):
        kwargs["context"] = inv.context
    try:
        return await user_code(inv.scope.call(func, **kwargs))
    except UserCodeError as exc:
        if isinstance(exc.exc, TypeError) and "argument" in str(exc.exc):
            raise _ToolError(f"{entry.ref}: {exc.exc}") from None
        raise


async def _api(inv: InvocationState, entry: CatalogEntry, params: dict[str, object]) -> object:
    """An ``api:`` tool: its real HTTP request (recorded or replayed); an HTTP error is the tool's
    error, which the model reads."""
    try:
        return await call_api(inv, entry, params)
    except (CallFailed, ApiArgumentError) as exc:
        raise _ToolError(f"{entry.ref}: {exc}") from None


def _search_tools(inv: InvocationState, params: Mapping[str, object]) -> dict[str, list[FoundTool]]:
    query = str(params.get("query", "")).lower()
    words = [w for w in query.replace("_", " ").split() if w]
    found = []
    for entry in available_tools(inv).values():
        if not entry.discoverable:
            continue
        haystack = f"{entry.name} {entry.ref} {entry.description}".lower().replace("_", " ")
        score = sum(haystack.count(w) for w in words) if words else 1
        if score:
            found.append((score, entry))
    found.sort(key=lambda item: (-item[0], item[1].name))
    return {"tools": [{"name": e.name, "description": e.description, "parameters": e.parameters} for _, e in found]}


async def _use_tool(inv: InvocationState, arguments: object, record: ToolCallRecord) -> object:
    """``use_tool``: the call of a discoverable tool is traced as that tool's call; a refused one
    is traced as the ``use_tool`` call itself, with the error the model reads."""
    args = arguments if isinstance(arguments, dict) else {}
    target = str(args.get("tool_name", ""))
    entry = available_tools(inv).get(target)
    if entry is None or not entry.discoverable:
        record.error = f"'{target}' is not a discoverable tool of this agent; call search_tools first"
        inv.record.tool_calls.append(record)
        return f"Error: {record.error}"
    inner = args.get("arguments") or {}
    return await call_tool(inv, target, inner, via_discovery=True)
