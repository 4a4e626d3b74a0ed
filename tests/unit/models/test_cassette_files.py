"""Cassette files: distinct names never share a file (a reversible rule, old safe names kept),
older colliding names found with a note, only regular files within limits read, no secret kept."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from pytest_connic.models import CassetteError, ModelRequest, ModelResponse, ToolCallRequest
from pytest_connic.models.cassette import load_cassette
from pytest_connic.models.cassette_paths import (
    MAX_NAME_BYTES,
    cassette_path,
    legacy_safe_name,
    name_of_file,
    safe_name,
)
from pytest_connic.models.replay import CaseModels
from pytest_connic.secrets import Masker

CASSETTE = "version: 1\nruns:\n  - turns:\n      - content: hi\n"

PAIRS = [("a/b", "a_b"), ("a:b", "a_b"), ("a?b", "a_b"), ("a/b", "a:b"), ("a?b", "a*b"), (".", ".."),
         (".", "_"), ("..", "_"), ("CON", "_CON"), ("a%2Fb", "a/b"), ("x.", "x_"), ("a\\b", "a/b"),
         ("y" * 300 + "1", "y" * 300 + "2")]


@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_distinct_names_map_to_distinct_files(tmp_path: Path, first: str, second: str) -> None:
    one, two = cassette_path(tmp_path, "tests/s.yaml", first), cassette_path(tmp_path, "tests/s.yaml", second)
    assert one != two
    assert one.name.casefold() != two.name.casefold()
    one.parent.mkdir()
    for path in (one, two):
        assert path.parent == tmp_path / "s"
        assert len(path.name.encode()) <= MAX_NAME_BYTES + len(".yaml")
        path.write_text(str(path))  # the file system takes both, and they stay apart
    assert one.read_text() == str(one) and two.read_text() == str(two)


def test_names_differing_only_in_case_get_distinct_files_on_any_file_system(tmp_path: Path) -> None:
    names = ["Adds", "adds", "ADDS", "other"]
    paths = [cassette_path(tmp_path, "tests/s.yaml", n, siblings=names) for n in names]
    assert len({p.name.casefold() for p in paths}) == 4
    assert [p.name for p in paths] == ["%41dds.yaml", "adds.yaml", "%41%44%44%53.yaml", "other.yaml"]
    # without a sibling differing only in case, a capital stays as it is
    assert cassette_path(tmp_path, "tests/s.yaml", "Adds", siblings=["Adds", "other"]).name == "Adds.yaml"


@pytest.mark.parametrize("name", ["adds two", "a_b", "_CON", "50% off", "naïve – ünïcode", "x.y", "A..B",
                                  "z" * 300, "tab-less, (parens) & [brackets] {braces} #hash"])
def test_names_safe_before_keep_their_file(name: str) -> None:
    if legacy_safe_name(name) == name or len(name) > 120:
        assert safe_name(name) == legacy_safe_name(name)


@pytest.mark.parametrize("name", ["a/b", "a:b", "a?b", ".", "..", ".hidden", "x ", "CON", "con.txt", "a%2Fb",
                                  "%41", "50%", "é/ü", "ctrl\x1b[0m\n", 'q"<>|*'])
def test_the_rule_is_reversible(name: str) -> None:
    assert name_of_file(safe_name(name)) == name
    assert name_of_file(safe_name(name, escape_case=True)) == name


def _models(path: Path, root: Path | None = None, limit: int = 1 << 20, mode: str = "none") -> CaseModels:
    return CaseModels(path, mode=mode, live=None, masker=Masker(), root=root, size_limit=limit)


def _replay(models: CaseModels) -> None:
    models.plan(0)


def test_a_cassette_under_an_older_colliding_name_is_named_with_how_to_rename_it(tmp_path: Path) -> None:
    new = cassette_path(tmp_path, "tests/s.yaml", "a/b")
    new.parent.mkdir(parents=True)
    (new.parent / "a_b.yaml").write_text(CASSETTE)
    with pytest.raises(CassetteError) as info:
        _replay(_models(new))
    message = str(info.value)
    assert message.startswith(f"{new.parent / 'a_b.yaml'}: this cassette has the file name older versions")
    assert f"(git mv {new.parent / 'a_b.yaml'} {new})" in message
    assert "a%2Fb.yaml" in message
    new.write_text(CASSETTE)  # renamed: read, and the old file is no longer a concern
    assert _models(new).plan(0).kind == "replay"


def test_a_case_whose_name_was_always_safe_has_no_legacy_note(tmp_path: Path) -> None:
    path = cassette_path(tmp_path, "tests/s.yaml", "a_b")
    path.parent.mkdir(parents=True)
    (path.parent / "a_b.yaml").write_text(CASSETTE)
    assert _models(path).plan(0).kind == "replay"


def test_a_fifo_is_refused_without_being_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "c.yaml"
    os.mkfifo(fifo)  # opening it for reading (without O_NONBLOCK) would block forever
    with pytest.raises(CassetteError, match=r"c\.yaml: the cassette is a named pipe \(FIFO\); only a regular file"):
        load_cassette(fifo)


def test_a_link_to_a_device_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "c.yaml"
    link.symlink_to("/dev/zero")
    with pytest.raises(CassetteError, match=r"c\.yaml: the cassette is a device; only a regular file is read"):
        load_cassette(link)
    with pytest.raises(CassetteError, match="leads out of the project"):
        load_cassette(link, root=tmp_path)


def test_a_link_out_of_the_project_is_refused_and_one_inside_is_read(tmp_path: Path) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside.yaml"
    (project / "cassettes").mkdir(parents=True)
    outside.write_text(CASSETTE)
    link = project / "cassettes" / "c.yaml"
    link.symlink_to(outside)
    with pytest.raises(CassetteError, match=rf"c\.yaml: the cassette leads out of the project \(to {outside}\)"):
        load_cassette(link, root=project)
    inside = project / "shared.yaml"
    inside.write_text(CASSETTE)
    (project / "cassettes" / "d.yaml").symlink_to(inside)
    assert load_cassette(project / "cassettes" / "d.yaml", root=project).runs[0].turns is not None


def test_a_dangling_link_says_it_is_one(tmp_path: Path) -> None:
    link = tmp_path / "c.yaml"
    link.symlink_to(tmp_path / "gone.yaml")
    with pytest.raises(CassetteError, match=r"c\.yaml: the cassette is a dangling symbolic link \(to .*gone\.yaml"):
        _replay(_models(link, root=tmp_path))


def test_an_oversized_cassette_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CASSETTE + "# " + "x" * 2000 + "\n")
    with pytest.raises(CassetteError, match=r"c\.yaml: the cassette is 20\d\d bytes, more than the limit of 1000 "
                       r"bytes \(ini connic_cassette_size_limit\)"):
        _replay(_models(path, limit=1000))
    assert _models(path, limit=10_000).plan(0).kind == "replay"


class _Live:
    def __init__(self, response: ModelResponse) -> None:
        self.response = response

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return self.response


def _record(tmp_path: Path, masker: Masker, response: ModelResponse) -> CaseModels:
    models = CaseModels(tmp_path / "c.yaml", mode="all", live=lambda _: _Live(response), masker=masker)
    run = models.for_run(0)
    asyncio.run(run.model_for("calc", root=True).complete(ModelRequest("calc", "m", "", [])))
    return models


def test_a_recording_whose_secret_masking_cannot_remove_is_refused(tmp_path: Path) -> None:
    masker = Masker(["90817263"])  # a numeric secret the model sends as a number
    response = ModelResponse(tool_calls=[ToolCallRequest("1", "pay", {"pin": 90817263, "n": 5})])
    models = _record(tmp_path, masker, response)
    with pytest.raises(CassetteError) as info:
        models.save()
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'c.yaml'}: runs[0].turns[0].tool_calls[0].arguments.pin: the "
                              "recording holds a secret")
    assert "90817263" not in message
    assert not (tmp_path / "c.yaml").exists()


def test_a_recording_with_secrets_in_text_is_masked_and_written(tmp_path: Path) -> None:
    masker = Masker(["tök€n-Ünïcødé"])
    models = _record(tmp_path, masker, ModelResponse(content='say "t\\u00f6k\\u20acn-\\u00dcn\\u00efc\\u00f8d\\u00e9"'))
    path = models.save()
    assert path is not None
    text = path.read_text("utf-8")
    assert "***" in text and "\\u00f6" not in text and "tök€n" not in text
