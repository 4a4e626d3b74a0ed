"""The local ``db_*`` tools (SQLite), their access rules, and the ``LocalServices`` surface."""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from connic import tools as sdk_tools
from connic.core import CollectionPermissions, DatabaseAccessConfig
from connic.loader import PREDEFINED_TOOL_ALIASES, PREDEFINED_TOOL_NAMES, ProjectLoader

from pytest_connic.runtime.predefined import (
    DATA_TOOL_NAMES,
    DB_TOOL_NAMES,
    LocalDatabase,
    LocalServices,
    PredefinedToolError,
    tool_schema,
)
from pytest_connic.runtime.predefined.db import insert_seed, merge

run = asyncio.run


@pytest.fixture
def db(tmp_path: Path) -> Iterator[LocalDatabase]:
    database = LocalDatabase(tmp_path / "db.sqlite3")
    yield database
    database.close()


PEOPLE: list[dict[str, Any]] = [
    {
        "name": "a",
        "qty": 5,
        "status": "active",
        "tags": ["x", "y"],
        "price": 9.5,
        "note": None,
        "address": {"city": "Berlin", "zip": "10115"},
    },
    {"name": "b", "qty": 10, "status": "pending", "tags": ["y"], "address": {"city": "Paris"}, "sku": "123"},
    {
        "name": "c",
        "qty": 1,
        "status": "active",
        "tags": [],
        "flag": True,
        "items": [{"sku": "k1", "n": 2}, {"sku": "k2", "n": 5}],
    },
    {"name": "d", "qty": "7", "status": "cancelled", "code": 123},
]


@pytest.fixture
def people(db: LocalDatabase) -> LocalDatabase:
    run(db.db_insert("people", PEOPLE))
    return db


def names(db: LocalDatabase, filter: dict[str, Any] | None) -> list[str]:
    result = run(db.db_find("people", filter))
    return [document["name"] for document in result["documents"]]


# --------------------------------------------------------------------------- insert


def test_insert_adds_system_fields_and_creates_the_collection(db: LocalDatabase) -> None:
    result = run(db.db_insert("orders", {"order_id": "ORD-1", "amount": 99.5}))
    assert result["inserted_count"] == 1
    (document,) = result["inserted"]
    assert document["order_id"] == "ORD-1" and document["amount"] == 99.5
    assert uuid.UUID(document["_id"])
    assert document["_created_at"] == document["_updated_at"]
    assert document["_created_at"].endswith("+00:00")
    assert run(db.db_find("orders"))["documents"] == [document]
    json.dumps(result)


def test_insert_a_list(db: LocalDatabase) -> None:
    result = run(db.db_insert("orders", [{"n": 1}, {"n": 2}, {"n": 3}]))
    assert result["inserted_count"] == 3
    assert len({d["_id"] for d in result["inserted"]}) == 3
    assert run(db.db_count("orders")) == {"count": 3}


@pytest.mark.parametrize(
    "documents, message",
    [
        ([], "non-empty list"),
        ("text", "JSON object"),
        ([{"a": 1}, 2], "JSON object"),
        ({"_id": "mine"}, "read-only"),
        ({"_created_at": "x"}, "read-only"),
        ({"$set": {"a": 1}}, "not allowed"),
        ({"when": object()}, "plain JSON"),
        ({"x": float("nan")}, "plain JSON"),
    ],
)
def test_insert_rejects_bad_documents(db: LocalDatabase, documents: Any, message: str) -> None:
    with pytest.raises(PredefinedToolError, match=message):
        run(db.db_insert("orders", documents))
    assert run(db.db_list_collections())["total"] == 0


@pytest.mark.parametrize("name", ["Orders", "1orders", "order-items", "_orders", "a" * 51, "", "orders.x"])
def test_collection_names_follow_connics_rule(db: LocalDatabase, name: str) -> None:
    with pytest.raises(PredefinedToolError, match="invalid collection name"):
        run(db.db_insert(name, {"a": 1}))


@pytest.mark.parametrize("name", ["a", "orders", "order_items_2", "a" * 50])
def test_valid_collection_names(db: LocalDatabase, name: str) -> None:
    assert run(db.db_insert(name, {"a": 1}))["inserted_count"] == 1


# --------------------------------------------------------------------------- filters


@pytest.mark.parametrize(
    "filter, expected",
    [
        (None, ["a", "b", "c", "d"]),
        ({}, ["a", "b", "c", "d"]),
        ({"status": "active"}, ["a", "c"]),
        ({"status": {"$eq": "active"}}, ["a", "c"]),
        ({"status": {"$ne": "active"}}, ["b", "d"]),
        ({"sku": {"$ne": "123"}}, ["a", "c", "d"]),  # $ne matches a missing field
        ({"qty": {"$gt": 5}}, ["b"]),  # "7" is a string: no cross-type comparison
        ({"qty": {"$gte": 5}}, ["a", "b"]),
        ({"qty": {"$lt": 5}}, ["c"]),
        ({"qty": {"$lte": 5}}, ["a", "c"]),
        ({"qty": {"$gt": 1, "$lt": 10}}, ["a"]),  # operators on one field AND together
        ({"name": {"$gt": "b"}}, ["c", "d"]),
        ({"price": {"$lt": 10}}, ["a"]),
        ({"qty": 5.0}, ["a"]),
        ({"status": {"$in": ["pending", "cancelled"]}}, ["b", "d"]),
        ({"status": {"$nin": ["active"]}}, ["b", "d"]),
        ({"sku": {"$in": [123]}}, ["b"]),  # $in compares as text
        ({"code": {"$in": ["123"]}}, ["d"]),
        ({"sku": {"$nin": ["123"]}}, ["a", "c", "d"]),  # $nin matches a missing field
        ({"flag": {"$exists": True}}, ["c"]),
        ({"flag": {"$exists": False}}, ["a", "b", "d"]),
        ({"note": {"$exists": True}}, ["a"]),  # a null value exists
        ({"address.zip": None}, ["b", "c", "d"]),  # null matches missing
        ({"flag": True}, ["c"]),
        ({"flag": 1}, []),  # true is not 1
        ({"tags": {"$contains": "y"}}, ["a", "b"]),
        ({"tags": {"$contains": ["x", "y"]}}, ["a"]),
        ({"tags": ["y"]}, ["b"]),  # equality with an array is exact
        ({"tags": "y"}, []),  # ... and is not membership: that is $contains
        ({"status": {"$regex": "^act"}}, ["a", "c"]),
        ({"status": {"$regex": "^ACT"}}, ["a", "c"]),  # always case-insensitive, as on Connic
        ({"status": {"$regex": "(?i)^PEND"}}, ["b"]),
        ({"status": {"$regex": "^PEND", "$options": "i"}}, ["b"]),
        ({"qty": {"$regex": "7"}}, ["d"]),  # only strings match a regex
        ({"address.city": "Berlin"}, ["a"]),
        ({"address.city": {"$in": ["Berlin", "Paris"]}}, ["a", "b"]),
        ({"address": {"city": "Paris"}}, ["b"]),
        ({"items.1.sku": "k2"}, ["c"]),
        ({"items": {"$elemMatch": {"sku": "k2", "n": {"$gte": 5}}}}, ["c"]),
        ({"items": {"$elemMatch": {"sku": "k1", "n": {"$gte": 5}}}}, []),
        ({"tags": {"$elemMatch": {"$eq": "x"}}}, ["a"]),
        ({"status": "active", "qty": {"$gt": 2}}, ["a"]),
        ({"$or": [{"status": "pending"}, {"qty": {"$lt": 2}}]}, ["b", "c"]),
        ({"$and": [{"status": "active"}, {"qty": {"$gt": 2}}]}, ["a"]),
        ({"$nor": [{"status": "active"}, {"name": "d"}]}, ["b"]),
        ({"$not": {"status": "active"}}, ["b", "d"]),
        ({"qty": {"$not": {"$gt": 5}}}, ["a", "c", "d"]),
        (
            {
                "$and": [
                    {"$or": [{"address.city": "Berlin"}, {"tags": {"$contains": "y"}}]},
                    {"$not": {"qty": {"$gte": 10}}},
                ]
            },
            ["a"],
        ),
        ({"$or": [{"$and": [{"status": "active"}, {"flag": True}]}, {"address.city": "Paris"}]}, ["b", "c"]),
    ],
)
def test_filter_operators(people: LocalDatabase, filter: dict[str, Any] | None, expected: list[str]) -> None:
    assert names(people, filter) == expected


def test_regex_is_case_insensitive_in_every_tool_and_filter(db: LocalDatabase) -> None:
    """Connic: "``$regex`` matching is always case-insensitive" (predefined-tools.md); one engine
    serves the db tools, ``file_list`` and retrieval's ``metadata_filter``."""
    from pytest_connic.runtime.predefined.query import compile_filter

    run(db.db_insert("people", [{"name": n} for n in ("Smith", "SMITH", "Blacksmithing", "Jones", "Smyth")]))
    found = run(db.db_find("people", {"name": {"$regex": "smith"}}))
    assert [d["name"] for d in found["documents"]] == ["Smith", "SMITH", "Blacksmithing"]
    assert names(db, {"name": {"$regex": "^smith$"}}) == ["Smith", "SMITH"]
    assert names(db, {"name": {"$regex": "^smith$", "$options": "i"}}) == ["Smith", "SMITH"]  # i: no change
    assert names(db, {"name": {"$regex": "^S.I", "$options": "s"}}) == ["Smith", "SMITH"]  # other flags add
    assert names(db, {"name": {"$regex": "(?-i:^Smith$)"}}) == ["Smith"]  # only an inline flag turns it off
    assert run(db.db_count("people", {"name": {"$regex": "SMITH"}})) == {"count": 3}
    assert run(db.db_update("people", {"name": {"$regex": "^smith$"}}, {"k": 1}))["updated_count"] == 2
    assert run(db.db_delete("people", {"name": {"$regex": "JONES"}}))["deleted_count"] == 1
    assert compile_filter({"title": {"$regex": "invoice"}}, what="metadata_filter")({"title": "INVOICE 7"})


def test_a_regex_that_backtracks_fails_the_call_instead_of_hanging(db: LocalDatabase) -> None:
    """A ``$regex`` (a model's or a tool's) runs in pytest's process: one that backtracks for ever
    is stopped by its bound and fails the call with a located reason (issue 39)."""
    run(db.db_insert("words", [{"w": "a" * 60 + "!"}]))
    with pytest.raises(PredefinedToolError, match=r"\$regex: the regular expression '\(a\|aa\)\+\$' ran past its bound"):
        run(db.db_find("words", {"w": {"$regex": "(a|aa)+$"}}))


@pytest.mark.parametrize(
    "filter, message",
    [
        ({"$foo": 1}, "unknown operator '\\$foo'"),
        ({"a": {"$foo": 1}}, "unknown operator '\\$foo'"),
        ({"a": {"$in": "x"}}, "\\$in takes a list"),
        ({"a": {"$exists": "yes"}}, "\\$exists takes true or false"),
        ({"a": {"$regex": "("}}, "invalid \\$regex"),
        ({"a": {"$gt": [1]}}, "\\$gt takes a number or a string"),
        ({"$or": []}, "non-empty list"),
        ({"$and": {"a": 1}}, "non-empty list"),
        ({"a": {"$gt": 5, "b": 1}}, "do not mix operators"),
        ({"a": {"$options": "i"}}, "only valid together with \\$regex"),
        ({"a": {"$regex": "x", "$options": 5}}, "\\$options takes a string of flags"),
        ({"a": {"$regex": "x", "$options": "q"}}, "unknown \\$options flag 'q'"),
        ({"loc": {"$near": [13.4, 52.5]}}, "\\$near .* not support"),
        ({"a..b": 1}, "invalid field path"),
        (["status"], "must be a JSON object"),
    ],
)
def test_bad_filters_are_refused_even_on_an_empty_collection(
    db: LocalDatabase, filter: Any, message: str
) -> None:
    with pytest.raises(PredefinedToolError, match=message):
        run(db.db_find("empty", filter))


# --------------------------------------------------------------------------- sort, page, fields, distinct


def test_sort_descending_and_ascending(people: LocalDatabase) -> None:
    by_name_desc = run(people.db_find("people", sort={"name": -1}))["documents"]
    assert [d["name"] for d in by_name_desc] == ["d", "c", "b", "a"]
    # missing/null first, then numbers, then strings (MongoDB's cross-type order)
    assert [d["name"] for d in run(people.db_find("people", sort={"flag": 1, "name": 1}))["documents"]] == [
        "a",
        "b",
        "d",
        "c",
    ]
    assert [d["name"] for d in run(people.db_find("people", sort={"qty": 1}))["documents"]] == [
        "c",
        "a",
        "b",
        "d",
    ]


def test_multi_key_sort(db: LocalDatabase) -> None:
    run(db.db_insert("t", [{"g": 1, "n": 1}, {"g": 2, "n": 1}, {"g": 1, "n": 2}, {"g": 2, "n": 2}]))
    documents = run(db.db_find("t", sort={"g": -1, "n": 1}))["documents"]
    assert [(d["g"], d["n"]) for d in documents] == [(2, 1), (2, 2), (1, 1), (1, 2)]


def test_skip_and_limit_paginate(db: LocalDatabase) -> None:
    run(db.db_insert("t", [{"n": i} for i in range(10)]))
    page = run(db.db_find("t", sort={"n": -1}, skip=3, limit=4))
    assert [d["n"] for d in page["documents"]] == [6, 5, 4, 3]
    assert page["count"] == 4
    assert run(db.db_find("t", skip=8))["count"] == 2


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"limit": 1001}, "limit must be an integer from 1 to 1000"),
        ({"limit": 0}, "limit must be"),
        ({"skip": -1}, "skip must be"),
        ({"sort": {"n": 2}}, "sort direction"),
        ({"sort": ["n"]}, "sort must be an object"),
        ({"fields": "n"}, "fields must be a list"),
        ({"distinct": ""}, "distinct must be a field path"),
    ],
)
def test_bad_find_arguments(db: LocalDatabase, arguments: dict[str, Any], message: str) -> None:
    run(db.db_insert("t", {"n": 1}))
    with pytest.raises(PredefinedToolError, match=message):
        run(db.db_find("t", **arguments))


def test_limit_of_1000_is_allowed(db: LocalDatabase) -> None:
    run(db.db_insert("t", [{"n": i} for i in range(1001)]))
    assert run(db.db_find("t", limit=1000))["count"] == 1000


def test_fields_projects_paths_and_keeps_id(people: LocalDatabase) -> None:
    result = run(people.db_find("people", {"name": "a"}, fields=["name", "address.city", "missing"]))
    (document,) = result["documents"]
    assert set(document) == {"_id", "name", "address"}
    assert document["address"] == {"city": "Berlin"}


def test_fields_cannot_reach_into_a_list_a_sibling_field_projects(db: LocalDatabase) -> None:
    run(db.db_insert("t", {"tags": ["x", "y"]}))
    with pytest.raises(PredefinedToolError, match="'tags.0' reaches into 'tags', which is not an object"):
        run(db.db_find("t", fields=["tags", "tags.0"]))


def test_distinct_returns_unique_values_in_order(people: LocalDatabase) -> None:
    result = run(people.db_find("people", distinct="status"))
    assert result == {"values": ["active", "pending", "cancelled"], "count": 3}
    filtered = run(people.db_find("people", {"qty": {"$lt": 6}}, distinct="address.city"))
    assert filtered == {"values": ["Berlin"], "count": 1}
    assert run(people.db_find("people", distinct="tags"))["values"] == [["x", "y"], ["y"], []]


def test_find_on_a_missing_collection_is_empty(db: LocalDatabase) -> None:
    assert run(db.db_find("nothing")) == {"documents": [], "count": 0}


# --------------------------------------------------------------------------- update and upsert


def test_update_merges_removes_and_stamps(people: LocalDatabase) -> None:
    before = run(people.db_find("people", {"name": "a"}))["documents"][0]
    result = run(
        people.db_update("people", {"name": "a"}, {"status": "shipped", "note": None, "address.zip": None})
    )
    assert result == {"updated_ids": [before["_id"]], "updated_count": 1}
    after = run(people.db_find("people", {"name": "a"}))["documents"][0]
    assert after["status"] == "shipped"
    assert "note" not in after
    assert after["address"] == {"city": "Berlin"}
    assert after["qty"] == 5 and after["tags"] == ["x", "y"]
    assert after["_created_at"] == before["_created_at"]
    assert after["_updated_at"] > before["_updated_at"]


def test_update_sets_nested_paths_and_all_matches(people: LocalDatabase) -> None:
    result = run(people.db_update("people", {"status": "active"}, {"address.country": "DE"}))
    assert result["updated_count"] == 2
    assert names(people, {"address.country": "DE"}) == ["a", "c"]
    assert run(people.db_find("people", {"name": "a"}))["documents"][0]["address"]["city"] == "Berlin"


def test_update_without_match_changes_nothing(people: LocalDatabase) -> None:
    assert run(people.db_update("people", {"name": "zz"}, {"x": 1})) == {
        "updated_ids": [],
        "updated_count": 0,
    }
    assert names(people, {"x": {"$exists": True}}) == []


@pytest.mark.parametrize(
    "update, message",
    [
        ({}, "must not be empty"),
        ({"$set": {"a": 1}}, "\\$set are not supported"),
        ({"_id": "x"}, "read-only"),
        ({"_updated_at": "x"}, "read-only"),
        ("x", "JSON object"),
    ],
)
def test_bad_updates_are_refused(people: LocalDatabase, update: Any, message: str) -> None:
    with pytest.raises(PredefinedToolError, match=message):
        run(people.db_update("people", {"name": "a"}, update))


def test_failed_update_leaves_every_document_unchanged(db: LocalDatabase) -> None:
    run(db.db_insert("t", [{"n": 1, "a": {}}, {"n": 2, "a": "text"}]))
    with pytest.raises(PredefinedToolError, match="is not an object"):
        run(db.db_update("t", {}, {"a.b": 1}))
    assert [d["a"] for d in run(db.db_find("t"))["documents"]] == [{}, "text"]


def test_upsert_inserts_from_filter_update_and_insert_only(db: LocalDatabase) -> None:
    result = run(
        db.db_upsert(
            "orders",
            filter={
                "order_id": "ORD-1",
                "status": "new",
                "amount": {"$gt": 5},
                "meta.x": 1,
                "$or": [{"a": 1}],
            },
            update={"status": "shipped", "carrier": "dhl"},
            insert_only={"source": "etl", "carrier": "ups"},
        )
    )
    assert result["operation"] == "inserted"
    (document,) = run(db.db_find("orders"))["documents"]
    assert document["_id"] == result["upserted_id"]
    # later wins: filter equalities < update < insert_only; operator/dot/logical keys are not copied
    user_fields = {k: v for k, v in document.items() if not k.startswith("_")}
    assert user_fields == {"order_id": "ORD-1", "status": "shipped", "carrier": "ups", "source": "etl"}
    assert document["_created_at"] == document["_updated_at"]


def test_upsert_leaves_a_none_of_update_out_of_an_inserted_document(db: LocalDatabase) -> None:
    """"A ``None`` value in ``update`` removes the field on the update branch and is omitted from an
    inserted document" (predefined-tools.md): the entry is left out, so a filter equality of the same
    field stays (the document matches its filter); ``insert_only`` is not ``update``: stored as given."""
    result = run(db.db_upsert("orders", filter={"order_id": "A", "note": "from the filter"},
                              update={"status": "new", "note": None, "meta.tag": None, "gone": None},
                              insert_only={"source": None}))
    assert result["operation"] == "inserted"
    (document,) = run(db.db_find("orders"))["documents"]
    assert {k: v for k, v in document.items() if not k.startswith("_")} == {
        "order_id": "A", "note": "from the filter", "status": "new", "source": None}
    assert run(db.db_count("orders", {"gone": {"$exists": True}})) == {"count": 0}
    again = run(db.db_upsert("orders", {"order_id": "A", "note": "from the filter"}, {"note": None}))
    assert again == {"upserted_id": result["upserted_id"], "operation": "updated"}  # and now it is removed
    assert "note" not in run(db.db_find("orders"))["documents"][0]


def test_upsert_updates_the_first_match_only(db: LocalDatabase) -> None:
    first, second = run(db.db_insert("orders", [{"k": 1, "note": "x"}, {"k": 1, "note": "y"}]))["inserted"]
    result = run(
        db.db_upsert("orders", {"k": 1}, {"status": "done", "note": None}, insert_only={"source": "etl"})
    )
    assert result == {"upserted_id": first["_id"], "operation": "updated"}
    updated, untouched = run(db.db_find("orders"))["documents"]
    assert updated["status"] == "done"
    assert "note" not in updated  # None removes on the update path
    assert "source" not in updated  # insert_only is ignored on the update path
    assert untouched == second
    assert run(db.db_count("orders")) == {"count": 2}


def test_upsert_twice_inserts_once(db: LocalDatabase) -> None:
    first = run(db.db_upsert("orders", {"order_id": "A"}, {"n": 1}))
    second = run(db.db_upsert("orders", {"order_id": "A"}, {"n": 2}))
    assert (first["operation"], second["operation"]) == ("inserted", "updated")
    assert first["upserted_id"] == second["upserted_id"]
    assert [d["n"] for d in run(db.db_find("orders"))["documents"]] == [2]


@pytest.mark.parametrize(
    "filter, update, message",
    [
        ({}, {"a": 1}, "non-empty filter"),
        ({"a": 1}, {}, "must not be empty"),
        ({"a": 1}, {"$inc": 1}, "not supported"),
    ],
)
def test_upsert_guards(db: LocalDatabase, filter: Any, update: Any, message: str) -> None:
    with pytest.raises(PredefinedToolError, match=message):
        run(db.db_upsert("orders", filter, update))
    assert run(db.db_count("orders")) == {"count": 0}


# --------------------------------------------------------------------------- delete, count, list


def test_delete_requires_a_non_empty_filter(people: LocalDatabase) -> None:
    with pytest.raises(PredefinedToolError, match="non-empty filter"):
        run(people.db_delete("people", {}))
    assert run(people.db_count("people")) == {"count": 4}


def test_delete_removes_matches_and_reports_ids(people: LocalDatabase) -> None:
    ids = [d["_id"] for d in run(people.db_find("people", {"status": "active"}))["documents"]]
    assert run(people.db_delete("people", {"status": "active"})) == {"deleted_ids": ids, "deleted_count": 2}
    assert names(people, None) == ["b", "d"]


def test_count_with_and_without_filter(people: LocalDatabase) -> None:
    assert run(people.db_count("people")) == {"count": 4}
    assert run(people.db_count("people", {"tags": {"$contains": "y"}})) == {"count": 2}
    assert run(people.db_count("nothing")) == {"count": 0}


def test_list_collections_reports_counts_and_sizes(db: LocalDatabase) -> None:
    run(db.db_insert("orders", [{"n": 1}, {"n": 2}]))
    run(db.db_insert("customers", {"name": "x" * 500}))
    listing = run(db.db_list_collections())
    assert listing["total"] == 2
    customers, orders = listing["collections"]
    assert (customers["name"], customers["document_count"]) == ("customers", 1)
    assert (orders["name"], orders["document_count"]) == ("orders", 2)
    assert customers["size_bytes"] > 500 > orders["size_bytes"] > 0
    run(db.db_delete("orders", {"n": {"$exists": True}}))
    assert run(db.db_list_collections())["collections"][1] == {
        "name": "orders",
        "document_count": 0,
        "size_bytes": 0,
    }


def test_data_survives_a_new_instance(tmp_path: Path) -> None:
    first = LocalDatabase(tmp_path / "db.sqlite3")
    run(first.db_insert("orders", {"n": 1}))
    first.close()
    second = LocalDatabase(tmp_path / "db.sqlite3")
    assert run(second.db_count("orders")) == {"count": 1}
    second.close()


# --------------------------------------------------------------------------- concurrency


def test_twenty_concurrent_inserts_from_threads_all_land(tmp_path: Path) -> None:
    shared = LocalDatabase(tmp_path / "db.sqlite3")
    other = LocalDatabase(tmp_path / "db.sqlite3")  # a second connection to the same file
    start = threading.Barrier(20)

    def insert(i: int) -> None:
        target = shared if i % 2 else other
        start.wait()
        run(target.db_insert("events", {"i": i}))
        run(target.db_upsert("counters", {"key": f"k{i % 5}"}, {"last": i}))

    with ThreadPoolExecutor(max_workers=20) as pool:
        list(pool.map(insert, range(20)))  # re-raises any worker's exception
    documents = run(shared.db_find("events", limit=1000))["documents"]
    assert sorted(d["i"] for d in documents) == list(range(20))
    assert len({d["_id"] for d in documents}) == 20
    assert run(shared.db_count("counters")) == {"count": 5}
    shared.close()
    other.close()


def test_concurrent_tasks_on_one_event_loop(db: LocalDatabase) -> None:
    async def main() -> None:
        await asyncio.gather(*(db.db_insert("events", {"i": i}) for i in range(20)))

    run(main())
    assert run(db.db_count("events")) == {"count": 20}


# --------------------------------------------------------------------------- access rules


def bound(db: LocalDatabase, **config: Any) -> Any:
    return db.bind(DatabaseAccessConfig(**config), "order-bot")


def test_unlisted_collection_is_denied_and_hidden(people: LocalDatabase) -> None:
    run(people.db_insert("orders", {"n": 1}))
    agent = bound(people, collections={"orders": CollectionPermissions()})
    assert run(agent.db_count("orders")) == {"count": 1}
    with pytest.raises(
        PredefinedToolError, match="Access denied: agent 'order-bot' may not access collection 'people'"
    ):
        run(agent.db_find("people"))
    with pytest.raises(PredefinedToolError, match="not listed in database.collections: orders"):
        run(agent.db_insert("people", {"n": 1}))
    assert [c["name"] for c in run(agent.db_list_collections())["collections"]] == ["orders"]
    assert run(agent.db_list_collections())["total"] == 1


@pytest.mark.parametrize(
    "call",
    [
        lambda a: a.db_insert("orders", {"n": 2}),
        lambda a: a.db_update("orders", {"n": 1}, {"n": 2}),
        lambda a: a.db_upsert("orders", {"n": 1}, {"n": 2}),
    ],
)
def test_prevent_write_blocks_every_write(db: LocalDatabase, call: Any) -> None:
    run(db.db_insert("orders", {"n": 1}))
    agent = bound(db, prevent_write=True)
    message = r"Access denied: agent 'order-bot' may not write to collection 'orders' \(prevent_write\)"
    with pytest.raises(PredefinedToolError, match=message):
        run(call(agent))
    assert [d["n"] for d in run(db.db_find("orders"))["documents"]] == [1]
    assert run(agent.db_count("orders")) == {"count": 1}  # reading is still allowed
    assert run(agent.db_delete("orders", {"n": 1}))["deleted_count"] == 1  # and so is deleting


def test_per_collection_overrides_win_over_global_flags(db: LocalDatabase) -> None:
    agent = bound(
        db,
        prevent_write=True,
        prevent_delete=False,
        collections={
            "logs": CollectionPermissions(prevent_write=False),
            "orders": CollectionPermissions(prevent_delete=True),
            "audit": CollectionPermissions(),
        },
    )
    assert run(agent.db_insert("logs", {"n": 1}))["inserted_count"] == 1
    with pytest.raises(PredefinedToolError, match=r"write to collection 'audit' \(prevent_write\)"):
        run(agent.db_insert("audit", {"n": 1}))
    run(db.db_insert("orders", {"n": 1}))
    with pytest.raises(
        PredefinedToolError,
        match=r"may not delete from collection 'orders' \(database\.collections\.orders\.prevent_delete\)",
    ):
        run(agent.db_delete("orders", {"n": 1}))
    assert run(agent.db_delete("logs", {"n": 1}))["deleted_count"] == 1


def test_prevent_delete_blocks_delete_only(db: LocalDatabase) -> None:
    agent = bound(db, prevent_delete=True)
    run(agent.db_insert("orders", {"n": 1}))
    with pytest.raises(PredefinedToolError, match=r"delete from collection 'orders' \(prevent_delete\)"):
        run(agent.db_delete("orders", {"n": 1}))
    assert run(db.db_count("orders")) == {"count": 1}


def test_no_config_means_unrestricted(db: LocalDatabase) -> None:
    agent = db.bind(None, "free")
    run(agent.db_insert("anything", {"n": 1}))
    assert run(agent.db_delete("anything", {"n": 1}))["deleted_count"] == 1


def test_a_malformed_name_is_reported_before_access(db: LocalDatabase) -> None:
    agent = bound(db, collections={"orders": CollectionPermissions()})
    with pytest.raises(PredefinedToolError, match="invalid collection name"):
        run(agent.db_find("Orders"))


# --------------------------------------------------------------------------- services surface


def _parameters(function: Any) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.default, p.kind) for p in inspect.signature(function).parameters.values()]


def test_tools_for_covers_every_data_tool_with_sdk_signatures(tmp_path: Path) -> None:
    with LocalServices(tmp_path / "session") as services:
        tools = services.tools_for("bot", None)
        assert set(tools) == set(DATA_TOOL_NAMES)
        for name, function in tools.items():
            assert inspect.iscoroutinefunction(function), name
            assert _parameters(function) == _parameters(getattr(sdk_tools, name)), name
        for name in DB_TOOL_NAMES:
            assert _parameters(getattr(services.db, name)) == _parameters(getattr(sdk_tools, name)), name


def test_data_tool_names_match_the_sdk() -> None:
    data = {n for n in PREDEFINED_TOOL_NAMES if n.startswith(("db_", "file_", "retrieval_"))}
    data |= set(PREDEFINED_TOOL_ALIASES)
    assert set(DATA_TOOL_NAMES) == data
    assert len(DATA_TOOL_NAMES) == len(set(DATA_TOOL_NAMES))


def test_tools_for_applies_the_agents_access_rules(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "agents").mkdir(parents=True)
    (project / "agents" / "reader.yaml").write_text(
        "version: '1.0'\nname: reader\ndescription: d\nmodel: openai/gpt-4.1-mini\n"
        "system_prompt: s\ntools: [db_find]\n"
        "database:\n  collections: [orders]\n  prevent_write: true\n"
    )
    config = ProjectLoader(str(project)).load_agent("reader").config
    with LocalServices(tmp_path / "session") as services:
        reader = services.tools_for("reader", config)
        with pytest.raises(PredefinedToolError, match="agent 'reader' may not write"):
            run(reader["db_insert"]("orders", {"n": 1}))
        with pytest.raises(PredefinedToolError, match="not listed in database.collections: orders"):
            run(reader["db_find"]("customers"))
        run(services.tools_for("writer", None)["db_insert"]("orders", {"n": 1}))
        assert run(reader["db_count"]("orders")) == {"count": 1}


def test_tools_for_refuses_something_that_is_not_an_agent_config(tmp_path: Path) -> None:
    with LocalServices(tmp_path / "session") as services, pytest.raises(TypeError, match="AgentConfig"):
        services.tools_for("bot", {"database": {"prevent_write": True}})


def test_tool_schema_comes_from_the_sdk() -> None:
    schema = tool_schema("db_find")
    assert schema["name"] == "db_find"
    assert schema["description"].startswith("Query documents from a database collection")
    parameters = schema["parameters"]
    assert parameters["required"] == ["collection"]
    assert parameters["properties"]["limit"]["type"] == "integer"
    assert parameters["properties"]["fields"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "Field paths to include. Omit for full documents.",
    }
    alias = tool_schema("query_knowledge")
    assert alias["name"] == "query_knowledge"
    assert alias["parameters"] == tool_schema("retrieval_query")["parameters"]
    assert alias["description"] == tool_schema("retrieval_query")["description"]
    schema["parameters"]["required"].append("mutated")
    assert tool_schema("db_find")["parameters"]["required"] == ["collection"]
    with pytest.raises(ValueError, match="not a predefined Connic tool"):
        tool_schema("os_system")


# --------------------------------------------------------------------------- the merge of an update, as values


@pytest.mark.parametrize(("update", "remove_none", "merged"), [
    ({"a": 2, "n.x": 1}, False, {"a": 2, "keep": True, "n": {"x": 1, "y": 0}}),
    ({"n.z.deep": "v"}, False, {"a": 1, "keep": True, "n": {"x": 0, "y": 0, "z": {"deep": "v"}}}),
    ({"a": None, "n.y": None}, True, {"keep": True, "n": {"x": 0}}),  # null removes, as db_update does
    ({"a": None}, False, {"a": None, "keep": True, "n": {"x": 0, "y": 0}}),  # null stored, as an upsert inserts
    ({"missing.x": None}, True, {"a": 1, "keep": True, "n": {"x": 0, "y": 0}}),  # removing below nothing: no-op
    ({"a.x": None}, True, {"a": 1, "keep": True, "n": {"x": 0, "y": 0}}),
])
def test_merge_sets_dot_paths_and_null_removes(update: dict[str, Any], remove_none: bool,
                                               merged: dict[str, Any]) -> None:
    document = {"a": 1, "keep": True, "n": {"x": 0, "y": 0}}
    assert merge(document, update, remove_none=remove_none) == merged
    assert document == {"a": 1, "keep": True, "n": {"x": 0, "y": 0}}  # a copy: the stored one is untouched


def test_merge_refuses_a_path_through_a_value() -> None:
    with pytest.raises(PredefinedToolError, match="cannot set 'a.x': 'a' is not an object"):
        merge({"a": 1}, {"a.x": 2}, remove_none=True)


def test_an_upsert_seeds_a_new_document_with_the_filters_literal_equalities() -> None:
    assert insert_seed({"sku": "k1", "qty": {"$gt": 1}, "$or": [{"a": 1}], "address.city": "Berlin",
                        "meta": {"kind": "x"}}) == {"sku": "k1", "meta": {"kind": "x"}}
