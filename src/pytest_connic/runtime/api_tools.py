"""``api:`` tools, called for real (the SDK's connic/loader.py and connic/tools.py: their implementations are never mocked).

A call of ``api:<spec>.<tool>`` becomes the HTTP request its OpenAPI operation describes
(``project/apispec.py``): path parameters in the path, query and header parameters where the
spec puts them, ``body`` as the JSON request body; it goes through ``httpx`` (the ``[api]``
extra, imported when a request is made) to ``--connic-api-url`` or the spec's server, with the
auth the environment gives (``CONNIC_API_<SPEC>_TOKEN`` ...). Every call goes through
``RunModels.external("api", "<spec>.<tool>", arguments, ...)``: recorded in the case's cassette,
replayed offline (no server, no httpx needed). Auth and header values are never arguments.

An HTTP error status, or a server that cannot be reached, is a ``CallFailed``: the tool call
fails and the model reads the error (the run goes on), as for any failing tool on Connic.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote

from pytest_connic.errors import ConnicError
from pytest_connic.models.base import CallFailed
from pytest_connic.project.apispec import ApiOperation, ApiRegistry
from pytest_connic.runtime.signals import RunAborted
from pytest_connic.runtime.state import CatalogEntry, InvocationState

if TYPE_CHECKING:
    import httpx

#: the longest piece of an error response the model reads back
ERROR_BODY_LIMIT = 2000
TIMEOUT_S = 60.0


class ApiArgumentError(ConnicError):
    """The model's arguments cannot make the request (a missing path parameter): a tool error."""


def env_prefix(spec: str) -> str:
    """``CONNIC_API_BILLING_`` for spec ``billing``."""
    return f"CONNIC_API_{re.sub(r'[^A-Za-z0-9]', '_', spec).upper()}_"


def auth_headers(registry: ApiRegistry, spec: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The auth Connic would inject for ``spec``, from the environment: ``..._TOKEN`` (Bearer),
    ``..._KEY`` (API key, in ``..._KEY_HEADER`` or the spec's ``apiKey`` header, else
    ``X-API-Key``), ``..._USERNAME`` and ``..._PASSWORD`` (Basic)."""
    env = os.environ if environ is None else environ
    prefix = env_prefix(spec)
    headers: dict[str, str] = {}
    token, key, user = env.get(prefix + "TOKEN"), env.get(prefix + "KEY"), env.get(prefix + "USERNAME")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    elif user:
        import base64

        pair = f"{user}:{env.get(prefix + 'PASSWORD', '')}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
    if key:
        declared = registry.specs[spec].api_key_header if spec in registry.specs else None
        headers[env.get(prefix + "KEY_HEADER") or declared or "X-API-Key"] = key
    return headers


def secret_values(spec: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """The environment's auth values for ``spec`` (the masker hides them everywhere)."""
    env = os.environ if environ is None else environ
    prefix = env_prefix(spec)
    return [v for k in ("TOKEN", "KEY", "PASSWORD") if (v := env.get(prefix + k))]


def request_parts(op: ApiOperation, params: Mapping[str, object]) -> tuple[str, dict[str, str], dict[str, str], object]:
    """(path, query, headers, body) of a call. Raises ``ApiArgumentError``."""
    path, query, headers = op.path, {}, {}
    for param in op.params:
        value = params.get(param.name)
        if value is None:
            if param.location == "path":
                raise ApiArgumentError(f"missing path parameter '{param.name}' for {op.method.upper()} {op.path}")
            continue
        text = _text(value)
        if param.location == "path":
            path = path.replace("{" + param.name + "}", quote(text, safe=""))
        elif param.location == "query":
            query[param.name] = text
        else:
            headers[param.name] = text
    return path, query, headers, params.get("body") if op.has_body else None


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


async def call_api(inv: InvocationState, entry: CatalogEntry, params: dict[str, object]) -> object:
    """Call the ``api:`` tool ``entry`` with ``params``: recorded, replayed, or live."""
    registry: ApiRegistry = inv.services.project.api
    op = registry.operation(entry.ref)
    if op is None:  # the SDK resolved it from this registry: cannot happen
        raise RunAborted(f"{entry.ref}: no OpenAPI operation for this api: tool")
    path, query, headers, body = request_parts(op, params)
    inv.services.masker.add(secret_values(op.spec))

    async def request() -> object:
        return await _send(registry, op, path, query, headers, body)

    return await inv.scope.models.external("api", f"{op.spec}.{op.tool}", params, request)


async def _send(registry: ApiRegistry, op: ApiOperation, path: str, query: dict[str, str],
                headers: dict[str, str], body: object) -> object:
    base = registry.base_url(op.spec)
    if not base or not base.startswith(("http://", "https://")):
        raise RunAborted(
            f"api:{op.spec}.{op.tool}: no server to call: the spec {registry.specs[op.spec].path.name} "
            f"{'has the relative server URL ' + repr(base) if base else 'declares no servers'}; give "
            f"--connic-api-url {op.spec}=URL (ini connic_api_urls)")
    try:
        import httpx
    except ImportError:
        raise RunAborted(f"api:{op.spec}.{op.tool} makes a real HTTP request, which needs httpx: "
                         "pip install 'pytest-connic[api]' (a replay needs neither httpx nor the server)") from None
    url = base.rstrip("/") + path
    sent = {**headers, **auth_headers(registry, op.spec)}
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as client:
            response = await client.request(op.method.upper(), url, params=query or None, headers=sent,
                                            json=body if op.has_body and body is not None else None)
    except httpx.HTTPError as exc:
        raise CallFailed(f"{op.method.upper()} {url} failed: {type(exc).__name__}: {exc}") from None
    if response.status_code >= 400:
        text = response.text
        if len(text) > ERROR_BODY_LIMIT:
            text = text[:ERROR_BODY_LIMIT] + "…"
        raise CallFailed(f"HTTP {response.status_code} {response.reason_phrase} from {op.method.upper()} "
                         f"{op.path}: {text}".rstrip(": "))
    return _result(response)


def _result(response: httpx.Response) -> object:
    if not response.content:
        return None
    if "json" in response.headers.get("content-type", ""):
        try:
            return response.json()
        except ValueError:
            pass
    return response.text
