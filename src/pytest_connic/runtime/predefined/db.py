"""``db_*``: Connic's schemaless document database, on a local SQLite file.

Each document is stored as JSON text in one table keyed by collection; filters,
sorting and projections run in Python over the loaded documents (``query.py``), which
is exact and fast enough for test-sized data. Every document carries the system
fields Connic documents: ``_id`` (a UUID string), ``_created_at`` (set on insert) and
``_updated_at`` (set on every write), ISO 8601 in UTC; they are read-only.

One connection is shared behind a lock (``check_same_thread=False``), so the runtime
may call from its event loop and from worker threads at once; every write is one
SQLite transaction, so a failed update leaves no document half-changed.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal, TypedDict

from pytest_connic.jsonsafe import JsonObject, JsonValue
from pytest_connic.runtime.predefined.access import ScopeAccess, database_access
from pytest_connic.runtime.predefined.errors import PredefinedToolError
from pytest_connic.runtime.predefined.query import (
    Document,
    check_fields,
    check_page,
    compile_filter,
    distinct_values,
    project,
    sort_documents,
)

SYSTEM_FIELDS = ("_id", "_created_at", "_updated_at")
_COLLECTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,49}")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS collections (name TEXT PRIMARY KEY, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    collection TEXT NOT NULL,
    id TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (collection, id)
);
"""


class FoundDocuments(TypedDict):
    """``db_find``'s result."""

    documents: list[Document]
    count: int


class FoundValues(TypedDict):
    """``db_find``'s result with ``distinct``."""

    values: list[JsonValue]
    count: int


class Inserted(TypedDict):
    """``db_insert``'s result."""

    inserted: list[Document]
    inserted_count: int


class Updated(TypedDict):
    """``db_update``'s result."""

    updated_ids: list[JsonValue]
    updated_count: int


class Upserted(TypedDict):
    """``db_upsert``'s result."""

    upserted_id: JsonValue
    operation: Literal["updated", "inserted"]


class Deleted(TypedDict):
    """``db_delete``'s result."""

    deleted_ids: list[JsonValue]
    deleted_count: int


class Counted(TypedDict):
    """``db_count``'s result."""

    count: int


class CollectionInfo(TypedDict):
    """One collection in ``db_list_collections``."""

    name: str
    document_count: int
    size_bytes: int


class Collections(TypedDict):
    """``db_list_collections``'s result."""

    collections: list[CollectionInfo]
    total: int


def now_iso() -> str:
    """The current time as ISO 8601 in UTC, as stored in ``_created_at``/``_updated_at``."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def open_sqlite(path: Path, schema: str) -> sqlite3.Connection:
    """A connection usable from any thread (callers serialise access with a lock)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.executescript(schema)
    return connection


def check_collection(name: object) -> str:
    """Connic's rule: start with a letter; lowercase letters, digits, underscores; at most 50."""
    if not isinstance(name, str) or not _COLLECTION_NAME.fullmatch(name):
        raise PredefinedToolError(
            f"invalid collection name {name!r}: use lowercase letters, digits and underscores, "
            "starting with a letter, at most 50 characters"
        )
    return name


def _dump(document: object) -> str:
    try:
        return json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise PredefinedToolError(f"documents must be plain JSON: {error}") from None


def _check_user_keys(fields: Mapping[str, object], what: str) -> None:
    for key in fields:
        if not isinstance(key, str) or not key:
            raise PredefinedToolError(f"{what}: field names must be non-empty strings, got {key!r}")
        if key.startswith("$"):
            raise PredefinedToolError(
                f"{what}: {key!r} is not allowed; update operators such as $set are not supported, "
                "pass the fields and values to set (null removes a field)"
            )
        if key.split(".")[0] in SYSTEM_FIELDS:
            raise PredefinedToolError(f"{what}: system field {key!r} is read-only")


def _set_path(document: Document, path: str, value: JsonValue, remove_none: bool) -> None:
    *parents, leaf = path.split(".")
    target = document
    for segment in parents:
        child = target.get(segment)
        if child is None and not (remove_none and value is None):
            child = target[segment] = {}
        if not isinstance(child, dict):
            if remove_none and value is None:
                return
            raise PredefinedToolError(f"cannot set {path!r}: {segment!r} is not an object")
        target = child
    if remove_none and value is None:
        target.pop(leaf, None)
    else:
        target[leaf] = value


def merge(document: Document, update: Mapping[str, JsonValue], *, remove_none: bool) -> Document:
    """A copy of ``document`` with ``update`` merged in (dot keys are paths)."""
    merged: Document = json.loads(json.dumps(document))
    for key, value in update.items():
        _set_path(merged, key, value, remove_none)
    return merged


def insert_seed(filter: Mapping[str, JsonValue]) -> Document:
    """The part of an upsert filter copied into a new document: top-level literal equalities."""
    return {
        key: value
        for key, value in filter.items()
        if not key.startswith("$")
        and "." not in key
        and not (isinstance(value, dict) and any(str(k).startswith("$") for k in value))
    }


class SqliteStore:
    """One SQLite file behind a lock, with ``IMMEDIATE`` transactions (database and retrieval index)."""

    def __init__(self, path: Path, schema: str) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._connection = open_sqlite(path, schema)

    def close(self) -> None:
        """Close the SQLite connection."""
        with self._lock:
            self._connection.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._connection.execute("BEGIN IMMEDIATE")
            try:
                yield self._connection
            except BaseException:
                self._connection.execute("ROLLBACK")
                raise
            self._connection.execute("COMMIT")


class LocalDatabase(SqliteStore):
    """Connic's document database on one SQLite file (``<session dir>/db.sqlite3``)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, _SCHEMA)

    def bind(self, access: object, agent_name: str) -> BoundDatabase:
        """The ``db_*`` tools for one agent, enforcing its ``DatabaseAccessConfig`` (or ``None``)."""
        return BoundDatabase(self, database_access(access, agent_name))


    def _load(self, connection: sqlite3.Connection, collection: str) -> list[Document]:
        rows = connection.execute(
            "SELECT body FROM documents WHERE collection = ? ORDER BY seq", (collection,)
        )
        return [json.loads(body) for (body,) in rows]

    def _matching(self, collection: str, filter: Mapping[str, JsonValue] | None) -> list[Document]:
        predicate = compile_filter(filter)
        with self._lock:
            documents = self._load(self._connection, check_collection(collection))
        return [document for document in documents if predicate(document)]

    def _store(self, connection: sqlite3.Connection, collection: str, documents: list[Document]) -> None:
        connection.execute(
            "INSERT OR IGNORE INTO collections (name, created_at) VALUES (?, ?)", (collection, now_iso())
        )
        connection.executemany(
            "INSERT INTO documents (collection, id, body) VALUES (?, ?, ?)",
            [(collection, document["_id"], _dump(document)) for document in documents],
        )

    def _rewrite(self, connection: sqlite3.Connection, collection: str, documents: list[Document]) -> None:
        connection.executemany(
            "UPDATE documents SET body = ? WHERE collection = ? AND id = ?",
            [(_dump(document), collection, document["_id"]) for document in documents],
        )

    async def db_find(
        self,
        collection: str,
        filter: JsonObject | None = None,
        sort: dict[str, int] | None = None,
        limit: int = 100,
        skip: int = 0,
        fields: list[str] | None = None,
        distinct: str | None = None,
    ) -> FoundDocuments | FoundValues:
        """Find documents: ``{"documents", "count"}``, or ``{"values", "count"}`` with ``distinct``."""
        check_page(limit, skip)
        documents = sort_documents(self._matching(collection, filter), sort)
        if distinct is not None:
            if not isinstance(distinct, str) or not distinct:
                raise PredefinedToolError(f"distinct must be a field path, got {distinct!r}")
            values = distinct_values(documents, distinct)[skip : skip + limit]
            return {"values": values, "count": len(values)}
        page = documents[skip : skip + limit]
        if fields is not None:
            paths = check_fields(fields)
            page = [project(document, paths, always=("_id",)) for document in page]
        return {"documents": page, "count": len(page)}

    async def db_insert(
        self,
        collection: str,
        documents: JsonObject | list[JsonObject],
    ) -> Inserted:
        """Insert one document or a list; the collection is created on first write."""
        check_collection(collection)
        batch = [documents] if isinstance(documents, dict) else documents
        if not isinstance(batch, list) or not batch or not all(isinstance(d, dict) for d in batch):
            raise PredefinedToolError("documents must be a JSON object or a non-empty list of objects")
        stamp = now_iso()
        inserted = []
        for document in batch:
            _check_user_keys(document, "db_insert")
            system = {"_id": str(uuid.uuid4()), "_created_at": stamp, "_updated_at": stamp}
            inserted.append({**json.loads(_dump(document)), **system})
        with self._transaction() as connection:
            self._store(connection, collection, inserted)
        return {"inserted": inserted, "inserted_count": len(inserted)}

    async def db_update(
        self,
        collection: str,
        filter: JsonObject,
        update: JsonObject,
    ) -> Updated:
        """Merge ``update`` into every matching document (``None`` removes a field)."""
        check_collection(collection)
        predicate = compile_filter(_require_dict(filter, "filter"))
        _check_update(update, "db_update")
        stamp = now_iso()
        with self._transaction() as connection:
            targets = [d for d in self._load(connection, collection) if predicate(d)]
            changed = [{**merge(d, update, remove_none=True), "_updated_at": stamp} for d in targets]
            self._rewrite(connection, collection, changed)
        return {"updated_ids": [d["_id"] for d in changed], "updated_count": len(changed)}

    async def db_upsert(
        self,
        collection: str,
        filter: JsonObject,
        update: JsonObject,
        insert_only: JsonObject | None = None,
    ) -> Upserted:
        """Update the first match, or insert filter equalities + ``update`` + ``insert_only``
        (a ``None`` in ``update`` removes the field from a match, and is omitted from an insert)."""
        check_collection(collection)
        if not _require_dict(filter, "filter"):
            raise PredefinedToolError("db_upsert needs a non-empty filter identifying the target document")
        predicate = compile_filter(filter)
        _check_update(update, "db_upsert")
        extra = _require_dict(insert_only or {}, "insert_only")
        _check_user_keys(extra, "db_upsert insert_only")
        stamp = now_iso()
        with self._transaction() as connection:
            target = next((d for d in self._load(connection, collection) if predicate(d)), None)
            if target is not None:
                changed = {**merge(target, update, remove_none=True), "_updated_at": stamp}
                self._rewrite(connection, collection, [changed])
                return {"upserted_id": target["_id"], "operation": "updated"}
            # a None in ``update`` is omitted from the inserted document (predefined-tools.md): left
            # out of the merge, so a filter equality of the same field stays and the document
            # matches its filter; ``insert_only`` is stored as given
            given = {key: value for key, value in update.items() if value is not None}
            seed = merge(insert_seed(filter), given, remove_none=False)
            created = {**merge(seed, extra, remove_none=False), "_id": str(uuid.uuid4())}
            created.update({"_created_at": stamp, "_updated_at": stamp})
            self._store(connection, collection, [created])
        return {"upserted_id": created["_id"], "operation": "inserted"}

    async def db_delete(self, collection: str, filter: JsonObject) -> Deleted:
        """Delete matching documents; an empty filter is refused (no accidental drop-all)."""
        check_collection(collection)
        if not _require_dict(filter, "filter"):
            raise PredefinedToolError("db_delete needs a non-empty filter (refusing to delete everything)")
        predicate = compile_filter(filter)
        with self._transaction() as connection:
            ids = [d["_id"] for d in self._load(connection, collection) if predicate(d)]
            connection.executemany(
                "DELETE FROM documents WHERE collection = ? AND id = ?", [(collection, i) for i in ids]
            )
        return {"deleted_ids": ids, "deleted_count": len(ids)}

    async def db_count(self, collection: str, filter: JsonObject | None = None) -> Counted:
        """Count the documents matching ``filter`` (all of them without one)."""
        return {"count": len(self._matching(collection, filter))}

    async def db_list_collections(self) -> Collections:
        """Every collection with its document count and stored JSON size in bytes."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT c.name, COUNT(d.seq), COALESCE(SUM(LENGTH(CAST(d.body AS BLOB))), 0) "
                "FROM collections c LEFT JOIN documents d ON d.collection = c.name "
                "GROUP BY c.name ORDER BY c.name"
            ).fetchall()
        collections: list[CollectionInfo] = [
            {"name": n, "document_count": c, "size_bytes": s} for n, c, s in rows
        ]
        return {"collections": collections, "total": len(collections)}


def _require_dict(value: object, name: str) -> JsonObject:
    if not isinstance(value, dict):
        raise PredefinedToolError(f"{name} must be a JSON object, got {value!r}")
    return value


def _check_update(update: object, tool: str) -> None:
    fields = _require_dict(update, "update")
    if not fields:
        raise PredefinedToolError(f"{tool}: update must not be empty")
    _check_user_keys(fields, tool)
    _dump(fields)


class BoundDatabase:
    """The ``db_*`` tools as one agent sees them: same signatures, access rules enforced."""

    def __init__(self, database: LocalDatabase, access: ScopeAccess) -> None:
        self._db = database
        self.access = access

    def _guard(self, collection: str, flag: str | None = None) -> None:
        # A malformed name is a plainer error than "not listed", so validate first.
        check_collection(collection)
        if flag is None:
            self.access.require_visible(collection)
        else:
            self.access.require(collection, flag)

    async def db_find(
        self,
        collection: str,
        filter: JsonObject | None = None,
        sort: dict[str, int] | None = None,
        limit: int = 100,
        skip: int = 0,
        fields: list[str] | None = None,
        distinct: str | None = None,
    ) -> FoundDocuments | FoundValues:
        """``db_find`` within the agent's collections."""
        self._guard(collection)
        return await self._db.db_find(collection, filter, sort, limit, skip, fields, distinct)

    async def db_insert(
        self,
        collection: str,
        documents: JsonObject | list[JsonObject],
    ) -> Inserted:
        """``db_insert``, refused under ``prevent_write``."""
        self._guard(collection, "prevent_write")
        return await self._db.db_insert(collection, documents)

    async def db_update(
        self,
        collection: str,
        filter: JsonObject,
        update: JsonObject,
    ) -> Updated:
        """``db_update``, refused under ``prevent_write``."""
        self._guard(collection, "prevent_write")
        return await self._db.db_update(collection, filter, update)

    async def db_upsert(
        self,
        collection: str,
        filter: JsonObject,
        update: JsonObject,
        insert_only: JsonObject | None = None,
    ) -> Upserted:
        """``db_upsert``, refused under ``prevent_write``."""
        self._guard(collection, "prevent_write")
        return await self._db.db_upsert(collection, filter, update, insert_only)

    async def db_delete(self, collection: str, filter: JsonObject) -> Deleted:
        """``db_delete``, refused under ``prevent_delete``."""
        self._guard(collection, "prevent_delete")
        return await self._db.db_delete(collection, filter)

    async def db_count(self, collection: str, filter: JsonObject | None = None) -> Counted:
        """``db_count`` within the agent's collections."""
        self._guard(collection)
        return await self._db.db_count(collection, filter)

    async def db_list_collections(self) -> Collections:
        """``db_list_collections``, showing only the agent's collections."""
        listing = await self._db.db_list_collections()
        shown = [c for c in listing["collections"] if self.access.visible(c["name"])]
        return {"collections": shown, "total": len(shown)}
