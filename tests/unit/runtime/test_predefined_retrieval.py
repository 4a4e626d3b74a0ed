"""The local ``retrieval_*`` tools: lexical index, namespaces, deletion, access rules."""

from __future__ import annotations

import asyncio
import inspect
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import pytest
from connic import tools as sdk_tools
from connic.core import NamespacePermissions, RetrievalAccessConfig

from pytest_connic.runtime.predefined import (
    RETRIEVAL_ALIASES,
    RETRIEVAL_TOOL_NAMES,
    LocalRetrieval,
    LocalServices,
    PredefinedToolError,
)
from pytest_connic.runtime.predefined.retrieval import chunk, tokenize

run = asyncio.run


@pytest.fixture
def index(tmp_path: Path) -> Iterator[LocalRetrieval]:
    retrieval = LocalRetrieval(tmp_path / "retrieval.sqlite3")
    yield retrieval
    retrieval.close()


DOCUMENTS = {
    "refunds": (
        "policies.billing",
        "Refunds are issued to the original payment method within 7 days of the return.",
    ),
    "shipping": (
        "policies.shipping",
        "Standard shipping takes 3 to 5 business days. Express shipping takes 1 day.",
    ),
    "privacy": (
        "policies.legal",
        "We never sell personal data. Customers may request deletion of their data.",
    ),
    "dog": ("misc", "The office dog is called Biscuit and loves long walks in the park."),
    "warranty": ("products", "Every product carries a two year warranty against manufacturing defects."),
}


@pytest.fixture
def corpus(index: LocalRetrieval) -> LocalRetrieval:
    for entry_id, (namespace, content) in DOCUMENTS.items():
        run(
            index.retrieval_store(
                content, entry_id=entry_id, namespace=namespace, metadata={"kind": entry_id}
            )
        )
    return index


def ids(result: dict[str, Any]) -> list[str]:
    return [hit["entry_id"] for hit in result["results"]]


# --------------------------------------------------------------------------- store and query


def test_store_is_synchronous(index: LocalRetrieval) -> None:
    result = run(index.retrieval_store("The user prefers dark mode.", namespace="preferences"))
    assert result["chunk_count"] == 1
    assert (result["status"], result["queued"], result["success"]) == ("completed", False, True)
    assert uuid.UUID(result["entry_id"])
    assert ids(run(index.retrieval_query("dark mode"))) == [result["entry_id"]]


def test_the_relevant_document_ranks_first(corpus: LocalRetrieval) -> None:
    result = run(corpus.retrieval_query("How long does express shipping take?", min_score=0.0, max_results=5))
    assert ids(result)[0] == "shipping"
    hit = result["results"][0]
    assert hit["namespace"] == "policies.shipping"
    assert hit["metadata"] == {"kind": "shipping"}
    assert hit["content"] == DOCUMENTS["shipping"][1]
    scores = [h["score"] for h in result["results"]]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert ids(run(corpus.retrieval_query("What is the refund policy?"))) == ["refunds"]
    assert ids(run(corpus.retrieval_query("Can customers ask to delete personal data?")))[0] == "privacy"


def test_min_score_and_max_results(corpus: LocalRetrieval) -> None:
    loose = run(corpus.retrieval_query("days of shipping and the return", min_score=0.0, max_results=10))
    assert len(loose["results"]) >= 2
    assert (
        len(
            run(corpus.retrieval_query("days of shipping and the return", min_score=0.0, max_results=1))[
                "results"
            ]
        )
        == 1
    )
    strict = run(corpus.retrieval_query("days of shipping and the return", min_score=0.99, max_results=10))
    assert all(h["score"] >= 0.99 for h in strict["results"])
    assert len(strict["results"]) < len(loose["results"])
    assert run(corpus.retrieval_query("zebra quantum", min_score=0.0)) == {"results": []}


def test_long_content_is_chunked_and_the_matching_chunk_returned(index: LocalRetrieval) -> None:
    filler = " ".join(f"word{i}" for i in range(150))
    content = f"{filler} alpha\n\n{filler} volcano eruption\n\n{filler} omega"
    result = run(index.retrieval_store(content, entry_id="long"))
    assert result["chunk_count"] == 3
    (hit,) = run(index.retrieval_query("volcano", min_score=0.0))["results"]
    assert hit["content"] == f"{filler} volcano eruption"


def test_restoring_an_entry_replaces_it(index: LocalRetrieval) -> None:
    run(index.retrieval_store("Office opens at nine.", entry_id="hours", namespace="faq", metadata={"v": 1}))
    run(index.retrieval_store("Office opens at ten.", entry_id="hours", namespace="faq", metadata={"v": 2}))
    assert run(index.retrieval_query("nine", min_score=0.0)) == {"results": []}
    (hit,) = run(index.retrieval_query("office ten", min_score=0.0))["results"]
    assert (hit["content"], hit["metadata"]) == ("Office opens at ten.", {"v": 2})
    run(index.retrieval_store("Office opens at ten.", entry_id="hours", namespace="other"))
    assert len(run(index.retrieval_query("office ten", min_score=0.0))["results"]) == 2


def test_namespaces_isolate_and_include_subtrees(corpus: LocalRetrieval) -> None:
    assert ids(run(corpus.retrieval_query("shipping", namespace="policies.billing", min_score=0.0))) == []
    assert ids(run(corpus.retrieval_query("shipping", namespace="policies", min_score=0.0))) == ["shipping"]
    assert ids(run(corpus.retrieval_query("shipping", namespace="policies.shipping", min_score=0.0))) == [
        "shipping"
    ]
    run(corpus.retrieval_store("Free shipping on everything.", entry_id="promo", namespace="policiesx"))
    assert ids(run(corpus.retrieval_query("shipping", namespace="policies", min_score=0.0))) == ["shipping"]
    assert sorted(ids(run(corpus.retrieval_query("shipping", min_score=0.0, max_results=9)))) == [
        "promo",
        "shipping",
    ]


def test_the_default_namespace_is_none(index: LocalRetrieval) -> None:
    run(index.retrieval_store("Plain note about apples.", entry_id="n"))
    (hit,) = run(index.retrieval_query("apples"))["results"]
    assert hit["namespace"] is None


def test_metadata_filter_on_query(corpus: LocalRetrieval) -> None:
    run(
        corpus.retrieval_store(
            "Shipping to Mars is not offered.", entry_id="mars", namespace="policies.shipping"
        )
    )
    query = "shipping"
    assert ids(run(corpus.retrieval_query(query, metadata_filter={"kind": "shipping"}, min_score=0.0))) == [
        "shipping"
    ]
    assert ids(
        run(corpus.retrieval_query(query, metadata_filter={"kind": {"$ne": "shipping"}}, min_score=0.0))
    ) == [
        "mars",  # $ne matches entries without the field
    ]
    with pytest.raises(PredefinedToolError, match="unknown operator"):
        run(corpus.retrieval_query(query, metadata_filter={"kind": {"$like": "s%"}}))


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"query": ""}, "query must be a non-empty string"),
        ({"query": "x", "namespace": "a/b"}, "invalid namespace"),
        ({"query": "x", "namespace": "a..b"}, "invalid namespace"),
        ({"query": "x", "namespace": ".".join("abcdefghijk")}, "at most 10 levels"),
        ({"query": "x", "min_score": 1.5}, "min_score"),
        ({"query": "x", "max_results": 0}, "max_results"),
    ],
)
def test_bad_query_arguments(index: LocalRetrieval, arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(PredefinedToolError, match=message):
        run(index.retrieval_query(**arguments))


def test_bad_store_arguments(index: LocalRetrieval) -> None:
    with pytest.raises(PredefinedToolError, match="content must be a non-empty string"):
        run(index.retrieval_store("   "))
    with pytest.raises(PredefinedToolError, match="metadata must be a JSON object"):
        run(index.retrieval_store("x", metadata=cast(Any, ["a"])))
    with pytest.raises(PredefinedToolError, match="invalid namespace"):
        run(index.retrieval_store("x", namespace="docs/2026"))
    assert run(index.retrieval_list_namespaces()) == []


# --------------------------------------------------------------------------- delete


def test_delete_by_entry_id(corpus: LocalRetrieval) -> None:
    assert run(corpus.retrieval_delete(entry_id="shipping", namespace="policies")) == {
        "ok": True,
        "deleted_chunks": 1,
    }
    assert ids(run(corpus.retrieval_query("shipping", min_score=0.0))) == []
    assert run(corpus.retrieval_delete(entry_id="shipping")) == {"ok": True, "deleted_chunks": 0}
    assert run(corpus.retrieval_delete(entry_id="dog", namespace="policies")) == {
        "ok": True,
        "deleted_chunks": 0,
    }
    assert run(corpus.retrieval_delete(entry_id="dog")) == {"ok": True, "deleted_chunks": 1}


def test_delete_a_namespace_subtree(corpus: LocalRetrieval) -> None:
    assert run(corpus.retrieval_delete(namespace="policies")) == {"ok": True, "deleted_chunks": 3}
    remaining = ids(
        run(corpus.retrieval_query("dog warranty refunds shipping data", min_score=0.0, max_results=9))
    )
    assert sorted(remaining) == ["dog", "warranty"]


def test_delete_by_metadata_filter_orphan_cleanup(index: LocalRetrieval) -> None:
    for i, run_id in enumerate(["old", "old", "new", None]):
        metadata = {"page": "p1"} | ({"run_id": run_id} if run_id else {})
        run(
            index.retrieval_store(
                f"Confluence page part {i}", entry_id=f"e{i}", namespace="confluence.space", metadata=metadata
            )
        )
    run(
        index.retrieval_store("Elsewhere page part", entry_id="x", namespace="other", metadata={"page": "p1"})
    )
    result = run(
        index.retrieval_delete(
            namespace="confluence", metadata_filter={"page": "p1", "run_id": {"$ne": "new"}}
        )
    )
    assert result == {"ok": True, "deleted_chunks": 3}
    assert sorted(ids(run(index.retrieval_query("page part", min_score=0.0, max_results=9)))) == ["e2", "x"]


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({}, "needs an entry_id, a namespace, or both"),
        ({"entry_id": "x", "metadata_filter": {"a": 1}}, "metadata_filter requires a namespace"),
        ({"namespace": "a", "metadata_filter": "a=1"}, "must be a JSON object"),
    ],
)
def test_bad_delete_arguments(corpus: LocalRetrieval, arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(PredefinedToolError, match=message):
        run(corpus.retrieval_delete(**arguments))
    assert (
        len(run(corpus.retrieval_query("shipping refunds dog", min_score=0.0, max_results=9))["results"]) == 3
    )


# --------------------------------------------------------------------------- list namespaces


def test_list_namespaces(corpus: LocalRetrieval) -> None:
    run(corpus.retrieval_store("Leave rules.", namespace="policies.hr.leave"))
    run(corpus.retrieval_store("Handbook.", namespace="policies"))
    run(corpus.retrieval_store("No namespace."))
    top = run(corpus.retrieval_list_namespaces())
    assert top == [
        {"name": "misc", "entry_count": 1, "total_entry_count": 1, "has_children": False},
        {"name": "policies", "entry_count": 1, "total_entry_count": 5, "has_children": True},
        {"name": "products", "entry_count": 1, "total_entry_count": 1, "has_children": False},
    ]
    drill: Any = run(corpus.retrieval_list_namespaces(parent="policies"))
    assert drill["parent"] == {
        "name": "policies",
        "entry_count": 1,
        "total_entry_count": 5,
        "has_children": True,
    }
    assert [n["name"] for n in drill["namespaces"]] == [
        "policies.billing",
        "policies.hr",
        "policies.legal",
        "policies.shipping",
    ]
    assert drill["namespaces"][1] == {
        "name": "policies.hr",
        "entry_count": 0,
        "total_entry_count": 1,
        "has_children": True,
    }
    everything: Any = run(corpus.retrieval_list_namespaces(parent="policies", depth=0))
    assert "policies.hr.leave" in [n["name"] for n in everything["namespaces"]]
    assert len(run(corpus.retrieval_list_namespaces(depth=2))) == 3 + 4
    with pytest.raises(PredefinedToolError, match="depth must be"):
        run(corpus.retrieval_list_namespaces(depth=11))


# --------------------------------------------------------------------------- access rules


def agent(index: LocalRetrieval, **config: Any) -> Any:
    return index.bind(RetrievalAccessConfig(**config), "helper")


def test_unlisted_namespaces_are_denied_and_hidden(corpus: LocalRetrieval) -> None:
    helper = agent(corpus, namespaces={"policies": NamespacePermissions()})
    everything = run(helper.retrieval_query("dog shipping warranty refunds", min_score=0.0, max_results=9))
    assert sorted(ids(everything)) == ["refunds", "shipping"]
    message = (
        "Access denied: agent 'helper' may not access namespace 'misc' "
        r"\(not listed in retrieval.namespaces: policies\)"
    )
    with pytest.raises(PredefinedToolError, match=message):
        run(helper.retrieval_query("dog", namespace="misc"))
    with pytest.raises(PredefinedToolError, match="may not access the default namespace"):
        run(helper.retrieval_store("x"))
    assert [n["name"] for n in run(helper.retrieval_list_namespaces())] == ["policies"]
    assert run(helper.retrieval_delete(entry_id="dog")) == {"ok": True, "deleted_chunks": 0}
    assert ids(run(corpus.retrieval_query("dog"))) == ["dog"]


def test_a_listed_sub_namespace_makes_its_parent_reachable(corpus: LocalRetrieval) -> None:
    helper = agent(corpus, namespaces={"policies.shipping": NamespacePermissions()})
    assert ids(run(helper.retrieval_query("shipping refunds", namespace="policies", min_score=0.0))) == [
        "shipping"
    ]
    with pytest.raises(PredefinedToolError, match="not listed"):
        run(helper.retrieval_delete(namespace="policies"))
    assert ids(run(corpus.retrieval_query("refunds"))) == ["refunds"]


def test_prevent_write_and_overrides(index: LocalRetrieval) -> None:
    helper = agent(
        index,
        prevent_write=True,
        namespaces={"faq": NamespacePermissions(prevent_write=False), "products": {}},
    )
    assert run(helper.store_knowledge("Opening hours.", namespace="faq.hours"))["success"] is True
    with pytest.raises(PredefinedToolError, match=r"may not write to namespace 'products' \(prevent_write\)"):
        run(helper.retrieval_store("x", namespace="products"))
    assert run(index.retrieval_list_namespaces()) == [
        {"name": "faq", "entry_count": 0, "total_entry_count": 1, "has_children": True}
    ]


def test_prevent_delete_and_protected_sub_namespaces(corpus: LocalRetrieval) -> None:
    helper = agent(
        corpus,
        namespaces={
            "policies": NamespacePermissions(),
            "policies.legal": NamespacePermissions(prevent_delete=True),
        },
    )
    with pytest.raises(
        PredefinedToolError,
        match="part of it is protected .retrieval.namespaces.policies.legal.prevent_delete",
    ):
        run(helper.retrieval_delete(namespace="policies"))
    with pytest.raises(
        PredefinedToolError, match=r"delete from namespace 'policies.legal' .retrieval.namespaces"
    ):
        run(helper.delete_knowledge(entry_id="privacy"))
    assert run(helper.retrieval_delete(namespace="policies.billing")) == {"ok": True, "deleted_chunks": 1}
    blocked = agent(corpus, prevent_delete=True)
    with pytest.raises(PredefinedToolError, match=r"\(prevent_delete\)"):
        run(blocked.retrieval_delete(entry_id="dog"))
    assert sorted(ids(run(corpus.retrieval_query("dog personal data", min_score=0.0)))) == ["dog", "privacy"]


# --------------------------------------------------------------------------- surface, persistence, threads


def test_aliases_and_signatures(tmp_path: Path) -> None:
    def parameters(function: Any) -> list[tuple[str, Any, Any]]:
        return [(p.name, p.default, p.kind) for p in inspect.signature(function).parameters.values()]

    with LocalServices(tmp_path) as services:
        tools = services.tools_for("helper", None)
        for alias, target in RETRIEVAL_ALIASES.items():
            assert tools[alias] == tools[target]
            assert parameters(tools[alias]) == parameters(getattr(sdk_tools, alias))
        for name in RETRIEVAL_TOOL_NAMES:
            assert parameters(getattr(services.retrieval, name)) == parameters(getattr(sdk_tools, name))
        run(tools["store_knowledge"]("Aliases share one index.", entry_id="a"))
        assert ids(run(tools["retrieval_query"]("aliases index"))) == ["a"]
        assert run(tools["kb_list_namespaces"]()) == []


def test_index_survives_a_new_instance(tmp_path: Path) -> None:
    first = LocalRetrieval(tmp_path / "r.sqlite3")
    run(first.retrieval_store("Persistent memory of lighthouses.", namespace="notes"))
    first.close()
    second = LocalRetrieval(tmp_path / "r.sqlite3")
    assert len(run(second.retrieval_query("lighthouses"))["results"]) == 1
    second.close()


def test_concurrent_stores_from_threads_all_land(index: LocalRetrieval) -> None:
    start = threading.Barrier(20)

    def store(i: int) -> None:
        start.wait()
        run(index.retrieval_store(f"Ticket number{i} about printers.", entry_id=f"t{i}", namespace="tickets"))

    with ThreadPoolExecutor(max_workers=20) as pool:
        list(pool.map(store, range(20)))  # re-raises any worker's exception
    listing: Any = run(index.retrieval_list_namespaces())
    (tickets,) = listing
    assert tickets["entry_count"] == 20
    assert len(run(index.retrieval_query("printers", max_results=50, min_score=0.0))["results"]) == 20


def test_tokenize_and_chunk() -> None:
    assert tokenize("What is the refund policy for Policies?") == ["refund", "policy", "policy"]
    assert tokenize("Shipping takes days; status: process") == [
        "shipping",
        "take",
        "day",
        "status",
        "process",
    ]
    assert chunk("one\n\ntwo  three\n\n\n") == ["one\n\ntwo  three"]
    assert [len(c.split()) for c in chunk(" ".join(["w"] * 450))] == [200, 200, 50]
