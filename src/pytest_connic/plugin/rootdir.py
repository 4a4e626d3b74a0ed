"""Path options never move pytest's rootdir (docs/running.md, "Report files").

pytest finds its rootdir before it loads entry-point plugins (``Config.parse``: ``determine_setup``
runs on the command line as parsed without any plugin's options). An option it does not know yet
leaves its value behind as a positional argument, and a positional argument that exists on disk is
a path pytest takes into account: ``--connic-json ../x.json``, the file existing from an earlier
run, made the parent folder the rootdir (the ``=`` form is one token and never did).

No hook runs before that search, so the fix comes right after it: in
``pytest_load_initial_conftests`` (before any conftest, the cache or the header reads the rootdir)
the search runs again on the same command line parsed with this plugin's options known. When only
the rootdir differs it is put back; when the ini file would differ too (its settings are already
read), the session stops with a usage error that shows the ``=`` form.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from pytest_connic.plugin.options import SETTINGS

#: the options whose value is a path (a file or a folder pytest might take for a test path;
#: ``--connic-compare`` may name a report file)
PATH_OPTIONS = frozenset(s.option for s in SETTINGS if s.kind == "path" or s.name in ("merge", "compare"))


def space_form(args: list[str]) -> list[tuple[str, str]]:
    """(option, value) of each path option written with a space (``--connic-json x.json``)."""
    found = []
    for i, arg in enumerate(args[:-1]):
        if arg == "--":
            break
        if arg in PATH_OPTIONS:
            found.append((arg, args[i + 1]))
    return found


def _command_line(config: pytest.Config) -> list[str]:
    """The arguments pytest searched its rootdir on: ``PYTEST_ADDOPTS`` then the command line."""
    env = shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    return env + [str(a) for a in config.invocation_params.args]


def _setup(config: pytest.Config, args: list[str]) -> tuple[Path, Path | None]:
    """(rootdir, ini file) as pytest determines them for ``args`` parsed with every option known."""
    from pytest_connic.plugin.pytest_private import determine_setup, parse_known_args

    ns = parse_known_args(config, args)
    # (rootdir, inipath, inicfg), and the ini's args since pytest 8
    found = determine_setup(inifile=ns.inifilename, override_ini=getattr(ns, "override_ini", None),
                            args=ns.file_or_dir, rootdir_cmd_arg=ns.rootdir or None,
                            invocation_dir=config.invocation_params.dir)
    root, ini = found[0], found[1]
    assert isinstance(root, Path) and (ini is None or isinstance(ini, Path))
    return root, ini


def keep_rootdir(config: pytest.Config) -> None:
    """Put back the rootdir a path option's space form moved (see the module's docstring)."""
    args = _command_line(config)
    spaced = space_form(args)
    if not spaced:
        return
    rootpath, inipath = _setup(config, args)
    if rootpath == config.rootpath:
        return
    if inipath != config.inipath:
        forms = ", ".join(f"{option}={value}" for option, value in spaced)
        raise pytest.UsageError(
            f"{' '.join(spaced[0])}: pytest took the path for a test path and chose its rootdir (and ini file) "
            f"from it; write the option with '=': {forms}")
    wrong = str(config.rootpath)
    from pytest_connic.plugin.pytest_private import set_rootpath

    set_rootpath(config, rootpath)
    if config.known_args_namespace.confcutdir == wrong:  # pytest derived it from the wrong rootdir
        config.known_args_namespace.confcutdir = str(rootpath)
