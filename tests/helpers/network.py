"""What tests that record against local servers share: the fake provider as the inner run's
OpenAI endpoint, and a network that refuses every connection (to prove a replay is offline)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import pytest

from helpers.fake_provider import FakeProvider

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self needs 3.11


@contextlib.contextmanager
def serving(monkeypatch: pytest.MonkeyPatch, script: Any, latency: float = 0.0) -> Iterator[FakeProvider]:
    """The fake provider, with ``OPENAI_API_BASE`` pointing at it (the inner run is in-process)."""
    with FakeProvider(script, latency=latency) as fp:
        monkeypatch.setenv("OPENAI_API_BASE", fp.base_url)
        yield fp


@contextlib.contextmanager
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every ``socket.connect`` attempt to a network address is recorded and refused (a local
    Unix socket, such as the one of the worker processes' forkserver, is no network)."""
    attempts: list[Any] = []
    connect = socket.socket.connect

    def refuse(self: socket.socket, address: Any) -> None:
        if getattr(socket, "AF_UNIX", None) is not None and self.family == socket.AF_UNIX:
            return connect(self, address)
        attempts.append(address)
        raise OSError(f"network disabled by the test: connect to {address!r}")

    with monkeypatch.context() as patch:
        patch.setattr(socket.socket, "connect", refuse)
        yield attempts


def warm_up_litellm() -> None:
    """Import LiteLLM and make one call in this process before any inner run does: its import
    loads the importlib_metadata backport, which deletes the stdlib's distribution finder, and
    pytester's restore of ``sys.meta_path`` after an inner run would then leave later inner runs
    without plugins. It also keeps LiteLLM's seconds of start-up out of timed runs."""
    import asyncio

    from pytest_connic.models import LiteLLMModel, ModelRequest

    with FakeProvider(["ok"]) as fp:
        model = LiteLLMModel(api_base=fp.base_url, api_key="unused")
        asyncio.run(model.complete(ModelRequest("warm-up", "openai/gpt-4o-mini", "", [{"role": "user", "content": "hi"}])))


def local_provider_env(monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    """A provider key, and a base URL where nothing listens: a test that forgets to serve stays local."""
    from helpers.fake_provider import unused_port

    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_BASE", f"http://127.0.0.1:{unused_port()}/v1")


class LocalHttpServer:
    """A ``ThreadingHTTPServer`` on 127.0.0.1 serving ``handler`` in a thread while the ``with``
    block runs, always stopped after it (stdlib only; for HTTP APIs and web pages of tests)."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str) -> None:
    """Answer a request of ``handler`` with ``body``."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
