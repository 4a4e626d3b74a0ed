"""Connic's predefined tools, locally: the user's hook first, then the local
implementation; ``trigger_agent`` runs children in-process; the web needs a hook."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from .children import trigger_agent, trigger_agent_at

if TYPE_CHECKING:
    from .invocation import Invocation

WEB_HINT = (
    "{name} needs the internet and cannot run offline; implement the hook "
    "pytest_connic_predefined_tool in conftest.py to supply it (docs/predefined-tools.md)"
)


class PredefinedUnavailable(Exception):
    """A predefined tool with no local implementation and no hook answer."""


async def _from_hook(inv: Invocation, name: str, params: dict[str, Any]) -> tuple[bool, Any]:
    hook = inv.services.hook
    if hook is None:
        return False, None
    result = hook.pytest_connic_predefined_tool(
        config=inv.services.config, name=name, params=params, context=inv.context
    )
    if inspect.isawaitable(result):
        result = await result
    return result is not None, result


async def run_predefined(inv: Invocation, name: str, params: dict[str, Any]) -> Any:
    """Run predefined tool ``name`` for ``inv`` with ``params``."""
    answered, result = await _from_hook(inv, name, params)
    if answered:
        return result
    if name == "trigger_agent":
        return await trigger_agent(inv, **params)
    if name == "trigger_agent_at":
        return await trigger_agent_at(inv, **params)
    tools = inv.services.data_tools(inv.agent)
    func = tools.get(name)
    if func is None:
        raise PredefinedUnavailable(WEB_HINT.format(name=name))
    return await func(**params)


def send_connector_record(inv: Invocation, action_name: str, payload: Any, idempotency_key: str | None) -> dict[str, Any]:
    """``send_connector``: recorded in the trace, never delivered."""
    entry = {"action_name": action_name, "payload": payload, "idempotency_key": idempotency_key, "delivered": False}
    inv.record.outbound.append(entry)
    return {"queued": True, "status": "recorded", "connector_run_id": f"local-{len(inv.record.outbound)}"}
