"""The wire side of ``mcp_servers``: a Streamable HTTP client on the official ``mcp`` SDK (the
``[mcp]`` extra, imported lazily), and the shapes of what a server answers.

Connic connects remote Streamable HTTP servers only and consumes their tools only
[guardrails-schemas-mcp]. Each operation here opens its own MCP session (initialize, then
``tools/list`` or ``tools/call``) and closes it: a failure of any step is a :class:`CallFailed`
whose text says what failed, so that a recording keeps it and a replay raises it again.

The shapes (JSON, as the run's cassette records them, docs/mcp-and-api-tools.md):

- a tool list: ``[{"name", "description", "input_schema"}]``;
- a call's result: ``{"content": [MCP content blocks], "is_error": bool}`` and
  ``"structured_content"`` when the server sent one;
- what the ``result`` binding, the trace and the model see (:func:`result_value`):
  ``{"is_error": bool, "parts": [content blocks]}`` (and ``"structured_content"``).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from types import ModuleType, TracebackType
from typing import Protocol, TypedDict, TypeVar

from pytest_connic.errors import ConnicError
from pytest_connic.jsonsafe import JsonObject, JsonValue
from pytest_connic.models.base import CallFailed

INSTALL = "pip install pytest-connic[mcp]"
#: seconds a connection and its handshake may take at most (the run's own deadline may be shorter)
CONNECT_TIMEOUT_S = 30.0

_T = TypeVar("_T")


class McpMissing(ConnicError):
    """The ``mcp`` package is not installed and a run needs a live MCP server."""


class ToolInfo(TypedDict):
    """One tool of a server's list, as recorded."""

    name: str
    description: str
    input_schema: JsonObject


class _McpResult(TypedDict):
    is_error: bool
    parts: list[JsonValue]


class McpResult(_McpResult, total=False):
    """A call's result as the ``result`` binding, the trace and the model see it."""

    structured_content: JsonValue


class _CallAnswer(TypedDict):
    content: JsonValue
    is_error: bool


class CallAnswer(_CallAnswer, total=False):
    """A call's result as the server answered it (and the cassette records it)."""

    structured_content: JsonValue


class _Dumpable(Protocol):
    """An answer of the ``mcp`` SDK: a pydantic model."""

    def model_dump(self, *, mode: str, by_alias: bool, exclude_none: bool) -> JsonObject: ...


class _Session(Protocol):
    """What this module uses of the ``mcp`` SDK's ``ClientSession``."""

    async def initialize(self) -> object: ...

    async def list_tools(self, *args: object, **kwargs: object) -> _Dumpable: ...

    async def call_tool(self, name: str, arguments: dict[str, object]) -> _Dumpable: ...


#: a transport's context manager: it yields the read and write streams (and more, by release)
_Streams = AbstractAsyncContextManager[tuple[object, ...]]


def _sdk() -> tuple[Callable[[object, object], AbstractAsyncContextManager[_Session]], ModuleType, ModuleType]:
    """(ClientSession, the transport module, mcp.types), or ``McpMissing``."""
    try:
        session = importlib.import_module("mcp.client.session")
        transport = importlib.import_module("mcp.client.streamable_http")
        types = importlib.import_module("mcp.types")
    except ImportError as exc:
        raise McpMissing(f"the mcp package is not installed ({exc}); MCP servers need the [mcp] extra: "
                         f"{INSTALL}") from None
    return session.ClientSession, transport, types


def _open(transport: ModuleType, url: str, headers: dict[str, str]) -> _Streams:
    """The Streamable HTTP transport's context manager, whichever ``mcp`` release is installed:
    ``streamable_http_client(url, http_client=...)`` (recent releases, headers on the HTTP
    client) or ``streamablehttp_client(url, headers=...)`` (1.8 and later)."""
    modern = getattr(transport, "streamable_http_client", None)
    if modern is not None and "http_client" in inspect.signature(modern).parameters:
        httpx_utils = importlib.import_module("mcp.shared._httpx_utils")
        client = httpx_utils.create_mcp_http_client(headers=headers or None)
        return _OwnedClient(modern, url, client)
    streams: _Streams = transport.streamablehttp_client(url, headers=headers or None)
    return streams


class _OwnedClient:
    """``streamable_http_client`` over an HTTP client this module opens and closes."""

    def __init__(self, factory: Callable[..., _Streams], url: str,
                 client: AbstractAsyncContextManager[object]) -> None:
        self.factory, self.url, self.client = factory, url, client
        self._inner: _Streams | None = None

    async def __aenter__(self) -> tuple[object, ...]:
        await self.client.__aenter__()
        try:
            self._inner = self.factory(self.url, http_client=self.client)
            return await self._inner.__aenter__()
        except BaseException:
            await self.client.__aexit__(None, None, None)
            raise

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        traceback: TracebackType | None) -> None:
        try:
            if self._inner is not None:
                await self._inner.__aexit__(exc_type, exc, traceback)
        finally:
            await self.client.__aexit__(None, None, None)


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) exception groups."""
    inner = getattr(exc, "exceptions", None)
    while isinstance(inner, tuple) and inner and isinstance(inner[0], BaseException):
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    return exc


def _reason(exc: BaseException) -> str:
    leaf = _leaf(exc)
    text = str(leaf).strip() or type(leaf).__name__
    cause = leaf.__cause__ or leaf.__context__
    if cause is not None and str(cause).strip() and str(cause).strip() not in text:
        text = f"{text} ({str(cause).strip()})"
    return f"{type(leaf).__name__}: {text}" if type(leaf).__name__ not in text else text


def _dump(value: _Dumpable) -> JsonObject:
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


async def _session_do(url: str, headers: dict[str, str], timeout_s: float | None, what: str,
                      work: Callable[[_Session, ModuleType], Awaitable[_T]]) -> _T:
    client_session, transport, types = _sdk()

    async def run() -> _T:
        async with _open(transport, url, headers) as streams:
            read, write = streams[0], streams[1]
            async with client_session(read, write) as session:
                await session.initialize()
                return await work(session, types)

    bound = CONNECT_TIMEOUT_S if timeout_s is None else min(timeout_s, CONNECT_TIMEOUT_S * 10)
    try:
        return await asyncio.wait_for(run(), timeout=bound)
    except asyncio.TimeoutError:
        raise CallFailed(f"{what} at {url} timed out after {bound:g}s") from None
    except CallFailed:
        raise
    except Exception as exc:  # noqa: BLE001  (transport, protocol and HTTP errors of any kind)
        raise CallFailed(f"{what} at {url} failed: {_reason(exc)}") from None


async def list_tools(url: str, headers: dict[str, str], timeout_s: float | None = None) -> list[ToolInfo]:
    """The server's tools (every page of ``tools/list``) as JSON: ``[{name, description, input_schema}]``."""

    async def work(session: _Session, types: ModuleType) -> list[ToolInfo]:
        tools: list[ToolInfo] = []
        cursor: str | None = None
        for _ in range(1000):  # a server that pages forever
            if cursor is None:
                page = await session.list_tools()
            elif "params" in inspect.signature(session.list_tools).parameters:  # recent releases
                page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
            else:
                page = await session.list_tools(cursor=cursor)  # 1.x up to the params form
            data = _dump(page)
            listed = data.get("tools")
            for tool in listed if isinstance(listed, list) else []:
                if isinstance(tool, dict):  # pydantic's dump of a ``Tool``
                    tools.append(_tool_info(tool))
            following = data.get("nextCursor")
            cursor = following if isinstance(following, str) else None
            if not cursor:
                break
        return tools

    return await _session_do(url, headers, timeout_s, "listing the tools", work)


def _tool_info(tool: JsonObject) -> ToolInfo:
    """A tool of ``tools/list`` (MCP's JSON) as this module records it."""
    name, description, schema = tool.get("name", ""), tool.get("description"), tool.get("inputSchema")
    return {"name": str(name), "description": str(description or ""),
            "input_schema": schema if isinstance(schema, dict) and schema else {"type": "object"}}


async def call_tool(url: str, headers: dict[str, str], name: str, arguments: dict[str, object],
                    timeout_s: float | None = None) -> CallAnswer:
    """One ``tools/call`` as JSON: ``{"content": [...], "is_error": bool[, "structured_content"]}``."""

    async def work(session: _Session, types: ModuleType) -> CallAnswer:
        data = _dump(await session.call_tool(name, arguments))
        result: CallAnswer = {"content": data.get("content") or [], "is_error": bool(data.get("isError"))}
        if data.get("structuredContent") is not None:
            result["structured_content"] = data["structuredContent"]
        return result

    return await _session_do(url, headers, timeout_s, f"calling the tool '{name}'", work)


class BadRecording(ConnicError):
    """A recorded (or hand-written) answer that does not have the documented shape."""


def tools_value(value: object) -> list[ToolInfo]:
    """A tool list as recorded, checked: each tool ``{name, description?, input_schema?}``
    (``inputSchema``, MCP's own spelling, is read too)."""
    if not isinstance(value, list):
        raise BadRecording(f"a tool list must be a list of tools, found {type(value).__name__}")
    tools: list[ToolInfo] = []
    for n, tool in enumerate(value):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            raise BadRecording(f"tool {n} of the list must be a mapping with a 'name', found {tool!r:.100}")
        schema = tool.get("input_schema", tool.get("inputSchema")) or {"type": "object"}
        if not isinstance(schema, dict):
            raise BadRecording(f"the input_schema of tool '{tool['name']}' must be a mapping")
        tools.append({"name": tool["name"], "description": str(tool.get("description") or ""),
                      "input_schema": schema})
    return tools


def result_value(value: object) -> McpResult:
    """A recorded call result as the ``result`` binding sees it: ``{"is_error", "parts"}`` (and
    ``"structured_content"``). A hand-written text result becomes one text part."""
    if isinstance(value, str):
        return {"is_error": False, "parts": [{"type": "text", "text": value}]}
    if not isinstance(value, dict):
        raise BadRecording(f"a call result must be a mapping {{content, is_error}}, found {type(value).__name__}")
    content = value.get("content", value.get("parts", []))
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise BadRecording("the 'content' of a call result must be a list of MCP content blocks")
    result: McpResult = {"is_error": bool(value.get("is_error", value.get("isError", False))),
                              "parts": content}
    structured = value.get("structured_content", value.get("structuredContent"))
    if structured is not None:
        result["structured_content"] = structured
    return result
