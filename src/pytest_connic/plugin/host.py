"""The runtime's :class:`~pytest_connic.runtime.ports.Host` over pytest: the user's
``pytest_connic_*`` hooks (conftest.py) through the hook relay, and the session's warnings
(the one located "warn once" of the package: ``warnings.warn_explicit`` at the user's file)."""

from __future__ import annotations

import contextlib
import linecache
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from pytest_connic.runtime.ports import WarnedKeys
from pytest_connic.warnings import ConnicWarning


def shown_path(config: pytest.Config, path: Path) -> str:
    """``path`` as pytest shows a file: relative to the invocation directory when inside it (a
    warning's line in pytest's summary names it so, as its header does), else as it is."""
    if not path.is_absolute():
        return str(path)
    try:
        return path.resolve().relative_to(Path(config.invocation_params.dir).resolve()).as_posix()
    except (ValueError, OSError):
        return str(path)


class PytestHost:
    """Answers the runtime's questions with the ``pytest_connic_*`` hooks of ``config``."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._warned = WarnedKeys()
        #: the suite file (as pytest shows paths) and line of the case running now: the runtime's
        #: warnings without a location of their own point at it (cases run one at a time in a
        #: pytest process)
        self._case: tuple[str, int] | None = None

    def warn_once(self, key: str | None, message: str, category: type[Warning] | None = None,
                  location: tuple[str | Path, int] | None = None) -> None:
        """Emit a warning (a ``ConnicWarning`` unless ``category`` says which) once per session for
        ``key`` (``None``: every time), at ``location``, else the running case, else the caller."""
        if not self._warned.first(key):
            return
        category = category or ConnicWarning
        # the key goes with a ConnicWarning: the xdist controller shows it once for all workers
        warning = category(message, key) if key is not None and issubclass(category, ConnicWarning) else category(message)
        where = location or self._case
        if where is not None:  # the user's file and line, not the runtime's source line
            shown = shown_path(self.config, Path(where[0]))
            # pytest shows the file's line from linecache, which keys a relative name the same for
            # every project (pytester's runs share this process): a changed file is read afresh
            linecache.checkcache(shown)
            warnings.warn_explicit(warning, category, shown, where[1])
        else:
            warnings.warn(warning, stacklevel=2)

    @contextlib.contextmanager
    def case_running(self, shown_path: str, line: int) -> Iterator[None]:
        """While a case runs, warnings without a location point at its suite file and line."""
        self._case = (shown_path, line)
        try:
            yield
        finally:
            self._case = None

    def make_model(self, agent: object, model: str, case: Mapping[str, object] | None, run_index: int) -> object | None:
        result: object | None = self.config.hook.pytest_connic_make_model(
            config=self.config, agent=agent, model=model, case=case, run_index=run_index
        )
        return result

    def guardrail(self, rule: object, direction: str, content: str, context: dict[str, object]) -> object | None:
        result: object | None = self.config.hook.pytest_connic_guardrail(
            config=self.config, rule=rule, direction=direction, content=content, context=context
        )
        return result

    def predefined_tool(self, name: str, params: dict[str, object], context: dict[str, object]) -> object | None:
        result: object | None = self.config.hook.pytest_connic_predefined_tool(
            config=self.config, name=name, params=params, context=context
        )
        return result
