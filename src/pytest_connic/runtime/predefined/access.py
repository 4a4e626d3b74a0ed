"""An agent's access rules for the data tools (``database:``, ``retrieval:``, ``files:``).

The three SDK configs (``connic.core.DatabaseAccessConfig``, ``RetrievalAccessConfig``,
``FilesAccessConfig``) share one shape: an optional mapping of scopes (collections,
namespaces, folders) with per-scope overrides, and global ``prevent_*`` flags that a
scope's value inherits when it is ``None``. ``ScopeAccess`` interprets that shape;
the three constructors below differ only in how a scope covers a name:

* a collection covers exactly itself;
* a namespace covers itself and its dot-separated sub-namespaces (Connic: "Namespace
  scoping always covers the whole subtree");
* a folder covers itself and everything below it ("invoices" covers
  "invoices/2026/acme.pdf").

Where several configured scopes cover a name, the most specific (longest) one decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pytest_connic.runtime.predefined.errors import PredefinedToolError

_FLAG_VERBS = {"prevent_write": "write to", "prevent_delete": "delete from", "session_only": "see"}


@dataclass(frozen=True)
class ScopeAccess:
    """Access rules for one kind of scope, for one agent.

    ``scopes`` is ``None`` for "everything is accessible", otherwise a mapping of
    scope name to an object with optional ``prevent_write``/``prevent_delete``/
    ``session_only`` attributes (the SDK's ``*Permissions`` models).
    """

    agent: str
    kind: str
    section: str
    separator: str | None
    scopes: Mapping[str, object] | None
    flags: Mapping[str, bool]

    def _covers(self, scope: str, name: str) -> bool:
        if name == scope:
            return True
        return self.separator is not None and name.startswith(scope + self.separator)

    def governing(self, name: str | None) -> str | None:
        """The most specific configured scope that covers ``name``, if any."""
        if self.scopes is None or name is None:
            return None
        covering = [scope for scope in self.scopes if self._covers(scope, name)]
        return max(covering, key=len) if covering else None

    def visible(self, name: str | None) -> bool:
        """Whether the agent may see ``name`` at all (``None``: the unnamed default scope)."""
        return self.scopes is None or self.governing(name) is not None

    def reachable(self, name: str) -> bool:
        """Visible, or an ancestor of a configured scope (so listing it can show that scope)."""
        if self.visible(name):
            return True
        return name == "" or any(self._covers(name, scope) for scope in self.scopes or {})

    def flag(self, name: str | None, flag: str) -> tuple[bool, str]:
        """The effective value of ``flag`` for ``name`` and the config key it came from."""
        scope = self.governing(name)
        if scope is not None and self.scopes is not None:
            override = getattr(self.scopes[scope], flag, None)
            if override is not None:
                return bool(override), f"{self.section}.{scope}.{flag}"
        return bool(self.flags.get(flag, False)), flag

    def require_visible(self, name: str | None) -> None:
        """Raise unless ``name`` lies inside the configured scopes."""
        if self.visible(name):
            return
        allowed = ", ".join(sorted(self.scopes or {}))
        shown = f"{self.kind} {name!r}" if name is not None else f"the default {self.kind}"
        raise PredefinedToolError(
            f"Access denied: agent {self.agent!r} may not access {shown} "
            f"(not listed in {self.section}: {allowed})"
        )

    def require(self, name: str | None, flag: str) -> None:
        """Raise unless ``name`` is visible and ``flag`` (``prevent_write``/``prevent_delete``) is off."""
        self.require_visible(name)
        blocked, source = self.flag(name, flag)
        if blocked:
            shown = f"{self.kind} {name!r}" if name is not None else f"the default {self.kind}"
            raise PredefinedToolError(
                f"Access denied: agent {self.agent!r} may not {_FLAG_VERBS[flag]} {shown} ({source})"
            )

    def require_subtree(self, name: str | None, flag: str) -> None:
        """``require`` for an operation on ``name`` and everything below it."""
        self.require(name, flag)
        source = self.blocked_below(name, flag)
        if source is not None:
            shown = f"{self.kind} {name!r}" if name is not None else f"every {self.kind}"
            raise PredefinedToolError(
                f"Access denied: agent {self.agent!r} may not {_FLAG_VERBS[flag]} {shown}: "
                f"part of it is protected ({source})"
            )

    def blocked_below(self, name: str | None, flag: str) -> str | None:
        """A configured scope inside ``name``'s subtree where ``flag`` is on, if any.

        Used for subtree operations (deleting a namespace or a folder): the whole
        subtree is refused if any part of it is protected.
        """
        for scope in sorted(self.scopes or {}):
            if name is None or self._covers(name, scope):
                blocked, source = self.flag(scope, flag)
                if blocked:
                    return source
        return None


def _flags(config: object, *names: str) -> dict[str, bool]:
    return {name: bool(getattr(config, name, False)) for name in names}


def database_access(config: object, agent: str) -> ScopeAccess:
    """Rules from a ``DatabaseAccessConfig`` (or ``None``: unrestricted)."""
    return ScopeAccess(
        agent=agent,
        kind="collection",
        section="database.collections",
        separator=None,
        scopes=getattr(config, "collections", None),
        flags=_flags(config, "prevent_write", "prevent_delete"),
    )


def retrieval_access(config: object, agent: str) -> ScopeAccess:
    """Rules from a ``RetrievalAccessConfig`` (or ``None``: unrestricted)."""
    return ScopeAccess(
        agent=agent,
        kind="namespace",
        section="retrieval.namespaces",
        separator=".",
        scopes=getattr(config, "namespaces", None),
        flags=_flags(config, "prevent_write", "prevent_delete"),
    )


def files_access(config: object, agent: str) -> ScopeAccess:
    """Rules from a ``FilesAccessConfig`` (or ``None``: unrestricted)."""
    return ScopeAccess(
        agent=agent,
        kind="path",
        section="files.folders",
        separator="/",
        scopes=getattr(config, "folders", None),
        flags=_flags(config, "prevent_write", "prevent_delete", "session_only"),
    )
