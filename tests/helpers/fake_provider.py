"""A fake OpenAI-compatible model provider for tests: real HTTP on 127.0.0.1.

Dependency-free (standard library only), so plugin-level tests (pytester) can
import it as well as unit tests. It serves ``POST /v1/chat/completions`` and
``POST /chat/completions`` on a random free port, from a background thread::

    from helpers.fake_provider import FakeProvider, Reply, error, text, tool_call

    script = [tool_call("add", {"a": 4, "b": 6}), text('{"sum": 10}')]
    with FakeProvider(script) as fp:
        monkeypatch.setenv("OPENAI_API_BASE", fp.base_url)   # http://127.0.0.1:PORT/v1
        ...                                                  # run the agent against openai/<any>
    assert fp.requests[0].headers["authorization"] == "Bearer sk-test"

The script is either a sequence of replies, served in order (one per request;
when it runs out, the server answers 500 "script exhausted"), or a function
``(request_json) -> reply`` called for every request. A reply is a ``str``
(final content), a :class:`Reply`, or a ``dict`` sent verbatim as the JSON body.
``Reply(status=500)`` / ``error(429)`` script faults; ``latency`` slows every
answer, ``Reply.delay`` one answer.

Every request received is kept in ``fp.requests`` (path, lower-cased headers,
parsed JSON body), in arrival order, so tests can assert what reached the wire.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeProvider", "Received", "Reply", "error", "text", "tool_call", "tool_calls", "unused_port"]

PATHS = ("/v1/chat/completions", "/chat/completions")


@dataclass
class Reply:
    """One scripted answer.

    ``tool_calls`` entries are ``{"name": ..., "arguments": mapping-or-raw-string, "id": optional}``.
    With ``status >= 400`` the server answers an OpenAI-style error body with ``message``.
    """

    content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    input_tokens: int = 10
    output_tokens: int = 5
    status: int = 200
    message: str = "fake provider error"
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


ScriptItem = str | Reply | dict[str, Any]
Script = Iterable[ScriptItem] | Callable[[dict[str, Any]], ScriptItem]


def text(content: str, *, input_tokens: int = 10, output_tokens: int = 5) -> Reply:
    """A final answer."""
    return Reply(content=content, input_tokens=input_tokens, output_tokens=output_tokens)


def tool_call(name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None) -> Reply:
    """A turn that asks for one tool."""
    call: dict[str, Any] = {"name": name, "arguments": {} if arguments is None else arguments}
    if id is not None:
        call["id"] = id
    return Reply(tool_calls=[call])


def tool_calls(*calls: tuple[str, dict[str, Any]]) -> Reply:
    """A turn that asks for several tools: ``tool_calls(("add", {...}), ("sub", {...}))``."""
    return Reply(tool_calls=[{"name": name, "arguments": args} for name, args in calls])


def error(status: int, message: str = "fake provider error") -> Reply:
    """An HTTP error answer (500, 429, 401, ...)."""
    return Reply(status=status, message=message)


@dataclass
class Received:
    """One request as it arrived."""

    path: str
    headers: dict[str, str]
    body: Any


def unused_port() -> int:
    """A local port nothing listens on (connections to it are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class FakeProvider:
    """An OpenAI-compatible chat-completions server, scripted; a context manager."""

    def __init__(self, script: Script = (), *, latency: float = 0.0) -> None:
        self.latency = latency
        self.requests: list[Received] = []
        #: answers sent back in full (a client that gave up first never counts)
        self.answered = 0
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        if callable(script):
            self._function: Callable[[dict[str, Any]], ScriptItem] | None = script
            self._queue: list[ScriptItem] = []
        else:
            self._function = None
            self._queue = list(script)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------

    def start(self) -> FakeProvider:
        """Listen on 127.0.0.1, a random port, in a daemon thread."""
        handler = type("_BoundHandler", (_Handler,), {"provider": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-provider", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeProvider:  # noqa: PYI034 -- typing.Self needs 3.11
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "FakeProvider is not started"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: the value for ``OPENAI_API_BASE`` / ``api_base``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting -------------------------------------------------------

    def add(self, *items: ScriptItem) -> None:
        """Queue more replies."""
        with self._lock:
            self._queue.extend(items)

    @property
    def pending(self) -> int:
        """Replies still queued."""
        with self._lock:
            return len(self._queue)

    def _next(self, body: Any) -> ScriptItem:
        if self._function is not None:
            return self._function(body)
        with self._lock:
            if not self._queue:
                return Reply(status=500, message="fake provider: script exhausted")
            return self._queue.pop(0)

    def _record(self, received: Received) -> None:
        with self._lock:
            self.requests.append(received)

    def answer(self, body: Any) -> tuple[int, dict[str, Any], dict[str, str], float]:
        """``(status, json body, extra headers, delay)`` for one request body."""
        item = self._next(body)
        if isinstance(item, dict):
            return 200, item, {}, 0.0
        reply = Reply(content=item) if isinstance(item, str) else item
        if reply.status >= 400:
            payload = {"error": {"message": reply.message, "type": "fake_error", "code": reply.status}}
            return reply.status, payload, reply.headers, reply.delay
        model = body.get("model", "fake") if isinstance(body, dict) else "fake"
        return 200, self._completion(reply, model), reply.headers, reply.delay

    def _completion(self, reply: Reply, model: str) -> dict[str, Any]:
        number = next(self._ids)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.get("id") or f"call_{number}_{i}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": call["arguments"]
                        if isinstance(call["arguments"], str)
                        else json.dumps(call["arguments"]),
                    },
                }
                for i, call in enumerate(reply.tool_calls)
            ]
        return {
            "id": f"chatcmpl-fake-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": reply.input_tokens,
                "completion_tokens": reply.output_tokens,
                "total_tokens": reply.input_tokens + reply.output_tokens,
            },
        }


class _Handler(BaseHTTPRequestHandler):
    provider: FakeProvider
    protocol_version = "HTTP/1.0"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw or b"null")
        except ValueError:
            body = raw.decode("utf-8", "replace")
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.provider._record(Received(self.path, headers, body))
        if self.path.split("?")[0] not in PATHS:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}, {})
            return
        status, payload, extra, delay = self.provider.answer(body)
        if self.provider.latency or delay:
            time.sleep(self.provider.latency + delay)
        self._send(status, payload, extra)

    def _send(self, status: int, payload: dict[str, Any], extra: dict[str, str]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            return
        with self.provider._lock:
            self.provider.answered += 1

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log lines."""
