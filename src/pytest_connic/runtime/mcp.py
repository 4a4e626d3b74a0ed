"""MCP servers (``mcp_servers:``) of an LLM agent in a local run (issue 17).

When a run of an LLM agent starts (after ``before`` middleware), Connic connects each of its MCP
servers whose ``condition`` holds and auto-loads their tools [guardrails-schemas-mcp]:

- ``url`` resolves ``${VAR}`` from the environment; ``--connic-mcp-url NAME=URL`` (ini
  ``connic_mcp_urls``) points a server at another URL instead;
- ``headers`` resolve ``${VAR}`` (environment) then ``${context.<dotted.path>}`` (the run
  context), strictly: a missing key, a ``None`` value or a ``_``-prefixed key fails the run.
  Header values never reach a cassette or a report (the masker learns them);
- the server's tool list goes through ``models.external("mcp_tools", server, {}, ...)``, so a
  replay offers the model exactly the recorded tools; ``tools:`` filters it; the tools join the
  agent's catalogue under their own names (``kind="mcp"``), ``discoverable: true`` ones only
  through ``search_tools``/``use_tool``;
- an ``optional: true`` server that cannot be reached is skipped into ``context["mcp_errors"]``
  (``{"server", "error"}``) and the run goes on; a required one fails the run.

A call goes through ``models.external("mcp", "<server>/<tool>", arguments, ...)``
(:func:`call_mcp_tool`, from ``runtime/dispatch.py``); no agent hooks run for it and it cannot
be mocked, as on Connic.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from pathlib import Path

from pytest_connic.models.base import CallFailed
from pytest_connic.project.sdk import McpServerConfig
from pytest_connic.records.events import McpSkippedEvent, McpToolsEvent
from pytest_connic.runtime import mcp_client
from pytest_connic.runtime.dispatch import condition_holds, tool_catalog
from pytest_connic.runtime.mcp_calls import ENV, label, resolved
from pytest_connic.runtime.signals import RunAborted, RunFailed
from pytest_connic.runtime.state import CatalogEntry, InvocationState, McpConnection

_CONTEXT = re.compile(r"\$\{context\.([^}]*)\}")


def server_location(inv: InvocationState, name: str) -> str:
    """``<agent file>:<line>`` of the ``mcp_servers`` entry called ``name`` (the file alone when
    the entry comes from a ``_defaults.yaml`` or the file cannot be read)."""
    source = str(inv.config.source_path or inv.config.name)
    path = Path(source)
    if not path.is_absolute():
        path = inv.services.root / path
    loaded = inv.services.project.yaml_file(path)
    if loaded is None:
        return source
    data, positions = loaded
    servers = data.get("mcp_servers") if isinstance(data, dict) else None
    for index, entry in enumerate(servers if isinstance(servers, list) else []):
        if isinstance(entry, dict) and entry.get("name") == name:
            return f"{source}:{positions.of(('mcp_servers', index))[0]}"
    return source


def resolve_context(text: str, context: Mapping[str, object], label: str, header: str) -> str:
    """``${context.<dotted.path>}`` from the run context, strictly as Connic does: a missing key
    (``KeyError``), a ``None`` value (``ValueError``) or a ``_``-prefixed key fail the run."""

    def sub(match: re.Match[str]) -> str:
        path = match.group(1)
        keys = path.split(".")
        where = f"{label}: header '{header}' uses ${{context.{path}}}"
        if any(not k for k in keys):
            raise RunFailed(f"{where}: not a dotted path of context keys")
        reserved = next((k for k in keys if k.startswith("_")), None)
        if reserved is not None:
            raise RunFailed(f"{where}: keys starting with '_' are reserved and not interpolable ('{reserved}')")
        value: object = context
        for n, key in enumerate(keys):
            if not isinstance(value, dict) or key not in value:
                missing = ".".join(keys[: n + 1])
                raise RunFailed(f"{where}: KeyError: context.{missing} is not set (resolution is strict: "
                                "set it in the agent's before middleware)")
            value = value[key]
        if value is None:
            raise RunFailed(f"{where}: ValueError: context.{path} is None (resolution is strict)")
        return value if isinstance(value, str) else str(value)

    return _CONTEXT.sub(sub, text)


def _skip(inv: InvocationState, server: McpServerConfig, label: str, error: str, note: str = "") -> None:
    """An optional server that cannot be reached: ``context["mcp_errors"]``, an event, a warning."""
    errors = inv.context.setdefault("mcp_errors", [])
    if isinstance(errors, list):  # what before middleware put there otherwise is the user's
        errors.append({"server": server.name, "error": error})
    inv.record.events.append(McpSkippedEvent(name=f"mcp server '{server.name}' skipped (optional): {error}",
                                             server=server.name, error=error))
    inv.services.host.warn_once(
        f"mcp_optional:{inv.config.name}:{server.name}:{error}",
        f"{label} (optional) could not be reached: {error}; the run goes on without its tools, recorded in "
        f"context['mcp_errors'] as Connic records an unreachable optional server{note}")


async def connect_servers(inv: InvocationState) -> None:
    """Connect the agent's MCP servers for this run and add their tools to its catalogue."""
    servers = [s for s in getattr(inv.config, "mcp_servers", None) or [] if condition_holds(inv, getattr(s, "condition", None))]
    if not servers:
        return
    catalog = tool_catalog(inv)
    overrides = getattr(inv.services, "mcp_urls", None) or {}
    for server in servers:
        where = server_location(inv, server.name)
        named = label(inv, where, server.name)
        if getattr(server, "oauth", None) is not None:
            why = "per-user OAuth (oauth:) is not supported locally"
            if not server.optional:
                raise RunAborted(f"{named}: {why}, so its tools would be missing and the case cannot run locally")
            _skip(inv, server, named, why, "; on Connic this server would be connected, so this run differs")
            continue
        if getattr(server, "bridge", None):
            inv.services.host.warn_once(
                f"mcp_bridge:{inv.config.name}:{server.name}",
                f"{named}: bridge is not used locally; the server's URL is contacted directly (point it at a "
                "reachable deployment with --connic-mcp-url NAME=URL)")
        url = overrides.get(server.name) or server.url
        headers: dict[str, str] = {}
        for key, value in (server.headers or {}).items():
            headers[str(key)] = resolve_context(str(value), inv.context, named, str(key))
        inv.services.masker.add(headers.values())  # header values never reach a cassette or a report
        connection = McpConnection(server.name, url, headers, where)
        inv.mcp[server.name] = connection
        try:
            raw = await inv.scope.models.external(
                "mcp_tools", server.name, {}, functools.partial(_list, inv, connection, named))
        except CallFailed as exc:
            if not server.optional:
                raise RunFailed(f"{named} could not be reached: {exc}; a required server fails the run "
                                "(`optional: true` lets the run go on without its tools)") from None
            _skip(inv, server, named, str(exc))
            continue
        try:
            tools = mcp_client.tools_value(raw)
        except mcp_client.BadRecording as exc:
            raise RunAborted(f"{named}: the recorded tool list (cassette calls, kind mcp_tools) is not "
                             f"valid: {exc}") from None
        _add_tools(inv, catalog, server, named, tools)


async def _list(inv: InvocationState, connection: McpConnection, label: str) -> list[mcp_client.ToolInfo]:
    url, headers = resolved(inv, connection, label)
    try:
        return await mcp_client.list_tools(url, headers, inv.remaining_s())
    except mcp_client.McpMissing as exc:
        raise RunAborted(f"{label}: {exc}") from None


def _add_tools(inv: InvocationState, catalog: dict[str, CatalogEntry], server: McpServerConfig, label: str,
               tools: list[mcp_client.ToolInfo]) -> None:
    wanted = server.tools
    offered = [t["name"] for t in tools]
    if wanted is not None:
        names = [ENV.sub(lambda m: os.environ.get(m.group(1), m.group(0)), str(w)) for w in wanted]
        unknown = [n for n in names if n not in offered]
        if unknown:
            inv.services.host.warn_once(
                f"mcp_filter:{inv.config.name}:{server.name}:{','.join(unknown)}",
                f"{label}: tools names {', '.join(repr(n) for n in unknown)}, which the server does not offer "
                f"(it offers: {', '.join(offered) or 'no tools'})")
        tools = [t for t in tools if t["name"] in names]
    added = []
    for tool in tools:
        name = tool["name"]
        if name in catalog:
            other = catalog[name]
            whose = f"MCP server '{other.server}'" if other.server else "the agent's own tools"
            inv.services.host.warn_once(
                f"mcp_duplicate:{inv.config.name}:{server.name}:{name}",
                f"{label}: its tool '{name}' has the name of a tool of {whose}; the model is offered that "
                "one only")
            continue
        catalog[name] = CatalogEntry(name, name, tool["description"], tool["input_schema"], "mcp",
                                     discoverable=bool(server.discoverable), server=server.name)
        added.append(name)
    how = "through search_tools" if server.discoverable else "to the model"
    inv.record.events.append(McpToolsEvent(server=server.name, tools=tuple(added),
                                           name=f"mcp server '{server.name}': {len(added)} tool(s) offered {how}"))
