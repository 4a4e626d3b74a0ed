"""Local, offline implementations of Connic's predefined data tools.

Connic runs ``db_*``, ``file_*`` and ``retrieval_*`` for real during tests (they cannot
be mocked, the SDK's connic/loader.py and connic/tools.py). pytest-connic runs them against per-session local services:

* ``LocalDatabase`` — documents as JSON in a SQLite file (``db.py``);
* ``LocalFiles`` — a sandbox directory plus a metadata index (``files.py``);
* ``LocalRetrieval`` — a lexical (not embedding) index in a SQLite file (``retrieval.py``).

``LocalServices(root)`` owns all three under one session directory, and
``LocalServices.tools_for(agent, config)`` hands the runtime one async callable per
tool name, bound to that agent's ``database:``/``files:``/``retrieval:`` access rules.
Refusals raise ``PredefinedToolError``, whose message the runtime returns to the model.
Every result is JSON-serialisable except ``file_read``'s ``content`` (``bytes``, as on
Connic).
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from pytest_connic.jsonsafe import JsonObject
from pytest_connic.runtime.predefined.db import BoundDatabase, LocalDatabase
from pytest_connic.runtime.predefined.errors import PredefinedToolError
from pytest_connic.runtime.predefined.files import BoundFiles, LocalFiles
from pytest_connic.runtime.predefined.retrieval import BoundRetrieval, LocalRetrieval

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "DATA_TOOL_NAMES",
    "DB_TOOL_NAMES",
    "FILE_TOOL_NAMES",
    "RETRIEVAL_ALIASES",
    "RETRIEVAL_TOOL_NAMES",
    "BoundDatabase",
    "BoundFiles",
    "BoundRetrieval",
    "LocalDatabase",
    "LocalFiles",
    "LocalRetrieval",
    "LocalServices",
    "PredefinedToolError",
    "ToolFunction",
    "tool_schema",
]

#: a local data tool: called with the model's arguments, awaited for its JSON-like result
ToolFunction = Callable[..., Awaitable[object]]
DB_TOOL_NAMES = (
    "db_find",
    "db_insert",
    "db_update",
    "db_upsert",
    "db_delete",
    "db_count",
    "db_list_collections",
)
FILE_TOOL_NAMES = ("file_list", "file_read", "file_write", "file_update", "file_delete")
RETRIEVAL_TOOL_NAMES = ("retrieval_query", "retrieval_store", "retrieval_delete", "retrieval_list_namespaces")
RETRIEVAL_ALIASES = {
    "query_knowledge": "retrieval_query",
    "store_knowledge": "retrieval_store",
    "delete_knowledge": "retrieval_delete",
    "kb_list_namespaces": "retrieval_list_namespaces",
}
DATA_TOOL_NAMES: tuple[str, ...] = (
    DB_TOOL_NAMES + FILE_TOOL_NAMES + RETRIEVAL_TOOL_NAMES + tuple(RETRIEVAL_ALIASES)
)
"""Every predefined tool name (and alias) that ``LocalServices.tools_for`` implements."""


class LocalServices:
    """The database, file tree and retrieval index of one session, under ``root``.

    Layout: ``db.sqlite3``, ``files/`` (the sandbox) with ``files.index.sqlite3``,
    and ``retrieval.sqlite3``. Two ``LocalServices`` on the same ``root`` share data;
    the runtime gives each session (and each ``--connic-env``) its own root.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.db = LocalDatabase(self.root / "db.sqlite3")
        self.files = LocalFiles(self.root / "files")
        self.retrieval = LocalRetrieval(self.root / "retrieval.sqlite3")

    def tools_for(
        self,
        agent_name: str,
        agent_config: object,
        *,
        run_id: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, ToolFunction]:
        """Every data tool name in ``DATA_TOOL_NAMES`` mapped to an async callable for this agent.

        ``agent_config`` is the SDK's ``AgentConfig`` (or any object with ``database``,
        ``files`` and ``retrieval`` attributes, each possibly ``None``); ``None`` means
        unrestricted. Anything else raises ``TypeError``.
        ``run_id``/``session_id`` identify the run for the file tools (``_run_id``,
        ``_session_id``, ``scope``, ``session_only``).
        """
        if agent_config is not None and not all(
            hasattr(agent_config, key) for key in ("database", "files", "retrieval")
        ):
            # An ``Agent`` passed by mistake would otherwise silently lift every restriction.
            raise TypeError(
                f"agent_config must be an AgentConfig (agent.config) or None, got {agent_config!r}"
            )
        bound: list[BoundDatabase | BoundFiles | BoundRetrieval] = [
            self.db.bind(getattr(agent_config, "database", None), agent_name),
            self.files.bind(
                getattr(agent_config, "files", None), agent_name, run_id=run_id, session_id=session_id
            ),
            self.retrieval.bind(getattr(agent_config, "retrieval", None), agent_name),
        ]
        tools: dict[str, ToolFunction] = {}
        for names, owner in zip((DB_TOOL_NAMES, FILE_TOOL_NAMES, RETRIEVAL_TOOL_NAMES), bound):
            tools.update({name: getattr(owner, name) for name in names})
        tools.update({alias: tools[target] for alias, target in RETRIEVAL_ALIASES.items()})
        return tools

    def close(self) -> None:
        """Close every SQLite connection."""
        self.db.close()
        self.files.close()
        self.retrieval.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def tool_schema(name: str) -> JsonObject:
    """``{"name", "description", "parameters"}`` of a predefined tool, as the model sees it.

    The JSON schema comes from the SDK's own generator (``ProjectLoader._generate_schema``)
    applied to the placeholder in ``connic.tools``; the description is its docstring.
    An alias is described by the tool it stands for. Raises ``ValueError`` for a name
    that is not a predefined tool.
    """
    return copy.deepcopy(_tool_schema(name))


@functools.cache
def _tool_schema(name: str) -> JsonObject:
    from pytest_connic.project.sdk import (
        PREDEFINED_TOOL_ALIASES,
        PREDEFINED_TOOL_NAMES,
        generate_schema,
        sdk_tools,
    )

    target = PREDEFINED_TOOL_ALIASES.get(name, name)
    function = getattr(sdk_tools, target, None)
    if target not in PREDEFINED_TOOL_NAMES or function is None:
        raise ValueError(f"{name!r} is not a predefined Connic tool")
    parameters = generate_schema(function)
    description = inspect.getdoc(function) or "No description provided."
    return {"name": name, "description": description, "parameters": parameters}
