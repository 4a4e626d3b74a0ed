"""MCP servers (``mcp_servers:``) in a local run: not supported yet (issue 17, MCP support).

Connic connects an LLM agent's MCP servers when a run starts [guardrails-schemas-mcp]; a server
whose ``condition`` is false is not connected, and an ``optional: true`` server that fails to
connect is skipped and recorded in ``context["mcp_errors"]`` instead of failing the run [SDK
``McpServerConfig.optional``]. Locally no server is contacted, so every connected server is one
that could not be reached: a required one fails the case out loud (its tools would be missing,
so no verdict can be trusted), an optional one is handled as Connic handles an unreachable
optional server. :func:`connect_servers` is the one place issue 17 replaces.
"""

from __future__ import annotations

from typing import Any

from pytest_connic.runtime.dispatch import condition_holds
from pytest_connic.runtime.signals import RunAborted
from pytest_connic.runtime.state import CatalogEntry, InvocationState

#: why no server is reachable locally (the ``error`` of an ``mcp_errors`` entry)
NOT_SUPPORTED = "MCP servers are not supported locally yet (issue: MCP support)"


def _connects(inv: InvocationState, server: Any) -> bool:
    """Whether Connic would connect ``server`` for this run (its ``condition``, strictly)."""
    condition = getattr(server, "condition", None)
    entry = CatalogEntry(server.name, server.name, "", {}, "mcp", condition=condition)
    return condition_holds(inv, entry)


def connect_servers(inv: InvocationState) -> None:
    """Connect the agent's MCP servers for this run, as far as a local run can: raises
    ``RunAborted`` for the first required server; records each optional one in
    ``context["mcp_errors"]`` (``{"server", "error"}``) with a warning once per server."""
    servers = [s for s in getattr(inv.config, "mcp_servers", None) or [] if _connects(inv, s)]
    where = inv.config.source_path or inv.config.name
    for server in servers:
        if not server.optional:
            raise RunAborted(
                f"{where}: mcp_servers '{server.name}' of agent '{inv.config.name}': {NOT_SUPPORTED}; the "
                f"agent's tools from '{server.name}' would be missing, so the case cannot run locally "
                "(mark the server `optional: true` to run without its tools, as Connic does when an "
                "optional server is unreachable)")
    errors: list[dict[str, Any]] = []
    for server in servers:
        errors.append({"server": server.name, "error": NOT_SUPPORTED})
        inv.services.host.warn_once(
            f"mcp_optional:{inv.config.name}:{server.name}",
            f"{where}: optional mcp_servers '{server.name}' of agent '{inv.config.name}' is skipped: "
            f"{NOT_SUPPORTED}; the runs go on without its tools, recorded in context['mcp_errors'] as "
            "Connic records an unreachable optional server")
    if errors:
        inv.context.setdefault("mcp_errors", []).extend(errors)
        for error in errors:
            inv.record.events.append({"type": "mcp", "name": f"mcp server '{error['server']}' skipped (optional): "
                                      f"{error['error']}", **error})
