"""Writes only where asked: an output path never names an input of a Connic project, and the
cassette folder stays inside the project (docs/reports.md "Where reports are written").

Checked when pytest is configured, before anything is written: a refused path is a
``pytest.UsageError`` (exit code 4) that names the option and what the path would overwrite.
The projects are those at or above the invocation directory, the root dir and each path argument.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_connic.project.inputs import input_named

if TYPE_CHECKING:
    from pytest_connic.plugin.options import Settings

#: the file outputs and the folder output a session may write, by setting name
FILE_OUTPUTS = ("json", "html", "coverage_json", "history", "summary")
FOLDER_OUTPUTS = ("traces",)


def check_outputs(config: pytest.Config, settings: Settings) -> None:
    """Refuse an output path that is an input of a project, two outputs that name one path, and a
    cassette folder outside the project."""
    outputs = _outputs(config, settings)
    for root in project_roots(config):
        cassettes = _cassette_folder(root, settings)
        for name, source, value, path in outputs:
            what = input_named(root, cassettes, path, folder=name in FOLDER_OUTPUTS)
            if what is not None:
                raise pytest.UsageError(f"invalid value {value!r} from {source}: it names {what} "
                                        f"of the project {root}; a report is never written over the project's "
                                        "inputs: choose a path outside them")
    seen: dict[Path, tuple[str, str]] = {}
    for _name, source, value, path in outputs:
        if path in seen:
            first, first_value = seen[path]
            raise pytest.UsageError(f"invalid value {value!r} from {source}: {first} ({first_value!r}) names the "
                                    f"same file, {path}; one would overwrite the other: give each output its own path")
        seen[path] = (source, value)


def _outputs(config: pytest.Config, settings: Settings) -> list[tuple[str, str, str, Path]]:
    """``(setting, its source, its value, the real path)`` of each output the session writes,
    pytest's ``--junitxml`` included."""
    found = []
    for name in (*FILE_OUTPUTS, *FOLDER_OUTPUTS):
        value = getattr(settings, name, None)
        if not value or (name == "history" and value.strip().lower() == "none"):
            continue
        base = config.invocation_params.dir
        if name == "history" and not settings.source(name).startswith("--"):
            base = config.rootpath  # an ini value is relative to the root dir (plugin/history.py)
        path = Path(value) if Path(value).is_absolute() else Path(base) / value
        found.append((name, settings.source(name), value, Path(os.path.realpath(path))))
    xml = getattr(config.option, "xmlpath", None)
    if xml:  # pytest takes it from the invocation directory, expanding ~ and variables
        path = Path(os.path.expandvars(os.path.expanduser(xml)))
        path = path if path.is_absolute() else Path(config.invocation_params.dir) / path
        found.append(("junitxml", "--junitxml", xml, Path(os.path.realpath(path))))
    return found


def project_roots(config: pytest.Config) -> list[Path]:
    """The Connic projects of the session (real paths): at or above the invocation directory, the
    root dir and every path argument."""
    from pytest_connic.project.layout import find_project_root

    starts = [Path(config.invocation_params.dir), Path(config.rootpath)]
    for arg in config.args:
        path = Path(str(arg).partition("::")[0])
        path = path if path.is_absolute() else Path(config.invocation_params.dir) / path
        starts.append(path if path.is_dir() else path.parent)
    roots = {find_project_root(Path(os.path.realpath(start))) for start in starts}
    return sorted(root for root in roots if root is not None)


def _cassette_folder(root: Path, settings: Settings) -> Path:
    """The project's cassette folder, which must resolve inside the project: a folder outside it
    would be recorded into, and then refused by replay (``models/cassette.py``)."""
    folder = Path(os.path.realpath(root / settings.cassette_dir))
    if os.path.commonpath([root, folder]) != str(root) or folder == root:
        raise pytest.UsageError(f"invalid value {settings.cassette_dir!r} from {settings.source('cassette_dir')}: "
                                f"the cassette folder must be inside the project {root} (it resolves to {folder}), "
                                "so that recording and replay read the same files")
    return folder
