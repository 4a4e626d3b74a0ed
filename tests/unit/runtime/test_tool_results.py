"""Tool results as the model reads them: files as parts, raw bytes refused (runtime/dispatch.py)."""

from __future__ import annotations

from typing import Any

from pytest_connic.project.sdk import ToolFile
from pytest_connic.runtime.dispatch import result_problem, to_model_content, trace_result

PDF = ToolFile(mime_type="application/pdf", data=b"%PDF", name="a.pdf")


def test_files_become_parts_and_everything_else_stays_text() -> None:
    assert to_model_content({"a": 1}) == '{"a": 1}'
    assert to_model_content(["x", 2]) == '["x", 2]'
    assert to_model_content(PDF) == [{"type": "file", "mime_type": "application/pdf", "data": "JVBERg==",
                                      "name": "a.pdf"}]
    assert to_model_content(("see", PDF)) == [
        {"type": "text", "text": "see"},
        {"type": "file", "mime_type": "application/pdf", "data": "JVBERg==", "name": "a.pdf"},
    ]
    assert trace_result(PDF) == {"tool_file": {"mime_type": "application/pdf", "name": "a.pdf", "size_bytes": 4}}


def test_raw_bytes_anywhere_and_nested_files_are_refused() -> None:
    assert result_problem(PDF) is None
    assert result_problem([PDF, "text", {"n": 1}]) is None
    for bad in (b"x", bytearray(b"x"), {"blob": b"x"}, [PDF, [b"x"]]):
        assert "raw bytes" in (result_problem(bad) or ""), bad
    for nested in ({"file": PDF}, [[PDF]]):
        assert "must be the tool's result or an item" in (result_problem(nested) or ""), nested


def test_a_cyclic_result_is_left_to_the_json_rendering() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    assert result_problem(loop) is None
