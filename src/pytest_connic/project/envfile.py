"""``--connic-env NAME``: ``<project>/.env.NAME`` (dotenv) for the session's user code."""

from __future__ import annotations

import os
import re
from pathlib import Path

from pytest_connic.errors import ConnicError
from pytest_connic.files import IrregularFileError, read_bounded

#: the longest env file read (a dotenv file is a few lines; a device would never end)
MAX_BYTES = 1 << 20

_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*?)\s*$")


class EnvFileError(ConnicError):
    """The env file is missing or has a line that is not ``KEY=VALUE``."""


def _value(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        inner = raw[1:-1]
        if raw[0] == '"':
            inner = inner.encode("utf-8").decode("unicode_escape") if "\\" in inner else inner
        return inner
    return re.split(r"\s+#", raw, maxsplit=1)[0].strip()


def parse_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines; ``export`` prefixes, quotes, blank lines and ``#`` comments allowed."""
    values: dict[str, str] = {}
    try:
        text = read_bounded(path, "env file", MAX_BYTES).decode("utf-8")
    except IrregularFileError as exc:
        raise EnvFileError(str(exc)) from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            raise EnvFileError(f"{path.name}:{number}: expected KEY=VALUE, found {line.strip()[:60]!r}")
        values[match.group(1)] = _value(match.group(2))
    return values


def env_file(project_root: Path, name: str) -> Path:
    """Where ``--connic-env name`` reads from; refuses names that would leave the project."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or ".." in name:
        raise EnvFileError(f"--connic-env {name!r}: use a plain environment name such as 'staging'")
    return project_root / f".env.{name}"


class AppliedEnv:
    """Values put into ``os.environ``, and how to put everything back."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self._saved = {key: os.environ.get(key) for key in values}
        os.environ.update(values)

    def restore(self) -> None:
        for key, old in self._saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
        self._saved = {}


def apply_env(project_root: Path, name: str) -> AppliedEnv:
    """Load ``.env.<name>`` into the environment; raises ``EnvFileError`` when missing or bad."""
    path = env_file(project_root, name)
    if not path.exists():
        raise EnvFileError(f"--connic-env {name}: {path.name} not found in {project_root}")
    return AppliedEnv(parse_env_file(path))
