"""``project/apispec.py``: Connic's tool names, the SDK registry, located spec problems; and the
request and auth of ``runtime/api_tools.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_connic.project.apispec import load_registry, tool_name
from pytest_connic.runtime.api_tools import ApiArgumentError, auth_headers, request_parts

SPEC = """\
openapi: 3.0.3
info: {title: Shop, version: "1"}
servers:
  - url: https://{region}.shop.example/api
    variables: {region: {default: eu}}
paths:
  /api/v1/orders/{orderId}:
    parameters:
      - {name: orderId, in: path, required: true, schema: {type: string}}
    get:
      parameters:
        - {name: expand, in: query, schema: {type: boolean}}
        - {name: X-Trace, in: header, schema: {type: string}}
      responses: {"200": {description: ok}}
  /orders:
    post:
      operationId: createOrder
      description: Create an order
      requestBody:
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Order"}
      responses: {"201": {description: ok}}
components:
  schemas:
    Order: {type: object, properties: {sku: {type: string}}}
  securitySchemes:
    key: {type: apiKey, in: header, name: X-Shop-Key}
"""


@pytest.mark.parametrize(("method", "path", "operation_id", "expected"), [
    ("post", "/charges", "createCharge", "charge_create"),
    ("get", "/users", None, "users_get"),
    ("get", "/users/{id}", None, "users_by_id_get"),
    ("get", "/api/v1/users/{userId}/orders", None, "users_by_user_id_orders_get"),
    ("get", "/v2/status", None, "status_get"),
    ("get", "/x", "chargeStatus", "charge_status_get"),
    ("delete", "/x", "invoice_delete", "invoice_delete"),
    ("get", "/x", "list-invoices", "invoices_list"),
    ("get", "/x", "getHTTPStatus", "http_status_get"),
])
def test_tool_names_follow_connics_rules(method: str, path: str, operation_id: str | None, expected: str) -> None:
    assert tool_name(method, path, operation_id) == expected


def test_a_spec_in_apis_becomes_the_sdk_registry(tmp_path: Path) -> None:
    (tmp_path / "apis").mkdir()
    (tmp_path / "apis" / "shop.yaml").write_text(SPEC, "utf-8")
    registry = load_registry(tmp_path, {})
    assert registry.errors == []
    tools = registry.sdk_registry()["shop"]
    assert set(tools) == {"orders_by_order_id_get", "order_create"}
    get = tools["orders_by_order_id_get"]
    assert get["method"] == "GET" and get["path"] == "/api/v1/orders/{orderId}"
    assert get["parameters"]["required"] == ["orderId"]
    assert set(get["parameters"]["properties"]) == {"orderId", "expand", "X-Trace"}
    create = tools["order_create"]
    assert create["description"] == "Create an order"
    assert create["parameters"]["properties"]["body"]["properties"] == {"sku": {"type": "string"}}  # $ref inlined
    assert registry.base_url("shop") == "https://eu.shop.example/api"
    registry.urls["shop"] = "http://127.0.0.1:9"
    assert registry.base_url("shop") == "http://127.0.0.1:9"


def test_the_request_and_the_auth_of_a_call(tmp_path: Path) -> None:
    path = tmp_path / "shop.json"
    path.write_text(SPEC, "utf-8")  # JSON is read as YAML too; the suffix does not matter for a named spec
    registry = load_registry(tmp_path, {"shop": "shop.json"})
    op = registry.operation("api:shop.orders_by_order_id_get")
    assert op is not None
    assert request_parts(op, {"orderId": "a/b", "expand": True, "X-Trace": "t1"}) == (
        "/api/v1/orders/a%2Fb", {"expand": "true"}, {"X-Trace": "t1"}, None)
    with pytest.raises(ApiArgumentError, match="missing path parameter 'orderId'"):
        request_parts(op, {})
    env = {"CONNIC_API_SHOP_KEY": "k1", "CONNIC_API_SHOP_USERNAME": "u", "CONNIC_API_SHOP_PASSWORD": "p"}
    assert auth_headers(registry, "shop", env) == {"Authorization": "Basic dTpw", "X-Shop-Key": "k1"}
    assert auth_headers(registry, "shop", {"CONNIC_API_SHOP_TOKEN": "t"}) == {"Authorization": "Bearer t"}


def test_spec_problems_are_located(tmp_path: Path) -> None:
    (tmp_path / "apis").mkdir()
    (tmp_path / "apis" / "bad.yaml").write_text(SPEC.replace('version: "1"', 'version: 1'), "utf-8")
    (tmp_path / "apis" / "old.yaml").write_text("swagger: '2.0'\ninfo: {title: x, version: '1'}\n", "utf-8")
    (tmp_path / "apis" / "twice.yaml").write_text(
        SPEC.replace("operationId: createOrder", "operationId: getOrdersByOrderId"), "utf-8")
    (tmp_path / "other.yaml").write_text(SPEC, "utf-8")
    registry = load_registry(tmp_path, {"Bad-Name": "other.yaml"})
    assert registry.specs == {}
    assert registry.failed == {"bad", "old", "twice"}
    errors = "\n".join(registry.errors)
    assert "other.yaml: API spec name 'Bad-Name' (from --connic-api-spec Bad-Name=other.yaml)" in errors
    assert "apis/bad.yaml:2: the OpenAPI spec 'bad' does not validate at info.version: 1 is not of type 'string'" in errors
    assert "apis/old.yaml:1: 'old' is not an OpenAPI 3.x spec" in errors
    assert "apis/twice.yaml:16: the OpenAPI spec 'twice' generates the tool name 'orders_by_order_id_get' twice" in errors


def test_without_the_validator_the_spec_loads_with_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openapi_spec_validator", None)  # import fails
    (tmp_path / "apis").mkdir()
    (tmp_path / "apis" / "shop.yaml").write_text(SPEC, "utf-8")
    registry = load_registry(tmp_path, {})
    assert set(registry.specs) == {"shop"}
    ((path, line, note),) = registry.notes
    assert path == tmp_path / "apis" / "shop.yaml" and line == 1
    assert "was not validated: openapi-spec-validator is not installed (pip install 'pytest-connic[api]')" in note
