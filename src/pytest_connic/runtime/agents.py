"""The three agent kinds (spec §9.2): the LLM loop, tool agents, sequential pipelines."""

from __future__ import annotations

import base64
import re
import time
from typing import Any

import jsonschema

from pytest_connic.expressions import ExpressionError, compile_expression
from pytest_connic.jsonsafe import json_text, parse_json
from pytest_connic.models.base import ModelRequest, ModelResponse, ToolSpec
from pytest_connic.records.run import ModelTurnRecord, RunRecord
from pytest_connic.runtime.dispatch import call_tool, tool_catalog
from pytest_connic.runtime.payload import message_text, tool_agent_payload
from pytest_connic.runtime.retries import check_reflection_budget
from pytest_connic.runtime.signals import AwaitingApproval, RunFailed
from pytest_connic.runtime.state import InvocationState

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def fill_prompt(prompt: str, context: dict[str, Any]) -> str:
    """``{key}`` placeholders filled from the run context; unknown ones stay literal."""

    def sub(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in context:
            return match.group(0)
        value = context[key]
        return value if isinstance(value, str) else json_text(value, ensure_ascii=True)

    return _PLACEHOLDER.sub(sub, prompt)


def user_message(content: dict[str, Any]) -> dict[str, Any]:
    """Middleware content (``{role, parts}``) as an OpenAI-shaped user message."""
    parts = content.get("parts") or []
    texts = [p["text"] for p in parts if isinstance(p, dict) and "text" in p]
    blobs = [p for p in parts if isinstance(p, dict) and "data" in p]
    if not blobs:
        return {"role": "user", "content": "\n".join(str(t) for t in texts)}
    items: list[dict[str, Any]] = [{"type": "text", "text": str(t)} for t in texts]
    for blob in blobs:
        data = blob["data"]
        encoded = base64.b64encode(data).decode("ascii") if isinstance(data, (bytes, bytearray)) else str(data)
        items.append({"type": "file", "mime_type": blob.get("mime_type", "application/octet-stream"), "data": encoded})
    return {"role": "user", "content": items}


def _condition_true(condition: str, bindings: dict[str, Any]) -> bool:
    try:
        return compile_expression(condition, ("context", "input"), where="tool condition").evaluate(bindings)
    except ExpressionError:
        return False


def visible_tools(inv: InvocationState) -> list[ToolSpec]:
    """The tools the model is offered this run (conditional tools whose condition holds)."""
    bindings = {"context": inv.context, "input": inv.delivered}
    specs = []
    for entry in tool_catalog(inv).values():
        if entry.condition and not _condition_true(entry.condition, bindings):
            continue
        if entry.discoverable:
            continue
        specs.append(ToolSpec(name=entry.name, description=entry.description, parameters=entry.parameters))
    return specs


def _request(inv: InvocationState, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> ModelRequest:
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
            cost=response.cost,
            duration_ms=(time.perf_counter() - started) * 1000,
        )
    )
    if response.model and response.model != inv.config.model:
        inv.context["fallback_model_used"] = response.model


async def run_llm(inv: InvocationState, content: dict[str, Any]) -> Any:
    """The agent loop: one model call per iteration, tool calls dispatched in order."""
    # a triggered child took its model when it was triggered (runtime/children.py)
    model = inv.reserved_model or inv.scope.models.model_for(inv.config.name, root=inv.root)
    messages: list[dict[str, Any]] = [user_message(content)]
    for iteration in range(inv.config.max_iterations):
        started = time.perf_counter()
        response = await model.complete(_request(inv, messages, visible_tools(inv)))
        _record_turn(inv, iteration, response, started)
        if not response.tool_calls:
            return _final_output(inv, response.content or "")
        messages.append(_assistant_message(response))
        for call in response.tool_calls:
            result_text = await call_tool(inv, call.name, call.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": result_text})
        check_reflection_budget(inv)  # retry_options.attempts (runtime/retries.py)
    raise RunFailed(f"max_iterations ({inv.config.max_iterations}) reached before the model gave a final answer")


def _assistant_message(response: ModelResponse) -> dict[str, Any]:
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
    schema = inv.config.output_schema_dict
    if schema:
        value = parse_json(text)
        if value is text:
            raise RunFailed(f"output does not match output_schema '{inv.config.output_schema}': not valid JSON")
        error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "<root>"
            raise RunFailed(
                f"output does not match output_schema '{inv.config.output_schema}' at {where}: {error.message}"
            )
    return text


async def run_tool_agent(inv: InvocationState, content: dict[str, Any]) -> Any:
    """A tool agent: its body tool called as ``f(payload=..., [context=...])``."""
    ref = inv.config.tool_name or ""
    payload = tool_agent_payload(inv.delivered, inv.original_payload)
    parts = content.get("parts") or []
    if parts and isinstance(parts[0], dict) and "text" in parts[0]:
        text = parts[0]["text"]
        if text != message_text(inv.delivered):  # before middleware rewrote the input
            value = parse_json(text)
            payload = value if isinstance(value, dict) else {"input": value}
    # recorded under the function's name, so assertions match it by ref or bare name (spec §3)
    name = next((e.name for e in tool_catalog(inv).values() if e.ref == ref), ref)
    return await call_tool(inv, name, {"payload": payload}, body=True)


async def run_sequential(inv: InvocationState) -> Any:
    """Stages in order, each stage's output the next stage's input; one trace."""
    value: Any = inv.original_payload
    files = inv.delivered.get("files") or []
    output: Any = None
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
    inv.record.events.append({"type": "stage", "agent": record.agent_name, "status": record.status,
                              "run_id": record.run_id, "error": record.error})
