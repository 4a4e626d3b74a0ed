"""``.env.NAME`` files: their format, and applying them to the environment and restoring it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_connic.project.envfile import EnvFileError, apply_env, env_file, parse_env_file

# -- the env file format ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("A=1", {"A": "1"}),
        ("export B = two words ", {"B": "two words"}),
        ("C='single # not a comment'", {"C": "single # not a comment"}),
        ('D="tab\\tand newline\\n"', {"D": "tab\tand newline\n"}),
        ("E=value # comment", {"E": "value"}),
        ("F=", {"F": ""}),
        ("   # only a comment", {}),
    ],
)
def test_parse_env_file(tmp_path: Path, line: str, expected: dict[str, str]) -> None:
    path = tmp_path / ".env.x"
    path.write_text(line + "\n", "utf-8")
    assert parse_env_file(path) == expected


def test_apply_env_restores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEP", "old")
    monkeypatch.delenv("NEW_ONE", raising=False)
    (tmp_path / ".env.t").write_text("KEEP=new\nNEW_ONE=here\n", "utf-8")
    applied = apply_env(tmp_path, "t")
    assert (os.environ["KEEP"], os.environ["NEW_ONE"]) == ("new", "here")
    applied.restore()
    assert os.environ["KEEP"] == "old" and "NEW_ONE" not in os.environ
    with pytest.raises(EnvFileError, match="not found"):
        apply_env(tmp_path, "missing")
    with pytest.raises(EnvFileError, match="plain environment name"):
        env_file(tmp_path, "a/b")
