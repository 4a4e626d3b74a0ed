"""A project's inputs, which no report, summary or history is written over, and the writers that
never block on what is not a regular file (issues 39 and 43)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pytest_connic.compare.cli import write_summaries
from pytest_connic.files import write_text_file
from pytest_connic.jsonsafe import JsonBoundsError, load_bounded
from pytest_connic.project.inputs import refused_output


@pytest.mark.parametrize(("rel", "what"), [
    ("conftest.py", "a conftest.py (pytest imports it)"),
    ("tests/deep/conftest.py", "a conftest.py (pytest imports it)"),
    ("pyproject.toml", "its pyproject.toml"),
    ("agents/new.yaml", "a path in its agents/ folder"),
    ("cassettes/t/c.yaml", "a path in its cassette folder"),
    ("tests/t.yaml", "a suite file under tests/ (Connic parses every tests/**/*.yaml as a suite)"),
    (".env.staging", "an env file (--connic-env)"),
    ("report.json", None),
    ("out/conftest.json", None),
])
def test_what_an_output_may_not_name(tmp_path: Path, rel: str, what: str | None) -> None:
    (tmp_path / "agents").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / rel)  # through a link as well, even to a file not there yet
    for path in (tmp_path / rel, link):
        found = refused_output(path, [tmp_path])
        assert found == (None if what is None else f"{what} of the project {tmp_path}")


@pytest.mark.timeout(60)
def test_a_fifo_no_process_reads_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(OSError) as caught:
        write_text_file(tmp_path / "pipe", "report")
    assert caught.value.errno == errno.ENXIO and "no process reads" in str(caught.value)
    reader = os.open(tmp_path / "pipe", os.O_RDONLY | os.O_NONBLOCK)  # with a reader it is written
    try:
        write_text_file(tmp_path / "pipe", "report")
        assert os.read(reader, 100) == b"report"
    finally:
        os.close(reader)


@pytest.mark.timeout(60)
def test_a_step_summary_is_appended_only_to_a_regular_file_outside_the_inputs(tmp_path: Path) -> None:
    step = tmp_path / "step.md"
    step.write_text("earlier\n", "utf-8")
    environ = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(step)}
    assert write_summaries("now", str(tmp_path / "s.md"), environ) == []
    assert step.read_text("utf-8") == "earlier\nnow\n" and (tmp_path / "s.md").read_text("utf-8") == "now"
    os.mkfifo(tmp_path / "pipe")
    for path, kind in ((tmp_path / "pipe", "a named pipe (FIFO)"), (Path("/dev/null"), "a device")):
        lines = write_summaries("now", None, {**environ, "GITHUB_STEP_SUMMARY": str(path)})
        assert lines == [(f"{path}: the step summary is {kind}; only a regular file is written: the summary was not "
                          "appended to $GITHUB_STEP_SUMMARY")]
    assert write_summaries("now", None, environ, lambda path: "a path in its agents/ folder of the project p") == [
        (f"{step}: $GITHUB_STEP_SUMMARY names a path in its agents/ folder of the project p; the summary was not "
        "appended to it")]
    assert write_summaries("x", "/dev/full", environ)[0] == ("/dev/full: cannot write the Markdown summary: "
                                                             "[Errno 28] No space left on device")
    assert step.read_text("utf-8") == "earlier\nnow\nx\n"  # the step summary still got it


def test_json_is_read_with_bounds() -> None:
    assert load_bounded('{"a": [1, {"b": 2}]}', max_depth=3) == {"a": [1, {"b": 2}]}
    for text, message in (('{"a": [1, {"b": 2}]}', "nested deeper than 2 levels"),
                          ("[" * 100_000 + "]" * 100_000, "nested deeper than 2 levels"),
                          ("[NaN]", "invalid JSON: NaN is not a JSON number"), ("[1", "invalid JSON: *")):
        with pytest.raises(JsonBoundsError, match=message.replace("*", ".*").replace("[", r"\[")):
            load_bounded(text, max_depth=2)
    with pytest.raises(JsonBoundsError, match="more than 3 characters"):
        load_bounded("[1,2]", max_depth=2, max_chars=3)
