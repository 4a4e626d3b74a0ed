"""Bounds for the project YAML that Connic's SDK loads itself (``agents/**/*.yaml``).

The SDK reads agent files and ``_defaults.yaml`` with ``yaml.safe_load``, which has no bound:
an alias bomb is cheap to parse (aliases share one object), but the SDK's ``_defaults.yaml``
cascade deep-merges the two mappings path by path, so a bomb in both never finishes (and a
``model_dump`` would copy it out in full). Each file is first read with pytest-connic's bounded
loader (``yamlpos``); one that exceeds its limits (values after alias expansion, nesting,
size) is never handed to the SDK and becomes a load error of that file, located, in the SDK's
own wording ("Failed to load agent: agents/x.yaml: ..."), so collection reports it like any
other broken agent file and the other agents still load.
"""

from __future__ import annotations

from pathlib import Path

from pytest_connic.files import IrregularFileError, refuse_irregular
from pytest_connic.project import sdk
from pytest_connic.yamlpos import YamlError, parse_file

#: a refusal for these reasons only: anything else (a syntax error) the SDK reports itself
_BOUNDS = ("too large", "too deeply")


def refusal(path: Path, relpath: str) -> str | None:
    """Why the bounded loader refuses ``path`` (``relpath:line:col: ...``), or None."""
    try:
        refuse_irregular(path, "agent file")  # the SDK would open a FIFO and wait forever
        parse_file(path)  # the session's one parse of the file, shared with every other reader
    except IrregularFileError as exc:
        return f"{relpath}:1:1: {str(exc).partition(': ')[2]}"
    except YamlError as exc:
        if not any(word in exc.message for word in _BOUNDS):
            return None
        return (f"{relpath}:{exc.line or 1}:{exc.column or 1}: {exc.message}; Connic's loader "
                "(yaml.safe_load) has no such limit, so pytest-connic does not hand this file to it")
    except (OSError, ValueError):
        return None  # unreadable or not text: the SDK says so in its own words
    return None


def _refused(directory: Path, root: Path) -> dict[Path, str]:
    """The refused YAML files under ``directory`` (hidden paths skipped, as the SDK does)."""
    refused: dict[Path, str] = {}
    if not directory.is_dir():
        return refused
    for path in sorted(directory.rglob("*.yaml")):
        rel = path.relative_to(directory).parts
        if any(part.startswith(".") for part in rel) or path.is_dir():  # a FIFO is refused, not skipped
            continue
        try:
            shown = path.relative_to(root).as_posix()
        except ValueError:  # the SDK's folder and the root spelled differently (a relative root)
            shown = path.as_posix()
        message = refusal(path, shown)
        if message is not None:
            refused[path] = message
    return refused


def _guard_connectors(loader: sdk.ProjectLoader, root: Path) -> None:
    """``connectors/*.yaml``: the SDK walks every value of a connector's ``config``, so a bomb
    there never finishes. With a refused file no connector loads (each refusal is a load error)."""
    load = getattr(loader, "load_connectors", None)
    if load is None:
        return

    def load_bounded(*args: object, **kwargs: object) -> object:
        refused = _refused(Path(getattr(loader, "connectors_dir", root / "connectors")), root)
        if not refused:
            return load(*args, **kwargs)
        sdk.load_errors(loader).extend(f"Failed to load connector: {m}" for m in refused.values())
        return {}

    loader.load_connectors = load_bounded


def guard_loader(loader: sdk.ProjectLoader, root: Path) -> None:
    """Keep ``loader`` (a ``connic.ProjectLoader``) away from agent YAML past the bounds.

    A refused agent file is left out of discovery and recorded as a load error; an agent whose
    ``_defaults.yaml`` cascade holds a refused file fails to load with that file's message.
    """
    _guard_connectors(loader, root)
    refused = _refused(Path(loader.agents_dir), root)
    if not refused:
        return
    sdk.exclude_agent_files(loader, refused)
    sdk.load_errors(loader).extend(
        f"Failed to load agent: {message}" for path, message in refused.items() if path.stem != "_defaults")
