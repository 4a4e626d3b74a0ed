"""The three agent kinds (https://connic.co/docs/v1/build/agent-configuration/agent-types): the LLM loop, tool agents, sequential pipelines."""

from __future__ import annotations

import asyncio
import base64
import re
import time
from collections.abc import Mapping, Sequence

from pytest_connic.jsonsafe import json_text, parse_json
from pytest_connic.models.base import CassetteError, ModelRequest, ModelResponse, ToolCallRequest, ToolSpec
from pytest_connic.models.divergence import ReplayDiverged
from pytest_connic.records.events import StageEvent
from pytest_connic.records.run import ModelTurnRecord, RunRecord
from pytest_connic.runtime.dispatch import available_tools, call_tool, tool_catalog
from pytest_connic.runtime.divergence import in_user_terms
from pytest_connic.runtime.mcp import connect_servers
from pytest_connic.runtime.output_schema import connic_subset, first_error
from pytest_connic.runtime.payload import message_text, tool_agent_payload
from pytest_connic.runtime.retries import check_reflection_budget
from pytest_connic.runtime.sessions import Message
from pytest_connic.runtime.signals import AwaitingApproval, RunAborted, RunFailed
from pytest_connic.runtime.state import InvocationState

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def fill_prompt(prompt: str, context: Mapping[str, object]) -> str:
    """``{key}`` placeholders filled from the run context; unknown ones stay literal."""

    def sub(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in context:
            return match.group(0)
        value = context[key]
        return value if isinstance(value, str) else json_text(value, ensure_ascii=True)

    return _PLACEHOLDER.sub(sub, prompt)


def user_message(content: Mapping[str, object]) -> Message:
    """Middleware content (``{role, parts}``) as an OpenAI-shaped user message."""
    given = content.get("parts")
    parts = given if isinstance(given, (list, tuple)) else []
    texts = [p["text"] for p in parts if isinstance(p, dict) and "text" in p]
    blobs = [p for p in parts if isinstance(p, dict) and "data" in p]
    if not blobs:
        return {"role": "user", "content": "\n".join(str(t) for t in texts)}
    items: list[dict[str, object]] = [{"type": "text", "text": str(t)} for t in texts]
    for blob in blobs:
        data = blob["data"]
        encoded = base64.b64encode(data).decode("ascii") if isinstance(data, (bytes, bytearray)) else str(data)
        items.append({"type": "file", "mime_type": blob.get("mime_type", "application/octet-stream"), "data": encoded})
    return {"role": "user", "content": items}


def visible_tools(inv: InvocationState) -> list[ToolSpec]:
    """The tools the model is offered this run (conditional tools whose condition holds)."""
    specs = []
    for entry in available_tools(inv).values():
        if entry.discoverable:
            continue
        specs.append(ToolSpec(name=entry.name, description=entry.description, parameters=entry.parameters))
    return specs


def _request(inv: InvocationState, messages: list[Message], tools: list[ToolSpec]) -> ModelRequest:
    config = inv.config
    retry = config.retry_options.model_dump() if config.retry_options else None
    return ModelRequest(
        agent_name=config.name,
        model=config.model or "",
        system_prompt=fill_prompt(config.system_prompt or "", inv.context),
        messages=list(messages),
        tools=tools,
        fallback_model=config.fallback_model,
        temperature=config.temperature,
        reasoning_effort=config.reasoning_effort,
        reasoning_budget=config.reasoning_budget,
        output_schema=config.output_schema_dict,
        retry_options=retry,
        timeout_s=inv.remaining_s(),
    )


def _record_turn(inv: InvocationState, index: int, response: ModelResponse, started: float) -> None:
    inv.record.model_turns.append(
        ModelTurnRecord(
            agent=inv.config.name,
            index=index,
            content=response.content,
            tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls],
            input_tokens=response.input_tokens,
            output_tokens=response.output_tokens,
            # a cost of 0 is "not reported": priced from the model when the run ends (models/pricing.py)
            cost=response.cost or None,
            duration_ms=(time.perf_counter() - started) * 1000,
            model=response.model or inv.config.model or None,
        )
    )
    if response.model and response.model != inv.config.model:
        inv.context["fallback_model_used"] = response.model


async def run_llm(inv: InvocationState, content: Mapping[str, object]) -> str:
    """The agent loop: one model call per iteration, the tool calls of a turn run concurrently."""
    if inv.config.voice_config is not None:
        raise RunAborted(f"{inv.config.source_path}: agent '{inv.config.name}' is a voice agent (voice_config): "
                         "voice calls cannot be tested offline; pytest-connic runs text agents only")
    await connect_servers(inv)  # mcp_servers (runtime/mcp.py): their tools join the catalogue
    # a triggered child took its model when it was triggered (runtime/children.py)
    model = inv.reserved_model or inv.scope.models.model_for(inv.config.name, root=inv.root)
    # a session's earlier conversation comes first (``session.history``, runtime/sessions.py)
    history = inv.session_history()
    messages: list[Message] = [*history, user_message(content)]
    for iteration in range(inv.config.max_iterations):
        started = time.perf_counter()
        try:
            response = await model.complete(_request(inv, messages, visible_tools(inv)))
        except ReplayDiverged as exc:  # said in the user's terms: the tool, child or mock that changed
            raise CassetteError(in_user_terms(inv, exc, messages, len(history))) from None
        _record_turn(inv, iteration, response, started)
        if not response.tool_calls:
            output = _final_output(inv, response.content or "")
            inv.remember([*messages[len(history):], {"role": "assistant", "content": response.content or ""}])
            return output
        messages.append(_assistant_message(response))
        results = await _call_all(inv, response.tool_calls)
        for call, result in zip(response.tool_calls, results):
            messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": result})
        # retry_options.attempts (runtime/retries.py)
        check_reflection_budget(inv.config, inv.record.tool_calls, inv.reflection)
    raise RunFailed(f"max_iterations ({inv.config.max_iterations}) reached before the model gave a final answer")


async def _call_all(inv: InvocationState, calls: list[ToolCallRequest]) -> list[object]:
    """The tool calls of one model turn, run concurrently as on Connic; their results in the
    model's order, and their trace records too (each call is recorded as it starts, and the
    calls start in the model's order). The first call to end the run (``StopProcessing``, or a
    run failure, an approval wait) wins: the calls still running are cancelled, marked so in
    the trace, and the run ends with that first signal."""
    if len(calls) == 1:
        return [await call_tool(inv, calls[0].name, calls[0].arguments)]
    first = len(inv.record.tool_calls)
    tasks = [asyncio.ensure_future(call_tool(inv, c.name, c.arguments)) for c in calls]
    finished: list[asyncio.Future[object]] = []  # in the order the calls ended
    for task in tasks:
        task.add_done_callback(finished.append)
    try:
        pending: set[asyncio.Future[object]] = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            # of several seen ending together, the one that ended first wins (user code in a
            # worker process answers in the order its calls ended, so two answers may arrive in
            # one step of the loop)
            ended = next((t for t in finished if t in done and not t.cancelled() and t.exception() is not None), None)
            if ended is not None:
                signal = ended.exception()
                assert signal is not None
                for other in done:  # ended in the same step: the winner's signal speaks for them, and
                    if not other.cancelled():  # an exception never retrieved would be logged at GC
                        other.exception()
                await _cancel(pending)
                _mark_cancelled(inv, tasks, first, ended, signal)
                raise signal
    except BaseException:
        await _cancel({t for t in tasks if not t.done()})
        raise
    return [t.result() for t in tasks]


def _mark_cancelled(inv: InvocationState, tasks: Sequence[asyncio.Future[object]], first: int,
                    winner_task: asyncio.Future[object], signal: BaseException) -> None:
    """The trace records of a model turn's calls that the first call to end the run cancelled;
    the winner is traced as itself, not as cancelled (a record per call, in order)."""
    records = inv.record.tool_calls[first:]
    won = next(i for i, task in enumerate(tasks) if task is winner_task)
    winner = records[won] if len(records) == len(tasks) else None
    for record in records:
        if record is not winner and not record.has_result and record.error is None:
            record.error = f"cancelled: another call of this model turn ended the run ({type(signal).__name__})"


async def _cancel(tasks: set[asyncio.Future[object]]) -> None:
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)


def _assistant_message(response: ModelResponse) -> Message:
    return {
        "role": "assistant",
        "content": response.content,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": c.arguments if isinstance(c.arguments, str) else json_text(c.arguments, default=None, ensure_ascii=True),
                },
            }
            for c in response.tool_calls
        ],
    }


def _final_output(inv: InvocationState, text: str) -> str:
    config = inv.config
    schema = config.output_schema_dict
    if schema:
        reduced, dropped = connic_subset(schema)
        if dropped:
            inv.services.host.warn_once(
                f"output_schema_keywords:{config.output_schema}",
                f"{_schema_file(inv)}: output_schema '{config.output_schema}' (agent '{config.name}', "
                f"{config.source_path}) uses keywords outside the subset Connic documents, which Connic "
                f"does not enforce and neither does pytest-connic: {', '.join(dropped)}",
            )
        value = parse_json(text)
        if value is text:
            raise RunFailed(f"output does not match output_schema '{config.output_schema}': not valid JSON")
        from jsonschema.exceptions import SchemaError  # imported on first use: 0.1 s

        try:
            error = first_error(reduced, value)
        except SchemaError as exc:
            raise RunAborted(f"{_schema_file(inv)}: output_schema '{config.output_schema}' is not a valid "
                             f"JSON Schema: {exc.message}") from None
        if error is not None:
            where, message = error
            raise RunFailed(f"output does not match output_schema '{config.output_schema}' at {where}: {message}")
    return text


def _schema_file(inv: InvocationState) -> str:
    return f"schemas/{inv.config.output_schema}.json"


async def run_tool_agent(inv: InvocationState, content: Mapping[str, object]) -> object:
    """A tool agent: its body tool called as ``f(payload=..., [context=...])``."""
    ref = inv.config.tool_name or ""
    payload = tool_agent_payload(inv.delivered, inv.original_payload)
    parts = content.get("parts")
    if isinstance(parts, (list, tuple)) and parts and isinstance(parts[0], dict) and "text" in parts[0]:
        text = parts[0]["text"]
        if text != message_text(inv.delivered):  # before middleware rewrote the input
            value = parse_json(text)
            payload = value if isinstance(value, dict) else {"input": value}
    # recorded under the function's name, so assertions match it by ref or bare name (the SDK's connic/loader.py, ProjectLoader._resolve_tools)
    name = next((e.name for e in tool_catalog(inv).values() if e.ref == ref), ref)
    return await call_tool(inv, name, {"payload": payload}, body=True)


async def run_sequential(inv: InvocationState) -> object:
    """Stages in order, each stage's output the next stage's input; one trace."""
    value = inv.original_payload
    attached = inv.delivered.get("files")
    files: list[object] = attached if isinstance(attached, list) else []
    output: object = None
    for stage_name in inv.config.agents:
        stage = InvocationState.create(inv.scope, stage_name, value, files, root=False, depth=inv.depth + 1)
        record = await inv.scope.run_invocation(stage)
        _merge_stage(inv, record)
        if record.status == "awaiting_approval":
            raise AwaitingApproval(record.error or f"stage '{stage_name}' awaits approval")
        if record.status != "completed":
            raise RunFailed(f"stage '{stage_name}' ended {record.status}: {record.error or ''}".rstrip(": "))
        output = record.output_raw
        value = output
        files = []
    return output


def _merge_stage(inv: InvocationState, record: RunRecord) -> None:
    inv.record.tool_calls.extend(record.tool_calls)
    inv.record.model_turns.extend(record.model_turns)
    inv.record.triggers.extend(record.triggers)
    inv.record.guardrails.extend(record.guardrails)
    inv.record.approvals.extend(record.approvals)
    inv.record.failures.extend(record.failures)
    if record.infrastructure_error:
        inv.record.infrastructure_error = record.infrastructure_error
    inv.record.events.append(StageEvent(agent=record.agent_name, status=record.status, run_id=record.run_id,
                                        error=record.error))
