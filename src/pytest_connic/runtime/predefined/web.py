"""Connic's web tools, locally (the ``[web]`` extra: httpx, html2text; imported on first use).

* ``web_read_page``: fetches the page with httpx and turns its HTML into text (markdown) with
  html2text: ``{markdown, url}``, or with ``follow_redirects=False`` and a redirect
  ``{markdown: None, error, redirect_url}`` as on Connic [predefined-tools].
* ``web_search``: a search backend; the built-in one is Tavily (``TAVILY_API_KEY`` from the
  environment, ``TAVILY_BASE_URL`` overrides ``https://api.tavily.com``): ``{results: [{title, url,
  content}]}``. The ``pytest_connic_predefined_tool`` hook is the other, pluggable backend.
* ``web_browser_*``: Connic's hosted browser session; no local implementation (refused).

Each call goes through the run's models (``external("web", name, params, call)``,
runtime/predefined_dispatch.py), so it is recorded in the cassette and replayed offline; these
functions are the ``call`` and need the network. A failure the model should read (an HTTP error,
a refused connection) raises ``CallFailed``, recorded and replayed as the same failure.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, SupportsIndex, SupportsInt

from pytest_connic.jsonsafe import JsonObject
from pytest_connic.models.base import CallFailed
from pytest_connic.runtime.predefined.errors import PredefinedToolError

TAVILY_BASE = "https://api.tavily.com"
TIMEOUT_S = 30.0
#: the most web_search returns (Connic caps ``max_results`` at 10)
MAX_RESULTS = 10
WEB_TOOLS = ("web_search", "web_read_page")


class WebUnavailable(PredefinedToolError):
    """A web tool that cannot run here: the extra is missing, no search backend, a browser tool."""


if TYPE_CHECKING:
    from types import ModuleType


def _httpx() -> ModuleType:
    try:
        import httpx
    except ImportError as exc:
        raise WebUnavailable(f"the web tools need httpx and html2text: pip install 'pytest-connic[web]' ({exc})") from None
    return httpx


def html_to_text(html: str, base_url: str = "") -> str:
    """The page as markdown-like text (html2text, links kept, no line wrapping)."""
    try:
        import html2text
    except ImportError as exc:
        raise WebUnavailable(f"web_read_page needs html2text: pip install 'pytest-connic[web]' ({exc})") from None
    converter = html2text.HTML2Text(baseurl=base_url)
    converter.body_width = 0
    converter.ignore_images = True
    text: str = converter.handle(html)
    return text.strip()


async def read_page(url: object, follow_redirects: object = True) -> JsonObject:
    """``web_read_page`` for real (the arguments are the caller's, checked here)."""
    httpx = _httpx()
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise PredefinedToolError(f"url must be an http(s) URL, got {url!r}")
    try:
        async with httpx.AsyncClient(follow_redirects=follow_redirects, timeout=TIMEOUT_S) as client:
            response = await client.get(url, headers={"User-Agent": "pytest-connic web_read_page"})
    except httpx.HTTPError as exc:
        raise CallFailed(f"web_read_page could not fetch {url}: {type(exc).__name__}: {exc}") from None
    if response.is_redirect and not follow_redirects:
        return {"markdown": None, "url": url,
                "error": "URL redirected. Set follow_redirects=true to follow the redirect.",
                "redirect_url": str(response.next_request.url) if response.next_request else
                response.headers.get("location")}
    if response.status_code >= 400:
        raise CallFailed(f"web_read_page: {url} answered HTTP {response.status_code}")
    final = str(response.url)
    kind = response.headers.get("content-type", "")
    text = response.text
    markdown = html_to_text(text, final) if "html" in kind or not kind else text
    return {"markdown": markdown, "url": final}


async def tavily_search(query: object, max_results: object = 5, country: object = None,
                        include_news: object = False) -> JsonObject:
    """``web_search`` through Tavily's search API (``TAVILY_API_KEY``, ``TAVILY_BASE_URL``); the
    arguments are the caller's, sent as JSON (``max_results`` an integer, bounded)."""
    key = os.environ.get("TAVILY_API_KEY")
    if not key:
        raise WebUnavailable(
            "web_search has no search backend: set TAVILY_API_KEY (Tavily's search API; TAVILY_BASE_URL "
            "overrides its address) or implement the hook pytest_connic_predefined_tool in conftest.py "
            "(docs/predefined-tools.md)"
        )
    httpx = _httpx()
    body: dict[str, object] = {"query": query, "max_results": max(1, min(_integer(max_results), MAX_RESULTS)),
                            "topic": "news" if include_news else "general"}
    if country:
        body["country"] = country
    base = os.environ.get("TAVILY_BASE_URL") or TAVILY_BASE
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as client:
            response = await client.post(f"{base.rstrip('/')}/search", json=body,
                                         headers={"Authorization": f"Bearer {key}"})
    except httpx.HTTPError as exc:
        raise CallFailed(f"web_search: the search backend is unreachable: {type(exc).__name__}: {exc}") from None
    if response.status_code >= 400:
        raise CallFailed(f"web_search: the search backend answered HTTP {response.status_code}")
    try:
        data = response.json()
    except ValueError:
        raise CallFailed("web_search: the search backend answered something that is not JSON") from None
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise CallFailed("web_search: the search backend's answer has no results list")
    return {"results": [{"title": str(r.get("title") or ""), "url": str(r.get("url") or ""),
                         "content": str(r.get("content") or "")} for r in results if isinstance(r, dict)]}


def _integer(value: object) -> int:
    """``int(value)``, for what ``int`` takes."""
    if isinstance(value, (str, bytes, bytearray, SupportsInt, SupportsIndex)):
        return int(value)
    raise TypeError(f"int() argument must be a string, a bytes-like object or a real number, "
                    f"not '{type(value).__name__}'")


def browser_refusal(name: str) -> str:
    """Why a ``web_browser_*`` tool does not run locally."""
    return (f"{name} drives Connic's hosted browser session, which pytest-connic does not run locally; "
            "implement the hook pytest_connic_predefined_tool in conftest.py to supply its results, or mock "
            "the custom tool that uses it (docs/predefined-tools.md)")
