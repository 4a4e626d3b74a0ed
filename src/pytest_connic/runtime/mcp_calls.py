"""One call of an MCP tool (``runtime/dispatch.py`` ``_execute``) and what it needs of a
connected server (:class:`~pytest_connic.runtime.state.McpConnection`, set up by ``runtime/mcp.py`` ``connect_servers``)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from pytest_connic.models.base import CassetteError
from pytest_connic.runtime import mcp_client
from pytest_connic.runtime.mocks import tool_ladder
from pytest_connic.runtime.signals import RunAborted
from pytest_connic.runtime.state import CatalogEntry, InvocationState, McpConnection

ENV = re.compile(r"\$\{(?!context\.)([A-Za-z_][A-Za-z0-9_]*)\}")


def label(inv: InvocationState, where: str, name: str) -> str:
    return f"{where}: mcp_servers '{name}' of agent '{inv.config.name}'"


def resolve_env(text: str, label: str, what: str) -> str:
    """``${VAR}`` from the environment; a variable that is not set ends the run (``RunAborted``):
    Connic resolves it from the project's variables, which this run does not have."""

    def sub(match: re.Match[str]) -> str:
        value = os.environ.get(match.group(1))
        if value is None:
            raise RunAborted(f"{label}: {what} uses ${{{match.group(1)}}}, which is not set in the environment "
                             "(Connic resolves it from the project's variables at deploy time; set it, for "
                             "example in the project's .env file with --connic-env)")
        return value

    return ENV.sub(sub, text)


def resolved(inv: InvocationState, connection: McpConnection, label: str) -> tuple[str, dict[str, str]]:
    """The URL and headers with ``${VAR}`` resolved (only when the server is really contacted, so
    a replay needs neither the server nor its secrets). The masker learns every header value, so
    none reaches a cassette, a report or a message."""
    url = resolve_env(connection.url, label, "url")
    headers = {k: resolve_env(v, label, f"header '{k}'") for k, v in connection.headers.items()}
    inv.services.masker.add([*headers.values(), *(os.environ.get(m.group(1), "") for m in ENV.finditer(connection.url))])
    return url, headers


def model_view(result: Mapping[str, object]) -> dict[str, object]:
    """An MCP tool's result as the model reads it: the MCP ``CallToolResult`` as JSON
    (``content``, ``isError``, ``structuredContent``), as Connic hands it to the model."""
    view: dict[str, object] = {"content": result.get("parts", []), "isError": bool(result.get("is_error"))}
    if "structured_content" in result:
        view["structuredContent"] = result["structured_content"]
    return view


async def call_mcp_tool(inv: InvocationState, entry: CatalogEntry,
                        params: dict[str, object]) -> mcp_client.McpResult:
    """One call of an MCP tool: recorded, replayed, or live. Returns the ``result`` binding's
    shape (:func:`mcp_client.result_value`); a transport failure raises ``CallFailed`` (the model
    reads it as the tool's error)."""
    assert entry.server is not None
    connection = inv.mcp[entry.server]
    named = label(inv, connection.where, connection.name)
    # a mock named for this very tool (``mock_<tool>``) is a mistake to say out loud; a wider rung
    # of the ladder (``mock``) serves custom tools only, as on Connic
    mock = inv.scope.mocks.first(tool_ladder(entry.ref)[:1])
    if mock is not None:
        raise RunAborted(f"{inv.scope.mocks.label}: {mock.name} mocks '{entry.ref}', a tool of {named}; MCP "
                         "tools cannot be mocked on Connic (only custom file tools can): remove the mock, or "
                         "record the server's answers in the cassette (docs/mcp-and-api-tools.md)")

    async def call() -> mcp_client.CallAnswer:
        url, headers = resolved(inv, connection, named)
        try:
            return await mcp_client.call_tool(url, headers, entry.name, params, inv.remaining_s())
        except mcp_client.McpMissing as exc:
            raise RunAborted(f"{named}: {exc}") from None

    try:
        raw = await inv.scope.models.external("mcp", f"{entry.server}/{entry.name}", params, call)
    except CassetteError as exc:  # a call the cassette does not record: the case's to fix
        raise RunAborted(str(exc)) from None
    try:
        return mcp_client.result_value(raw)
    except mcp_client.BadRecording as exc:
        raise RunAborted(f"{named}: the recorded result of '{entry.name}' (cassette calls, kind mcp) is not "
                         f"valid: {exc}") from None
