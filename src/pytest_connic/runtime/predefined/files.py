"""``file_*``: Connic's per-environment file tree, in a local sandbox directory.

File contents live as ordinary files under the sandbox root (so a test author can
inspect them, or seed the tree by copying files in); their metadata lives in a small
SQLite index beside the root. Every file carries Connic's system fields (``_path``,
``_folder``, ``_name``, ``_mime_type``, ``_size``, ``_source``, ``_agent``,
``_run_id``, ``_session_id``, ``_created_at``, ``_updated_at``, plus ``_id``) next to
its custom metadata, and ``file_list`` filters on all of them with the ``db_find``
operators. A file found on disk without an index entry is listed with ``_source``
``"dashboard"`` (it was put there by a person, not by an agent).

Folders exist only while they hold files, as on Connic: deleting or moving the last
file of a folder removes the folder.
"""

from __future__ import annotations

import json
import mimetypes
import os
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Literal, TypedDict

from pytest_connic.jsonsafe import JsonObject
from pytest_connic.runtime.predefined.access import ScopeAccess, files_access
from pytest_connic.runtime.predefined.db import now_iso, open_sqlite
from pytest_connic.runtime.predefined.errors import PredefinedToolError
from pytest_connic.runtime.predefined.query import Document, check_page, compile_filter, sort_documents
from pytest_connic.runtime.predefined.sandbox import Sandbox, is_under, normalise, parent_of

_SCHEMA = "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, meta TEXT NOT NULL);"
Meta = Document
"""A file's metadata: Connic's system fields (``_path``, ``_size``, ...) and the custom ones."""


class Listing(TypedDict):
    """``file_list``'s result."""

    folder: str
    folders: list[str]
    files: list[Meta]
    count: int
    total: int


class Read(TypedDict):
    """``file_read``'s result for a file: its metadata and its content."""

    file: Meta
    content: bytes


class NotFound(TypedDict):
    """``file_read``'s result when there is no such file."""

    error: str


class Moved(TypedDict, total=False):
    """``file_update``'s result: how many files moved, and the file or the folder."""

    moved: int
    file: Meta
    folder: str


class Removed(TypedDict):
    """``file_delete``'s result."""

    deleted: int


def path_of(meta: Meta) -> str:
    """The ``_path`` of a file's metadata (always a string: the index writes it)."""
    return str(meta["_path"])


@dataclass(frozen=True)
class Caller:
    """Who calls the file tools: access rules plus the identity stamped on written files."""

    access: ScopeAccess
    agent: str | None = None
    run_id: str | None = None
    session_id: str | None = None
    source: str = "api"

    def sees(self, meta: Meta) -> bool:
        """Whether this caller may see the file (folders, then ``session_only``)."""
        path = path_of(meta)
        if not self.access.visible(path):
            return False
        session_only, _ = self.access.flag(path, "session_only")
        if not session_only:
            return True
        return self.session_id is not None and meta.get("_session_id") == self.session_id


def _custom(metadata: object, *, allow_none: bool) -> JsonObject:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise PredefinedToolError(f"metadata must be a JSON object, got {metadata!r}")
    for key, value in metadata.items():
        if not isinstance(key, str) or not key or key.startswith("_"):
            raise PredefinedToolError(f"metadata key {key!r} is not allowed: keys must not start with '_'")
        if value is None and not allow_none:
            raise PredefinedToolError(f"metadata value for {key!r} must not be null")
    try:
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise PredefinedToolError(f"metadata must be plain JSON: {error}") from None
    return metadata


def _encode(content: object) -> bytes:
    if isinstance(content, str):
        return content.encode("utf-8")
    if isinstance(content, (bytes, bytearray)):
        return bytes(content)
    raise PredefinedToolError(f"content must be text or bytes, got {type(content).__name__}")


def _partition(metas: list[Meta], folder: str, recursive: bool) -> tuple[list[Meta], set[str]]:
    """The files to list, and (unless recursive) the subfolders that hold the others."""
    if recursive:
        return metas, set()
    folders = set()
    for meta in metas:
        if meta["_folder"] != folder:
            path = path_of(meta)
            rest = path[len(folder) + 1 :] if folder else path
            first = rest.split("/", 1)[0]
            folders.add(f"{folder}/{first}" if folder else first)
    return [meta for meta in metas if meta["_folder"] == folder], folders


def _numbered(path: str, number: int) -> str:
    pure = PurePosixPath(path)
    name = f"{pure.stem} ({number}){pure.suffix}"
    return str(pure.with_name(name))


class FileStore:
    """The sandbox tree plus its metadata index; every public method takes the ``Caller``."""

    def __init__(self, root: Path, index: Path | None = None) -> None:
        self.sandbox = Sandbox(root)
        self._lock = threading.RLock()
        self._index = open_sqlite(index or root.with_name(root.name + ".index.sqlite3"), _SCHEMA)

    def close(self) -> None:
        """Close the metadata index."""
        with self._lock:
            self._index.close()

    # ------------------------------------------------------------------ metadata index

    def _rows(self) -> dict[str, Meta]:
        return {path: json.loads(meta) for path, meta in self._index.execute("SELECT path, meta FROM files")}

    def _put(self, meta: Meta) -> None:
        self._index.execute(
            "INSERT OR REPLACE INTO files (path, meta) VALUES (?, ?)", (path_of(meta), json.dumps(meta))
        )

    def _forget(self, path: str) -> None:
        self._index.execute("DELETE FROM files WHERE path = ?", (path,))

    def _describe(self, path: str, stored: Meta | None) -> Meta:
        stat = (self.sandbox.root / path).stat()
        if stored is not None:
            return {**stored, "_size": stat.st_size}
        stamp = datetime.fromtimestamp(stat.st_mtime, timezone.utc).isoformat(timespec="microseconds")
        name = PurePosixPath(path).name
        return {
            "_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"connic-file:{path}")),
            "_path": path,
            "_folder": parent_of(path),
            "_name": name,
            "_mime_type": mimetypes.guess_type(name)[0] or "application/octet-stream",
            "_size": stat.st_size,
            "_source": "dashboard",
            "_agent": None,
            "_run_id": None,
            "_session_id": None,
            "_created_at": stamp,
            "_updated_at": stamp,
        }

    def _file(self, caller: Caller, path: str) -> Meta | None:
        """Metadata of the file at ``path`` if it exists and ``caller`` may see it."""
        if not self.sandbox.locate(path).is_file():
            return None
        row = self._index.execute("SELECT meta FROM files WHERE path = ?", (path,)).fetchone()
        meta = self._describe(path, json.loads(row[0]) if row else None)
        return meta if caller.sees(meta) else None

    def _files_under(self, caller: Caller, folder: str) -> list[Meta]:
        rows = self._rows()
        metas = [self._describe(path, rows.get(path)) for path in self.sandbox.walk(folder)]
        return [meta for meta in metas if caller.sees(meta)]

    # ------------------------------------------------------------------ disk helpers

    def _make_parent(self, path: str) -> None:
        folder = parent_of(path)
        prefix = ""
        for segment in folder.split("/") if folder else []:
            prefix = f"{prefix}/{segment}" if prefix else segment
            if self.sandbox.locate(prefix).is_file():
                raise PredefinedToolError(f"cannot create {path!r}: {prefix!r} is a file, not a folder")
        self.sandbox.locate(folder).mkdir(parents=True, exist_ok=True)

    def _free_path(self, path: str) -> str:
        candidate, number = path, 1
        while os.path.lexists(self.sandbox.locate(candidate)):
            number += 1
            candidate = _numbered(path, number)
        return candidate

    def _move(self, meta: Meta, destination: str, stamp: str) -> Meta:
        source = path_of(meta)
        target = self.sandbox.locate(destination)
        self._make_parent(destination)
        os.rename(self.sandbox.locate(source), target)
        self._forget(source)
        name = PurePosixPath(destination).name
        moved = {**meta, "_path": destination, "_folder": parent_of(destination), "_name": name}
        moved["_updated_at"] = stamp
        self._put(moved)
        self.sandbox.prune(parent_of(source))
        return moved

    # ------------------------------------------------------------------ operations

    def list(
        self,
        caller: Caller,
        folder: object,
        recursive: bool,
        filter: object,
        scope: object,
        sort: object,
        limit: object,
        skip: object,
    ) -> Listing:
        """``file_list``: files of ``folder`` (or below it) matching ``filter``, one page."""
        folder = normalise(folder, folder=True)
        if not caller.access.reachable(folder):
            caller.access.require_visible(folder)
        predicate = compile_filter(filter, what="file_list filter")
        in_scope = self._scope_test(caller, scope)
        limit, skip = check_page(limit, skip)
        with self._lock:
            metas = self._files_under(caller, folder)
        candidates, folders = _partition(metas, folder, recursive)
        matched = [meta for meta in candidates if predicate(meta) and in_scope(meta)]
        ordered = sort_documents(matched, sort or {"_name": 1})
        page = ordered[skip : skip + limit]
        return {
            "folder": folder,
            "folders": sorted(folders),
            "files": page,
            "count": len(page),
            "total": len(ordered),
        }

    def _scope_test(self, caller: Caller, scope: object) -> Callable[[Meta], bool]:
        if scope == "all":
            return lambda _meta: True
        keys = {"session": ("_session_id", caller.session_id), "run": ("_run_id", caller.run_id)}
        if scope not in keys:
            raise PredefinedToolError(f"scope must be 'all', 'session' or 'run', got {scope!r}")
        field, value = keys[scope]
        if value is None:
            raise PredefinedToolError(f"scope={scope!r} needs a current {scope}, and this call has none")
        return lambda meta: meta.get(field) == value

    def read(self, caller: Caller, path: object) -> Read | NotFound:
        """``file_read``: ``{"file", "content": bytes}`` or ``{"error"}`` when there is no such file."""
        path = normalise(path)
        caller.access.require_visible(path)
        with self._lock:
            meta = self._file(caller, path)
            if meta is None:
                return {"error": f"File not found: {path}"}
            content = self.sandbox.locate(path).read_bytes()
        return {"file": meta, "content": content}

    def write(
        self, caller: Caller, path: object, content: object, mime_type: object, metadata: object, overwrite: bool
    ) -> Meta:
        """``file_write``: store a file (a numbered name when taken and not ``overwrite``)."""
        path = normalise(path)
        caller.access.require(path, "prevent_write")
        data = _encode(content)
        custom = _custom(metadata, allow_none=False)
        if mime_type is not None and not isinstance(mime_type, str):
            raise PredefinedToolError(f"mime_type must be a string, got {mime_type!r}")
        with self._lock:
            target = path if overwrite else self._free_path(path)
            disk = self.sandbox.locate(target)
            if disk.is_dir():
                raise PredefinedToolError(f"cannot write {target!r}: it is a folder")
            self._make_parent(target)
            disk.write_bytes(data)
            meta = self._new_meta(caller, target, len(data), mime_type, custom, isinstance(content, str))
            self._put(meta)
        return meta

    def _new_meta(
        self, caller: Caller, path: str, size: int, mime: str | None, custom: JsonObject, text: bool
    ) -> Meta:
        name = PurePosixPath(path).name
        fallback = "text/plain" if text else "application/octet-stream"
        stamp = now_iso()
        return {
            **custom,
            "_id": str(uuid.uuid4()),
            "_path": path,
            "_folder": parent_of(path),
            "_name": name,
            "_mime_type": mime or mimetypes.guess_type(name)[0] or fallback,
            "_size": size,
            "_source": caller.source,
            "_agent": caller.agent,
            "_run_id": caller.run_id,
            "_session_id": caller.session_id,
            "_created_at": stamp,
            "_updated_at": stamp,
        }

    def update(self, caller: Caller, path: object, new_path: object, metadata: object) -> Moved:
        """``file_update``: move/rename a file or folder, or merge a file's metadata."""
        path = normalise(path)
        caller.access.require_visible(path)
        if new_path is None and metadata is None:
            raise PredefinedToolError("file_update needs new_path, metadata, or both")
        destination = None if new_path is None else normalise(new_path)
        custom = _custom(metadata, allow_none=True)
        with self._lock:
            disk = self.sandbox.locate(path)
            if disk.is_file():
                return self._update_file(caller, path, destination, custom)
            if disk.is_dir() and not disk.is_symlink():
                if metadata is not None or destination is None:
                    raise PredefinedToolError(f"{path!r} is a folder; metadata can only be set on files")
                return self._move_folder(caller, path, destination)
        raise PredefinedToolError(f"No file or folder at {path!r}")

    def _update_file(
        self, caller: Caller, path: str, destination: str | None, custom: JsonObject
    ) -> Moved:
        meta = self._file(caller, path)
        if meta is None:
            raise PredefinedToolError(f"No file or folder at {path!r}")
        caller.access.require(path, "prevent_write")
        stamp = now_iso()
        moved = 0
        if destination is not None and destination != path:
            caller.access.require(destination, "prevent_write")
            if os.path.lexists(self.sandbox.locate(destination)):
                raise PredefinedToolError(f"cannot move {path!r}: {destination!r} already exists")
            meta, moved = self._move(meta, destination, stamp), 1
        if custom:
            meta = {k: v for k, v in {**meta, **custom}.items() if v is not None or k.startswith("_")}
            meta["_updated_at"] = stamp
            self._put(meta)
        return {"moved": moved, "file": meta}

    def _move_folder(self, caller: Caller, path: str, destination: str) -> Moved:
        if destination == path or is_under(destination, path):
            raise PredefinedToolError(f"cannot move folder {path!r} into itself ({destination!r})")
        caller.access.require_subtree(path, "prevent_write")
        caller.access.require_subtree(destination, "prevent_write")
        metas = self._files_under(caller, path)
        if not metas:
            raise PredefinedToolError(f"No file or folder at {path!r}")
        targets = {path_of(meta): destination + path_of(meta)[len(path) :] for meta in metas}
        taken = [t for t in targets.values() if os.path.lexists(self.sandbox.locate(t))]
        if taken:
            raise PredefinedToolError(f"cannot move {path!r}: {taken[0]!r} already exists")
        stamp = now_iso()
        for meta in metas:
            self._move(meta, targets[path_of(meta)], stamp)
        return {"moved": len(metas), "folder": destination}

    def delete(self, caller: Caller, path: object, recursive: bool) -> Removed:
        """``file_delete``: a file, or (with ``recursive``) every file of a folder."""
        path = normalise(path)
        caller.access.require_visible(path)
        with self._lock:
            disk = self.sandbox.locate(path)
            if disk.is_file() and self._file(caller, path) is not None:
                caller.access.require(path, "prevent_delete")
                metas: list[Meta] = [{"_path": path}]
            elif disk.is_dir() and not disk.is_symlink():
                if not recursive:
                    raise PredefinedToolError(f"{path!r} is a folder: pass recursive=true to delete it")
                caller.access.require_subtree(path, "prevent_delete")
                metas = self._files_under(caller, path)
            else:
                raise PredefinedToolError(f"No file or folder at {path!r}")
            for meta in metas:
                self.sandbox.locate(path_of(meta)).unlink()
                self._forget(path_of(meta))
                self.sandbox.prune(parent_of(path_of(meta)))
        return {"deleted": len(metas)}


class _FileTools:
    """The five ``file_*`` tools with the SDK's signatures, over a store and a caller."""

    _store: FileStore
    _caller: Caller

    async def file_list(
        self,
        folder: str = "",
        recursive: bool = False,
        filter: JsonObject | None = None,
        scope: Literal["all", "session", "run"] = "all",
        sort: dict[str, int] | None = None,
        limit: int = 100,
        skip: int = 0,
    ) -> Listing:
        """List files and subfolders of ``folder``: ``{folder, folders, files, count, total}``."""
        return self._store.list(self._caller, folder, recursive, filter, scope, sort, limit, skip)

    async def file_read(self, path: str) -> Read | NotFound:
        """Read a file: ``{"file": {...}, "content": bytes}`` (bytes: not JSON-serialisable)."""
        return self._store.read(self._caller, path)

    async def file_write(
        self,
        path: str,
        content: str | bytes,
        mime_type: str | None = None,
        metadata: JsonObject | None = None,
        overwrite: bool = False,
    ) -> Meta:
        """Write a file; missing folders are created. Returns its metadata."""
        return self._store.write(self._caller, path, content, mime_type, metadata, overwrite)

    async def file_update(
        self,
        path: str,
        new_path: str | None = None,
        metadata: JsonObject | None = None,
    ) -> Moved:
        """Move or rename a file or folder, or merge metadata into a file (null removes)."""
        return self._store.update(self._caller, path, new_path, metadata)

    async def file_delete(self, path: str, recursive: bool = False) -> Removed:
        """Delete a file, or a folder and everything in it (``recursive`` required)."""
        return self._store.delete(self._caller, path, recursive)


class LocalFiles(_FileTools):
    """Connic's file tree in the sandbox directory ``root``; unrestricted tools (``_source`` "api").

    The metadata index defaults to ``<root>.index.sqlite3`` beside the root, so the
    sandbox holds nothing but the agent-visible files.
    """

    def __init__(self, root: Path, index: Path | None = None) -> None:
        self._store = FileStore(root, index)
        self._caller = Caller(files_access(None, "api"))
        self.root = self._store.sandbox.root

    def close(self) -> None:
        """Close the metadata index."""
        self._store.close()

    def bind(
        self,
        access: object,
        agent_name: str,
        *,
        run_id: str | None = None,
        session_id: str | None = None,
    ) -> BoundFiles:
        """The ``file_*`` tools for one agent run, enforcing its ``FilesAccessConfig`` (or ``None``).

        ``run_id``/``session_id`` are stamped on written files and drive ``scope`` and
        ``session_only``.
        """
        caller = Caller(files_access(access, agent_name), agent_name, run_id, session_id, "agent")
        return BoundFiles(self._store, caller)


class BoundFiles(_FileTools):
    """The ``file_*`` tools as one agent run sees them."""

    def __init__(self, store: FileStore, caller: Caller) -> None:
        self._store = store
        self._caller = caller
        self.access = caller.access
