"""One invocation of an agent: Connic's lifecycle around the agent body (spec §9.3).

input guardrails → middleware ``before`` → agent (llm loop / tool / sequential)
→ middleware ``after`` → output guardrails → middleware ``cleanup`` (always last).
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime as dt
import time
import uuid
from typing import Any

from connic import StopProcessing
from connic.core import AgentType

from pytest_connic.models.base import CassetteError, ProviderError
from pytest_connic.records.run import RunRecord
from pytest_connic.runtime import guardrails
from pytest_connic.runtime.dispatch import call_middleware
from pytest_connic.runtime.payload import content_parts, deliver, message_text, parse_json
from pytest_connic.runtime.scope import (
    AwaitingApproval,
    InfrastructureFailure,
    RunAborted,
    RunFailed,
    RunScope,
)

CURRENT: contextvars.ContextVar[Invocation | None] = contextvars.ContextVar("connic_invocation", default=None)


def output_text(value: Any) -> str:
    """The string form of an output, as ``after`` middleware and guardrails see it."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    from pytest_connic.jsonsafe import json_text

    return json_text(value)  # never raises: a cycle, a huge int, odd keys, deep nesting


class Invocation:
    """One agent run, the case's own or a child's."""

    def __init__(
        self,
        scope: RunScope,
        agent_name: str,
        payload: Any,
        files: list[dict[str, str]] | None = None,
        *,
        root: bool,
        depth: int = 0,
        timeout_s: float | None = None,
        timeout_label: str | None = None,
    ) -> None:
        self.scope = scope
        self.services = scope.services
        self.agent = self.services.agent(agent_name)
        self.config = self.agent.config
        self.root = root
        self.depth = depth
        self.original_payload = payload
        self.delivered = deliver(payload, files or [])
        # the agent's own `timeout` applies too, whichever is shorter (spec §11.15)
        if self.config.timeout and (timeout_s is None or float(self.config.timeout) < timeout_s):
            timeout_s, timeout_label = float(self.config.timeout), f"timeout of agent '{agent_name}'"
        self.timeout_s = timeout_s
        self.timeout_label = timeout_label
        self.deadline: float | None = None
        self.record = RunRecord(run_id=str(uuid.uuid4()), agent_name=agent_name, index=scope.run_index)
        self.record.input = self.delivered
        self.context: dict[str, Any] = {
            "run_id": self.record.run_id,
            "agent_name": agent_name,
            "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(),
            "payload": self.delivered,
        }
        self.record.run_context = self.context
        self.background: list[asyncio.Task[Any]] = []
        self.middleware = self.services.project.middleware(agent_name)
        self._started = 0.0

    async def run(self) -> RunRecord:
        """Run the whole lifecycle; never raises (except cancellation from outside)."""
        token = CURRENT.set(self)
        self._started = time.perf_counter()
        if self.timeout_s is not None:
            self.deadline = self._started + self.timeout_s
            if self.root:
                self.scope.deadline = self.deadline
        try:
            if self.timeout_s is not None:
                await asyncio.wait_for(self._body(), self.timeout_s)
            else:
                await self._body()
        except asyncio.TimeoutError:
            label = f" ({self.timeout_label})" if self.timeout_label else ""
            self._end("failed", error=f"run timed out after {self.timeout_s:g}s{label}")
        except asyncio.CancelledError:
            self._end("cancelled", error="run cancelled")
            await self._finish()
            CURRENT.reset(token)
            raise
        await self._finish()
        CURRENT.reset(token)
        return self.record

    def remaining_s(self) -> float | None:
        """Seconds left before this invocation or its run times out (None: no limit)."""
        deadlines = [d for d in (self.deadline, self.scope.deadline) if d is not None]
        if not deadlines:
            return None
        return max(min(deadlines) - time.perf_counter(), 0.001)

    async def _finish(self) -> None:
        await self._await_background()
        from pytest_connic.runtime.predefined_dispatch import record_automatic_outbound

        record_automatic_outbound(self)  # recorded, never delivered
        self.record.duration_ms = (time.perf_counter() - self._started) * 1000
        self.context.setdefault("duration_ms", round(self.record.duration_ms))
        await self._cleanup()

    async def _body(self) -> None:
        try:
            await self._lifecycle()
        except StopProcessing as stop:
            self._end("completed", output=stop.response)
            self.record.events.append({"type": "stop_processing", "response": stop.response,
                                       "publish_outbound": getattr(stop, "publish_outbound", True)})
        except RunAborted as exc:
            self.record.failures.append(exc.message)
            self._end("failed", error=exc.message)
        except CassetteError as exc:
            self.record.failures.append(str(exc))
            self._end("failed", error=str(exc))
        except (ProviderError, InfrastructureFailure) as exc:
            self.record.infrastructure_error = self.services.masker.text(str(exc))
            self._end("failed", error=self.record.infrastructure_error)
        except RunFailed as exc:
            self._end("failed", error=exc.message)
        except AwaitingApproval as exc:
            self._end("awaiting_approval", error=str(exc) or None)

    def _end(self, status: str, *, output: Any = None, error: str | None = None) -> None:
        self.record.status = status
        self.record.error = error
        self.record.output_raw = output if status in ("completed", "blocked") else None

    async def _lifecycle(self) -> None:
        blocked = await guardrails.run_input(self, message_text(self.delivered))
        if blocked is not None:
            self._end("blocked", output=blocked)
            if self.config.guardrails is None or self.config.guardrails.run_after_on_block:
                self.record.output_raw = await self._after(blocked)
            return
        content = await self._before(content_parts(self.delivered))
        output = await self._agent_body(content)
        self._token_usage()
        output = await self._after(output)
        blocked = await guardrails.run_output(self, output_text(output))
        if blocked is not None:
            self._end("blocked", output=blocked)
            return
        final = guardrails.redacted_output(self, output)
        self._end("completed", output=final)

    def _token_usage(self) -> None:
        prompt = sum(t.input_tokens for t in self.record.model_turns)
        candidates = sum(t.output_tokens for t in self.record.model_turns)
        self.context["token_usage"] = {
            "prompt_tokens": prompt,
            "candidates_tokens": candidates,
            "total_tokens": prompt + candidates,
        }
        self.context["duration_ms"] = round((time.perf_counter() - self._started) * 1000)

    async def _agent_body(self, content: dict[str, Any]) -> Any:
        from pytest_connic.runtime.agents import run_llm, run_sequential, run_tool_agent

        if self.config.type == AgentType.TOOL:
            return await run_tool_agent(self, content)
        if self.config.type == AgentType.SEQUENTIAL:
            return await run_sequential(self)
        return await run_llm(self, content)

    def _phase(self, phase: str) -> tuple[Any, str | None]:
        """The function to run for a middleware phase: (func, mock name) or (None, None)."""
        real = getattr(self.middleware, phase, None) if self.middleware else None
        if real is None:
            return None, None
        mock = self.scope.mocks.middleware(phase)
        if mock is not None:
            return mock.func, mock.name
        if self.scope.mocks.flags.get("strict_middleware_mocks"):
            raise RunAborted(
                f"strict_middleware_mocks: middleware {phase} of agent '{self.config.name}' has no mock "
                f"({self.scope.mocks.tried([f'middleware_{phase}'])})"
            )
        return real, None

    async def _before(self, content: dict[str, Any]) -> dict[str, Any]:
        func, mock = self._phase("before")
        if func is None:
            return content
        result = await call_middleware(self, "before", func, content, self.context)
        self.record.events.append({"type": "middleware", "phase": "before", "mock": mock})
        if result is None:
            raise RunFailed(f"middleware before of agent '{self.config.name}' returned None; it must return the content")
        return result  # type: ignore[no-any-return]

    async def _after(self, output: Any) -> Any:
        func, mock = self._phase("after")
        if func is None:
            return output
        result = await call_middleware(self, "after", func, output_text(output), self.context)
        self.record.events.append({"type": "middleware", "phase": "after", "mock": mock})
        if result is None:
            raise RunFailed(f"middleware after of agent '{self.config.name}' returned None; it must return the response")
        return result

    async def _cleanup(self) -> None:
        try:
            func, mock = self._phase("cleanup")
        except RunAborted as exc:
            self.record.failures.append(exc.message)
            return
        if func is None:
            return
        status = self.record.status if self.record.status in ("completed", "failed", "cancelled") else "completed"
        run = {"status": status, "error": self.record.error, "output": output_text(self.record.output_raw)}
        try:
            await self.scope.call(func, run, self.context)
            self.record.events.append({"type": "middleware", "phase": "cleanup", "mock": mock})
        except Exception as exc:  # noqa: BLE001  (logged, never changes the status: spec §9.5)
            self.record.events.append(
                {"type": "middleware", "phase": "cleanup", "mock": mock, "error": f"{type(exc).__name__}: {exc}"}
            )

    async def _await_background(self) -> None:
        if not self.background:
            return
        _done, pending = await asyncio.wait(self.background, timeout=5)
        for task in pending:
            task.cancel()


def output_binding(record: RunRecord) -> Any:
    """The ``output`` expression binding: JSON-parsed when it is a JSON string."""
    return parse_json(record.output_raw)
