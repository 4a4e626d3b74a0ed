"""``retrieval_*``: Connic's managed retrieval, as a local *lexical* index on SQLite.

Connic embeds chunks and ranks them by semantic similarity. Offline, without an
embedding model, this index ranks by words instead, so a query finds a passage only
if they share words (after lowercasing, dropping common English stop words and
folding simple plurals). It is deterministic, which suits tests.

Scoring, per chunk: the IDF-weighted share of the query's terms that occur in the
chunk, each term's weight damped by BM25's term-frequency saturation and chunk-length
normalisation (``k1=1.2``, ``b=0.75``) and capped at 1. Query terms found in no chunk
of the searched scope are left out. The score therefore lies in ``[0, 1]`` like
Connic's similarity (1.0: every known query term present in a chunk of average
length), so ``min_score`` keeps a comparable meaning. Ties break on the raw BM25 sum,
then on entry id and chunk position.

Content is split into chunks of at most 200 words, packing whole paragraphs
(blank-line separated) and cutting longer paragraphs at word boundaries. Storing is
synchronous: ``retrieval_store`` returns ``status: "completed"``, ``queued: false``
and the content is searchable at once (on Connic it is indexed asynchronously).
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict

from pytest_connic.jsonsafe import JsonObject
from pytest_connic.runtime.predefined.access import ScopeAccess, retrieval_access
from pytest_connic.runtime.predefined.db import SqliteStore, now_iso
from pytest_connic.runtime.predefined.errors import PredefinedToolError
from pytest_connic.runtime.predefined.query import compile_filter

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    namespace TEXT NOT NULL, entry_id TEXT NOT NULL, metadata TEXT NOT NULL,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL, PRIMARY KEY (namespace, entry_id)
);
CREATE TABLE IF NOT EXISTS chunks (
    namespace TEXT NOT NULL, entry_id TEXT NOT NULL, position INTEGER NOT NULL,
    content TEXT NOT NULL, tokens TEXT NOT NULL, PRIMARY KEY (namespace, entry_id, position)
);
"""
CHUNK_WORDS = 200
MAX_DEPTH = 10
_K1, _B = 1.2, 0.75
_WORD = re.compile(r"\w+")
_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
STOP_WORDS = frozenset(
    (
        "a", "about", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "do",
        "does", "did", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it",
        "its", "me", "my", "no", "not", "of", "on", "or", "our", "so", "than", "that", "the", "their",
        "them", "then", "there", "these", "they", "this", "to", "was", "we", "were", "what", "when",
        "where", "which", "who", "whom", "why", "will", "with", "would", "you", "your",
    )
)  # fmt: skip




class Hit(TypedDict):
    """One result of ``retrieval_query``."""

    content: str
    entry_id: str
    namespace: str | None
    score: float
    metadata: JsonObject


class QueryResult(TypedDict):
    """``retrieval_query``'s result."""

    results: list[Hit]


class Stored(TypedDict):
    """``retrieval_store``'s result."""

    entry_id: str
    chunk_count: int
    status: Literal["completed"]
    queued: bool
    success: bool


class DeletedChunks(TypedDict):
    """``retrieval_delete``'s result."""

    ok: bool
    deleted_chunks: int


class NamespaceInfo(TypedDict):
    """One namespace in ``retrieval_list_namespaces``."""

    name: str
    entry_count: int
    total_entry_count: int
    has_children: bool


class NamespaceChildren(TypedDict):
    """``retrieval_list_namespaces``'s result for a ``parent``."""

    parent: NamespaceInfo
    namespaces: list[NamespaceInfo]


#: ``retrieval_list_namespaces``'s result: every namespace, or the children of a ``parent``
Namespaces = NamespaceChildren | list[NamespaceInfo]


# --------------------------------------------------------------------------- text


def _fold(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Lowercased word tokens without stop words, simple plurals folded."""
    return [_fold(word) for word in _WORD.findall(text.lower()) if word not in STOP_WORDS]


def chunk(text: str, max_words: int = CHUNK_WORDS) -> list[str]:
    """Split ``text`` into chunks of whole paragraphs, at most ``max_words`` words each."""
    chunks: list[str] = []
    current: list[str] = []
    count = 0
    for paragraph in (p.strip() for p in re.split(r"\n\s*\n", text)):
        words = paragraph.split()
        if current and count + len(words) > max_words:
            chunks.append("\n\n".join(current))
            current, count = [], 0
        if len(words) > max_words:
            chunks.extend(" ".join(words[i : i + max_words]) for i in range(0, len(words), max_words))
        elif words:
            current.append(paragraph)
            count += len(words)
    if current:
        chunks.append("\n\n".join(current))
    return chunks


@dataclass
class _Chunk:
    namespace: str
    entry_id: str
    position: int
    content: str
    tokens: list[str]
    metadata: JsonObject


def rank(query: str, chunks: list[_Chunk]) -> list[tuple[float, float, _Chunk]]:
    """``(score, bm25, chunk)`` for every chunk sharing a term with ``query``, best first."""
    terms = set(tokenize(query))
    if not terms or not chunks:
        return []
    frequencies = [Counter(c.tokens) for c in chunks]
    average = sum(len(c.tokens) for c in chunks) / len(chunks) or 1.0
    total = len(chunks)
    # Terms that occur in no chunk cannot discriminate between chunks; an embedding
    # model would not punish them either, so they do not count against the score.
    document_frequency = {t: df for t in terms if (df := sum(t in f for f in frequencies))}
    idf = {t: math.log(1 + (total - df + 0.5) / (df + 0.5)) for t, df in document_frequency.items()}
    weight_sum = sum(idf.values())
    if not weight_sum:
        return []
    ranked = []
    for item, tf in zip(chunks, frequencies):
        norm = _K1 * (1 - _B + _B * len(item.tokens) / average)
        saturations = {t: tf[t] * (_K1 + 1) / (tf[t] + norm) for t in idf if tf[t]}
        if saturations:
            bm25 = sum(idf[t] * s for t, s in saturations.items())
            score = sum(idf[t] * min(1.0, s) for t, s in saturations.items()) / weight_sum
            ranked.append((score, bm25, item))
    ranked.sort(key=lambda r: (-r[0], -r[1], r[2].entry_id, r[2].position))
    return ranked


# --------------------------------------------------------------------------- namespaces


def check_namespace(namespace: object) -> str:
    """Validate a dot-separated namespace (``""`` stands for the default one)."""
    if namespace is None:
        return ""
    if not isinstance(namespace, str) or not namespace:
        raise PredefinedToolError(f"namespace must be a non-empty string, got {namespace!r}")
    segments = namespace.split(".")
    if len(segments) > MAX_DEPTH or not all(_SEGMENT.fullmatch(s) for s in segments):
        raise PredefinedToolError(
            f"invalid namespace {namespace!r}: use dot-separated names of letters, digits, '_' or '-' "
            f"(e.g. 'policies.hr'), at most {MAX_DEPTH} levels; slashes are not allowed"
        )
    return namespace


def _within(namespace: str, scope: str) -> bool:
    return scope == "" or namespace == scope or namespace.startswith(scope + ".")


def _shown(namespace: str) -> str | None:
    return namespace or None


class RetrievalIndex(SqliteStore):
    """The index itself; every operation takes the caller's ``ScopeAccess``."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, _SCHEMA)

    def _chunks(self, scope: str, access: ScopeAccess) -> list[_Chunk]:
        with self._lock:
            rows = self._connection.execute(
                "SELECT c.namespace, c.entry_id, c.position, c.content, c.tokens, e.metadata "
                "FROM chunks c JOIN entries e USING (namespace, entry_id) "
                "ORDER BY c.namespace, c.entry_id, c.position"
            ).fetchall()
        chunks = [_Chunk(n, e, p, c, json.loads(t), json.loads(m)) for n, e, p, c, t, m in rows]
        return [c for c in chunks if _within(c.namespace, scope) and access.visible(_shown(c.namespace))]

    def _entries(self, access: ScopeAccess) -> list[tuple[str, str, JsonObject, int]]:
        with self._lock:
            rows = self._connection.execute(
                "SELECT e.namespace, e.entry_id, e.metadata, COUNT(c.position) FROM entries e "
                "LEFT JOIN chunks c USING (namespace, entry_id) GROUP BY e.namespace, e.entry_id"
            ).fetchall()
        return [(n, e, json.loads(m), k) for n, e, m, k in rows if access.visible(_shown(n))]

    def query(
        self,
        access: ScopeAccess,
        query: object,
        namespace: object,
        min_score: object,
        max_results: object,
        metadata_filter: object,
    ) -> QueryResult:
        """``retrieval_query`` for a caller with ``access``."""
        if not isinstance(query, str) or not query.strip():
            raise PredefinedToolError("query must be a non-empty string")
        scope = check_namespace(namespace)
        if scope and not access.reachable(scope):
            access.require_visible(scope)
        if isinstance(min_score, bool) or not isinstance(min_score, (int, float)) or not 0 <= min_score <= 1:
            raise PredefinedToolError(f"min_score must be a number from 0.0 to 1.0, got {min_score!r}")
        if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
            raise PredefinedToolError(f"max_results must be a positive integer, got {max_results!r}")
        predicate = compile_filter(metadata_filter, what="metadata_filter")
        candidates = [c for c in self._chunks(scope, access) if predicate(c.metadata)]
        results: list[Hit] = [
            {
                "content": item.content,
                "entry_id": item.entry_id,
                "namespace": _shown(item.namespace),
                "score": round(score, 4),
                "metadata": item.metadata,
            }
            for score, _bm25, item in rank(query, candidates)
            if score >= min_score
        ]
        return {"results": results[:max_results]}

    def store(
        self, access: ScopeAccess, content: object, entry_id: object, namespace: object, metadata: object
    ) -> Stored:
        """``retrieval_store``: add or atomically replace one entry."""
        scope = check_namespace(namespace)
        access.require(_shown(scope), "prevent_write")
        if not isinstance(content, str) or not content.strip():
            raise PredefinedToolError("content must be a non-empty string")
        if entry_id is not None and (not isinstance(entry_id, str) or not entry_id):
            raise PredefinedToolError(f"entry_id must be a non-empty string, got {entry_id!r}")
        key = entry_id or str(uuid.uuid4())
        meta = _metadata(metadata)
        pieces = chunk(content)
        stamp = now_iso()
        with self._transaction() as connection:
            connection.execute("DELETE FROM chunks WHERE namespace = ? AND entry_id = ?", (scope, key))
            connection.execute(
                "INSERT INTO entries VALUES (?, ?, ?, ?, ?) ON CONFLICT (namespace, entry_id) "
                "DO UPDATE SET metadata = excluded.metadata, updated_at = excluded.updated_at",
                (scope, key, meta, stamp, stamp),
            )
            connection.executemany(
                "INSERT INTO chunks VALUES (?, ?, ?, ?, ?)",
                [(scope, key, i, piece, json.dumps(tokenize(piece))) for i, piece in enumerate(pieces)],
            )
        return {
            "entry_id": key,
            "chunk_count": len(pieces),
            "status": "completed",
            "queued": False,
            "success": True,
        }

    def delete(
        self, access: ScopeAccess, entry_id: object, namespace: object, metadata_filter: object
    ) -> DeletedChunks:
        """``retrieval_delete``: one entry by id, or a namespace subtree (optionally filtered)."""
        if entry_id is None and namespace is None:
            raise PredefinedToolError("retrieval_delete needs an entry_id, a namespace, or both")
        if metadata_filter is not None and namespace is None:
            raise PredefinedToolError("metadata_filter requires a namespace")
        scope = check_namespace(namespace)
        if namespace is not None:
            access.require_subtree(scope, "prevent_delete")
        predicate = compile_filter(metadata_filter, what="metadata_filter")
        with self._transaction() as connection:
            targets = [
                (n, e, k)
                for n, e, meta, k in self._entries(access)
                if _within(n, scope) and (entry_id is None or e == entry_id) and predicate(meta)
            ]
            for target_namespace in sorted({n for n, _e, _k in targets}):
                access.require(_shown(target_namespace), "prevent_delete")
            for table in ("chunks", "entries"):
                connection.executemany(
                    f"DELETE FROM {table} WHERE namespace = ? AND entry_id = ?",
                    [(n, e) for n, e, _k in targets],
                )
        return {"ok": True, "deleted_chunks": sum(k for _n, _e, k in targets)}

    def list_namespaces(self, access: ScopeAccess, parent: object, depth: object) -> Namespaces:
        """``retrieval_list_namespaces``: a list of namespaces, or ``{parent, namespaces}``."""
        if isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth <= MAX_DEPTH:
            raise PredefinedToolError(f"depth must be an integer from 0 to {MAX_DEPTH}, got {depth!r}")
        base = check_namespace(parent)
        if base and not access.reachable(base):
            access.require_visible(base)
        direct = Counter(n for n, _e, _m, _k in self._entries(access) if n)
        names = {".".join(n.split(".")[:i]) for n in direct for i in range(1, n.count(".") + 2)}
        level = base.count(".") + 1 if base else 0

        def info(name: str) -> NamespaceInfo:
            below = [n for n in names if n.startswith(name + ".")]
            total = direct[name] + sum(direct[n] for n in below)
            return {
                "name": name,
                "entry_count": direct[name],
                "total_entry_count": total,
                "has_children": bool(below),
            }

        children = [
            info(n)
            for n in sorted(names)
            if _within(n, base) and n != base and (depth == 0 or n.count(".") + 1 - level <= depth)
        ]
        return {"parent": info(base), "namespaces": children} if base else children


def _metadata(metadata: object) -> str:
    if metadata is None:
        return "{}"
    if not isinstance(metadata, dict):
        raise PredefinedToolError(f"metadata must be a JSON object, got {metadata!r}")
    try:
        return json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise PredefinedToolError(f"metadata must be plain JSON: {error}") from None


class _RetrievalTools:
    """The retrieval tools with the SDK's signatures, plus the ``*_knowledge``/``kb_*`` aliases."""

    _index: RetrievalIndex
    access: ScopeAccess

    async def retrieval_query(
        self,
        query: str,
        namespace: str | None = None,
        min_score: float = 0.3,
        max_results: int = 3,
        metadata_filter: JsonObject | None = None,
    ) -> QueryResult:
        """Search the index: ``{"results": [{content, entry_id, namespace, score, metadata}]}``."""
        return self._index.query(self.access, query, namespace, min_score, max_results, metadata_filter)

    async def retrieval_store(
        self,
        content: str,
        entry_id: str | None = None,
        namespace: str | None = None,
        metadata: JsonObject | None = None,
    ) -> Stored:
        """Store (or replace) an entry: ``{entry_id, chunk_count, status, queued, success}``."""
        return self._index.store(self.access, content, entry_id, namespace, metadata)

    async def retrieval_delete(
        self,
        entry_id: str | None = None,
        namespace: str | None = None,
        metadata_filter: JsonObject | None = None,
    ) -> DeletedChunks:
        """Delete one entry or a namespace subtree: ``{"ok", "deleted_chunks"}``."""
        return self._index.delete(self.access, entry_id, namespace, metadata_filter)

    async def retrieval_list_namespaces(
        self,
        parent: str | None = None,
        depth: int = 1,
    ) -> Namespaces:
        """List namespaces (a list), or the children of ``parent`` (``{parent, namespaces}``)."""
        return self._index.list_namespaces(self.access, parent, depth)

    query_knowledge = retrieval_query
    store_knowledge = retrieval_store
    delete_knowledge = retrieval_delete
    kb_list_namespaces = retrieval_list_namespaces


class LocalRetrieval(_RetrievalTools):
    """Connic's retrieval on one SQLite file (``<session dir>/retrieval.sqlite3``), unrestricted."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._index = RetrievalIndex(path)
        self.access = retrieval_access(None, "api")

    def close(self) -> None:
        """Close the SQLite connection."""
        self._index.close()

    def bind(self, access: object, agent_name: str) -> BoundRetrieval:
        """The retrieval tools for one agent, enforcing its ``RetrievalAccessConfig`` (or ``None``)."""
        return BoundRetrieval(self._index, retrieval_access(access, agent_name))


class BoundRetrieval(_RetrievalTools):
    """The retrieval tools as one agent sees them."""

    def __init__(self, index: RetrievalIndex, access: ScopeAccess) -> None:
        self._index = index
        self.access = access
