"""A real MCP server (the official ``mcp`` SDK, Streamable HTTP) on 127.0.0.1 for tests.

::

    with McpTestServer(docs_tools) as server:       # serving from a background thread
        url = server.url                             # http://127.0.0.1:PORT/mcp
    server.headers                                   # the HTTP headers of every request received
    server.calls                                     # (tool, arguments) of every tools/call

``tools`` is a function ``(mcp_server, calls) -> None`` that registers tools with ``@mcp_server.tool()``.
Leaving the ``with`` block stops the server and waits for its thread.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable
from typing import Any

from helpers.fake_provider import unused_port


def _server_class() -> Any:
    try:
        return importlib.import_module("mcp.server.mcpserver").MCPServer  # mcp 2.x
    except ImportError:
        return importlib.import_module("mcp.server.fastmcp").FastMCP  # mcp 1.x


class McpTestServer:
    def __init__(self, tools: Callable[[Any, list[tuple[str, dict[str, Any]]]], None], *, name: str = "test") -> None:
        self.port = unused_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.headers: list[dict[str, str]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.server = _server_class()(name)
        tools(self.server, self.calls)
        self._thread: threading.Thread | None = None
        self._uvicorn: Any = None

    def _app(self) -> Any:
        app = self.server.streamable_http_app()
        headers = self.headers

        async def recording(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope.get("type") == "http":
                headers.append({k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]})
            await app(scope, receive, send)

        return recording

    def __enter__(self) -> McpTestServer:  # noqa: PYI034
        import uvicorn

        config = uvicorn.Config(self._app(), host="127.0.0.1", port=self.port, log_level="error", lifespan="on")
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._uvicorn.run, name="mcp-test-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._uvicorn.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the MCP test server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=20)
            self._thread = None


def docs_tools(server: Any, calls: list[tuple[str, dict[str, Any]]]) -> None:
    """A small documentation server: ``search_docs``, ``get_page``, ``broken`` (always an error)."""

    @server.tool(description="Search the documentation for a query")
    def search_docs(query: str) -> str:
        calls.append(("search_docs", {"query": query}))
        return f"3 pages about {query}: intro, install, usage"

    @server.tool(description="Read one documentation page by its name")
    def get_page(page: str) -> str:
        calls.append(("get_page", {"page": page}))
        return f"page {page}: pip install things"

    @server.tool(description="A tool that always fails")
    def broken() -> str:
        calls.append(("broken", {}))
        raise ValueError("the broken tool broke")
