"""Cassette folders: one per suite file, distinct under case folding and Unicode normalisation,
reversible, and the old folder kept for every suite name that needed no escaping."""

from __future__ import annotations

import os
import time
import unicodedata
import urllib.parse
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_connic.models.cassette_paths import cassette_path, legacy_safe_name, suite_folder


def _fold(name: str) -> str:
    return unicodedata.normalize("NFC", name).casefold()


def _suites(root: Path, names: list[str]) -> list[str]:
    """Writes the suites ``tests/<name>`` and returns their cassette folder names."""
    (root / "tests").mkdir(exist_ok=True)
    for name in names:
        (root / "tests" / name).write_text("tests: []\n")
    return [suite_folder(["tests", n], root)[0] for n in names]


COLLIDING = [
    ["calc:v2.yaml", "calc_v2.yaml", "calc?v2.yaml"],
    ["Calc.yaml", "calc.yaml", "CALC.yaml"],
    ["caf\u00e9.yaml", "cafe\u0301.yaml"],  # NFC and NFD of the same word
    ["Caf\u00e9.yaml", "cafe\u0301.yaml", "CAFE\u0301.yaml"],
    ["calc.yaml", "calc.YAML", "calc.YAML.yaml"],
    ["stra\u00dfe.yaml", "STRASSE.yaml", "strasse.yaml"],
]


@pytest.mark.parametrize("names", COLLIDING)
def test_suites_that_shared_a_folder_get_distinct_ones_on_any_file_system(tmp_path: Path, names: list[str]) -> None:
    folders = _suites(tmp_path, names)
    assert len({_fold(f) for f in folders}) == len(names), folders
    for folder in folders:  # the file system takes each, and they stay apart
        (tmp_path / "cassettes" / folder).mkdir(parents=True)
    assert len(list((tmp_path / "cassettes").iterdir())) == len(names)


def test_the_folder_of_a_colliding_suite_reads_back_as_its_name(tmp_path: Path) -> None:
    folders = _suites(tmp_path, ["calc:v2.yaml", "calc_v2.yaml", "calc?v2.yaml", "Calc.yaml", "calc.yaml",
                                 "cafe\u0301.yaml", "calc.YAML"])
    assert folders == ["calc%3Av2", "calc_v2", "calc%3Fv2", "%43alc", "calc", "cafe%CC%81", "calc%2EYAML"]
    decoded = [urllib.parse.unquote(f) for f in folders]
    assert decoded == ["calc:v2", "calc_v2", "calc?v2", "Calc", "calc", "cafe\u0301", "calc.YAML"]


@pytest.mark.parametrize("name", ["math", "Math", "sub dir", "naïve", "calc_v2", "a.b", "x-y (z)"])
def test_names_safe_before_keep_their_folder(tmp_path: Path, name: str) -> None:
    _suites(tmp_path, [name + ".yaml"])
    assert suite_folder(["tests", name + ".yaml"], tmp_path) == [legacy_safe_name(name)] == [name]
    path = cassette_path(tmp_path / "cassettes", f"tests/{name}.yaml", "c", suites_root=tmp_path)
    assert path == tmp_path / "cassettes" / name / "c.yaml"


def test_folders_differing_only_in_case_get_distinct_names(tmp_path: Path) -> None:
    for sub in ("Sub", "sub"):
        (tmp_path / "tests" / sub).mkdir(parents=True)
        (tmp_path / "tests" / sub / "s.yaml").write_text("tests: []\n")
    upper = cassette_path(tmp_path / "c", "tests/Sub/s.yaml", "x", suites_root=tmp_path)
    lower = cassette_path(tmp_path / "c", "tests/sub/s.yaml", "x", suites_root=tmp_path)
    assert upper.relative_to(tmp_path / "c").as_posix() == "%53ub/s/x.yaml"
    assert lower.relative_to(tmp_path / "c").as_posix() == "sub/s/x.yaml"


ALPHABET = st.sampled_from(["a", "A", "e", "E", "\u00e9", "\u00c9", "\u0301", "\u00df", "s", "S", ":", "_",
                            "?", "%", ".", " ", "4", "1", "/"])


@given(st.lists(st.text(ALPHABET, min_size=1, max_size=5), min_size=2, max_size=4, unique=True))
def test_distinct_stems_stay_distinct_and_reversible(stems: list[str]) -> None:
    """Among suites of one folder, folder names never meet under casefold and NFC, and
    percent-decoding gives each suite's name back."""
    stems = [s.replace("/", "_") for s in stems]
    if len(set(stems)) < len(stems):
        return
    keys = set(stems)

    def collides(stem: str) -> bool:
        return any(k != stem and _fold(k) == _fold(stem) for k in keys)

    from pytest_connic.models.cassette_paths import safe_name

    folders = [safe_name(s, escape_case=collides(s)) for s in stems]
    assert len({_fold(f) for f in folders}) == len(stems)
    assert [urllib.parse.unquote(f) for f in folders] == stems


def _settled(folder: Path, seconds_ago: int) -> int:
    """Gives ``folder`` a modification time ``seconds_ago`` in the past (a folder the session did
    not just change), and returns it in nanoseconds."""
    when = time.time_ns() - seconds_ago * 10**9
    os.utime(folder, ns=(when, when))
    return when


def test_a_suites_folder_is_read_once_for_all_its_cases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case's cassette path asks about its suite's folder: with many suites in ``tests/``,
    reading the folder per case made the cassette paths of a session quadratic in its suites."""
    _suites(tmp_path, [f"s{i}.yaml" for i in range(50)] + ["Calc.yaml", "calc.yaml"])
    _settled(tmp_path / "tests", 60)
    reads: list[object] = []
    scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path: reads.append(path) or scandir(path))
    folders = [suite_folder(["tests", f"s{i}.yaml"], tmp_path)[0] for i in range(50) for _ in range(4)]
    assert folders == [f"s{i}" for i in range(50) for _ in range(4)]
    assert suite_folder(["tests", "Calc.yaml"], tmp_path) == ["%43alc"]
    assert len(reads) <= 1, reads


def test_a_suite_added_to_the_folder_is_seen_by_the_next_cassette_path(tmp_path: Path) -> None:
    assert _suites(tmp_path, ["Calc.yaml"]) == ["Calc"]
    _settled(tmp_path / "tests", 60)
    assert suite_folder(["tests", "Calc.yaml"], tmp_path) == ["Calc"]
    (tmp_path / "tests" / "calc.yaml").write_text("tests: []\n")
    _settled(tmp_path / "tests", 50)
    assert suite_folder(["tests", "Calc.yaml"], tmp_path) == ["%43alc"]
    (tmp_path / "tests" / "calc.yaml").unlink()
    _settled(tmp_path / "tests", 40)
    assert suite_folder(["tests", "Calc.yaml"], tmp_path) == ["Calc"]


def test_a_folder_changed_twice_within_one_tick_of_its_clock_is_read_afresh(tmp_path: Path) -> None:
    """A coarse file-system clock gives two changes in a row the same modification time (and a
    rename keeps the folder's size): a folder that changed this recently is not kept."""
    _suites(tmp_path, ["Calc.yaml", "other.yaml"])
    tick = _settled(tmp_path / "tests", 0)
    assert suite_folder(["tests", "Calc.yaml"], tmp_path) == ["Calc"]
    (tmp_path / "tests" / "other.yaml").rename(tmp_path / "tests" / "calc.yaml")
    os.utime(tmp_path / "tests", ns=(tick, tick))
    assert suite_folder(["tests", "Calc.yaml"], tmp_path) == ["%43alc"]
