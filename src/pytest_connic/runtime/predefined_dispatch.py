"""Connic's predefined tools, locally (the SDK's connic/loader.py, PREDEFINED_TOOL_NAMES; the SDK's connic/loader.py and connic/tools.py).

Every call, whether the model asked for it or user code awaited ``connic.tools.<name>``,
goes first to the ``pytest_connic_predefined_tool`` hook (a conftest.py may supply any
tool), then to the local implementation:

* ``trigger_agent`` / ``trigger_agent_at``: child agents in-process (``children.py``);
* ``db_*``, ``file_*``, ``retrieval_*`` (and the knowledge aliases): the session's local
  services, bound to the calling agent's access rules and run;
* ``send_connector``: recorded in the run record and the trace, never delivered;
* ``web_search`` / ``web_read_page``: for real (``predefined/web.py``) through the run's models
  (``external("web", ...)``): recorded in the cassette and replayed offline; a call the cassette
  does not record fails the run in replay;
* ``web_browser_*``: refused with a message naming the hook.

The hook answers a web tool first, in every mode, and is not recorded (it is the pluggable search
backend, local code). A call that fails, and whose error the model reads, is marked in the trace
(``note`` event): Connic counts it as a call for ``expected_tool_calls`` all the same.

Automatic outbound connectors (``connectors/<key>.yaml`` linking an agent with
``usage: automatic``) are recorded the same way when a run completes.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pytest_connic.errors import ConnicError
from pytest_connic.jsonsafe import JsonObject, to_jsonable
from pytest_connic.models.base import CassetteError
from pytest_connic.project.sdk import AgentLink, ConnectorFile, load_errors
from pytest_connic.records.events import (
    NoteEvent,
    OutboundEvent,
    PredefinedFailedNoteEvent,
    StopProcessingEvent,
)
from pytest_connic.runtime.children import trigger_agent, trigger_agent_at
from pytest_connic.runtime.predefined import web
from pytest_connic.runtime.signals import PASS_THROUGH, RunAborted
from pytest_connic.runtime.state import InvocationState
from pytest_connic.warnings import ConnicWarning

if TYPE_CHECKING:
    from pytest_connic.runtime.predefined import ToolFunction

HOOK = "pytest_connic_predefined_tool"
OFFLINE_HINT = (
    "{name} needs the internet, which pytest-connic does not use: there is no local implementation. "
    f"Implement the hook {HOOK}(config, name, params, context) in conftest.py to supply its result "
    "(docs/predefined-tools.md)"
)
_ACTION_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class PredefinedUnavailable(ConnicError):
    """A predefined tool with no local implementation and no hook answer."""


async def _from_hook(inv: InvocationState, name: str, params: dict[str, object]) -> tuple[bool, object]:
    result = inv.services.host.predefined_tool(name, params, inv.context)
    if inspect.isawaitable(result):
        result = await result
    return result is not None, result


def _data_tools(inv: InvocationState) -> dict[str, ToolFunction]:
    """The local data tools as this run sees them: the agent's access rules, its run id
    (``file_list(scope="run")``) and session (the run of the case, children included)."""
    if inv.data_tools is None:
        inv.data_tools = inv.services.local.tools_for(inv.config.name, inv.config, run_id=inv.record.run_id,
                                                      session_id=inv.session_id)
    return inv.data_tools


async def run_predefined(inv: InvocationState, name: str, params: dict[str, object]) -> object:
    """Run predefined tool ``name`` for ``inv`` with ``params``."""
    try:
        return await _run(inv, name, params)
    except PASS_THROUGH:  # ends the run its own way: no failed call the model reads
        raise
    except Exception as exc:
        _mark_failed(inv, name, exc)
        raise


async def _run(inv: InvocationState, name: str, params: dict[str, object]) -> object:
    if name == "send_connector":
        return await send_connector(inv, **params)
    if name.startswith("web_"):
        return await _web(inv, name, params)
    answered, result = await _from_hook(inv, name, params)
    if answered:
        return result
    if name == "trigger_agent":
        return await trigger_agent(inv, **params)
    if name == "trigger_agent_at":
        return await trigger_agent_at(inv, **params)
    func = _data_tools(inv).get(name)
    if func is None:
        message = OFFLINE_HINT.format(name=name)
        inv.services.host.warn_once(f"predefined-offline:{name}", message, ConnicWarning, inv.scope.location)
        raise PredefinedUnavailable(message)
    check_arguments(name, func, params)
    return await func(**params)


def check_arguments(name: str, func: Callable[..., object], params: Mapping[str, object]) -> None:
    """The model's arguments for predefined tool ``name`` checked against its implementation
    ``func``: one it does not take (or one missing) is a ``TypeError`` in the tool's name, with the
    arguments it takes (``web_search: got an unexpected keyword argument 'city' (its arguments:
    query, ...)``), not in the name of the Python function behind it (``tavily_search()``)."""
    signature = inspect.signature(func)
    try:
        signature.bind(**params)
    except TypeError as exc:
        taken = [p.name for p in signature.parameters.values()
                 if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]
        raise TypeError(f"{name}: {exc} (its arguments: {', '.join(taken)})") from None


# --------------------------------------------------------------------------- web tools


async def _web(inv: InvocationState, name: str, params: dict[str, object]) -> object:
    """A web tool: the hook (local code, answering in every mode, never recorded), else the real
    thing through ``external("web", ...)`` (recorded, replayed), or a refusal (the browser)."""
    answered, result = await _from_hook(inv, name, params)
    if answered:
        return result
    if name not in web.WEB_TOOLS:
        raise PredefinedUnavailable(web.browser_refusal(name))

    async def call() -> JsonObject:  # recording or live: what a replay returns was recorded
        implementation = web.read_page if name == "web_read_page" else web.tavily_search
        check_arguments(name, implementation, params)
        return await implementation(**params)

    try:
        return await inv.scope.models.external("web", name, to_jsonable(params), call)
    except CassetteError as exc:
        raise RunAborted(f"{name}: {exc}") from None


def _mark_failed(inv: InvocationState, name: str, exc: BaseException) -> None:
    """A failed predefined call the model read as an error: a note in the trace, since Connic
    counts it as a call for ``expected_tool_calls`` all the same."""
    note = (f"{name} failed and the model read the error ({type(exc).__name__}: {exc}); Connic counts a "
            "failed call as a call, so expected_tool_calls that name it still match (docs/predefined-tools.md)")
    inv.record.events.append(PredefinedFailedNoteEvent(name=f"note: {name} failed", text=note, tool=name))
    inv.services.host.warn_once(f"predefined-failed:{name}", note, ConnicWarning, inv.scope.location)


# --------------------------------------------------------------------------- outbound connectors


def _connectors(inv: InvocationState) -> tuple[dict[str, ConnectorFile], list[str]]:
    """The project's ``connectors/*.yaml`` as the SDK loads them, and their load errors (cached)."""
    services = inv.services
    if services.connectors is None:
        project = services.project
        loader = project.loader
        known = len(load_errors(loader))
        connectors = loader.load_connectors(list(project.agents.values()))
        services.connectors = (connectors, [e for e in load_errors(loader)[known:] if "connector" in e])
    return services.connectors


def _links(inv: InvocationState, usage: str) -> list[tuple[str, AgentLink]]:
    """``(connector key, AgentLink)`` of every outbound connector linking this agent with ``usage``."""
    connectors, _errors = _connectors(inv)
    found = []
    for key, connector in connectors.items():
        if connector.mode != "outbound":
            continue
        for _environment, spec in connector.specs():
            for link in spec["agents"]:
                if link.name == inv.config.name and link.outbound and link.outbound.usage == usage:
                    found.append((key, link))
    return found


def _record_outbound(inv: InvocationState, entry: Mapping[str, object]) -> None:
    entry = {**entry, "agent": inv.config.name, "delivered": False}
    inv.record.outbound.append(entry)
    label = entry.get("action_name") or entry.get("connector")
    name = f"outbound {entry['kind']} {label} (recorded, not delivered)"
    inv.record.events.append(OutboundEvent(name=name, entry=entry))


async def send_connector(inv: InvocationState, action_name: object, payload: object,
                         idempotency_key: object = None) -> object:
    """``send_connector``: validated, recorded in the run record and trace, never delivered."""
    if not isinstance(action_name, str) or not _ACTION_NAME.fullmatch(action_name):
        raise ValueError("action_name must start with a lowercase letter and contain only lowercase "
                         f"letters, numbers or underscores (64 characters max); got {action_name!r}")
    if not isinstance(payload, dict):
        raise TypeError(f"payload must be a dict, got {type(payload).__name__}")
    connector = None
    if (inv.services.project.root / "connectors").is_dir():
        matches = [key for key, link in _links(inv, "middleware") if link.outbound.action_name == action_name]
        if not matches:
            errors = _connectors(inv)[1]
            broken = f" (connectors that failed to load: {'; '.join(errors)})" if errors else ""
            raise ValueError(f"no outbound connector in connectors/ links agent '{inv.config.name}' with "
                             f"usage middleware and action_name '{action_name}'{broken}")
        connector = matches[0]
    run_id = f"local-{inv.scope.new_id()}"
    _record_outbound(inv, {"kind": "send_connector", "action_name": action_name, "connector": connector,
                           "payload": payload, "idempotency_key": idempotency_key,
                           "connector_run_id": run_id})
    params = {"action_name": action_name, "payload": payload, "idempotency_key": idempotency_key}
    answered, result = await _from_hook(inv, "send_connector", params)
    if answered:
        return result
    return {"status": "queued", "queued": True, "connector_run_id": run_id}


def record_automatic_outbound(inv: InvocationState) -> None:
    """After a run: what ``usage: automatic`` connectors would deliver (completed runs only,
    not after ``StopProcessing(publish_outbound=False)``). Stages of a pipeline are not runs."""
    if inv.record.status != "completed" or not (inv.root or inv.triggered):
        return
    if any(isinstance(e, StopProcessingEvent) and not e.publish_outbound for e in inv.record.events):
        return
    if not (inv.services.project.root / "connectors").is_dir():
        return
    try:
        links = _links(inv, "automatic")
    except Exception as exc:  # noqa: BLE001  # a broken connectors/ file must not break the run's bookkeeping
        note = f"outbound connectors not recorded: {type(exc).__name__}: {exc}"
        inv.record.events.append(NoteEvent(name=f"note: {note}", text=note))
        return
    for key, link in links:
        if link.outbound.source:  # only runs that a listed connector started; a test run has none
            continue
        _record_outbound(inv, {"kind": "automatic", "connector": key, "payload": inv.record.output_raw})
