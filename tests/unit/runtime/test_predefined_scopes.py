"""The rules under the local data tools, as values: an agent's access scopes (``access.py``: which
configured scope governs a name, where a flag comes from, what a refusal says), the files sandbox's
paths (``sandbox.py``), and the one exception they raise (``errors.py``), whose message is what the
model reads. The tools that apply them are test_predefined_db.py's and test_predefined_files.py's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from connic.core import (
    CollectionPermissions,
    DatabaseAccessConfig,
    FilesAccessConfig,
    FolderPermissions,
    NamespacePermissions,
    RetrievalAccessConfig,
)

from pytest_connic.runtime.predefined import PredefinedToolError as Reexported
from pytest_connic.runtime.predefined.access import database_access, files_access, retrieval_access
from pytest_connic.runtime.predefined.errors import PredefinedToolError
from pytest_connic.runtime.predefined.sandbox import Sandbox, is_under, normalise, parent_of


def refusal(call: object, *args: object, **kwargs: object) -> str:
    assert callable(call)
    with pytest.raises(PredefinedToolError) as refused:
        call(*args, **kwargs)
    assert refused.value.message == str(refused.value)  # the text the model reads as the tool's error
    return refused.value.message


def test_the_package_raises_the_one_exception() -> None:
    assert Reexported is PredefinedToolError
    assert PredefinedToolError("refused").message == "refused"


def test_no_config_means_everything_is_accessible() -> None:
    access = database_access(None, "bot")
    assert (access.visible("orders"), access.visible(None), access.flag("orders", "prevent_write")) == (
        True, True, (False, "prevent_write"))
    access.require("orders", "prevent_delete")  # no refusal


def test_a_collection_covers_itself_and_a_scope_overrides_the_global_flag() -> None:
    config = DatabaseAccessConfig(prevent_write=True, collections={
        "orders": CollectionPermissions(prevent_write=False), "audit": CollectionPermissions()})
    access = database_access(config, "bot")
    assert (access.governing("orders"), access.governing("orders_archive"), access.governing(None)) == (
        "orders", None, None)
    assert access.flag("orders", "prevent_write") == (False, "database.collections.orders.prevent_write")
    assert access.flag("audit", "prevent_write") == (True, "prevent_write")  # None inherits the global flag
    access.require("orders", "prevent_write")
    assert refusal(access.require, "audit", "prevent_write") == (
        "Access denied: agent 'bot' may not write to collection 'audit' (prevent_write)")
    assert refusal(access.require_visible, "users") == (
        "Access denied: agent 'bot' may not access collection 'users' (not listed in database.collections: "
        "audit, orders)")
    assert refusal(access.require, None, "prevent_delete") == (
        "Access denied: agent 'bot' may not access the default collection (not listed in database.collections: "
        "audit, orders)")


def test_a_namespace_covers_its_subtree_and_the_most_specific_scope_decides() -> None:
    config = RetrievalAccessConfig(namespaces={
        "kb": NamespacePermissions(prevent_delete=True), "kb.drafts": NamespacePermissions(prevent_delete=False)})
    access = retrieval_access(config, "bot")
    assert [access.governing(n) for n in ("kb", "kb.faq", "kb.drafts.v2", "kbx", "other")] == [
        "kb", "kb", "kb.drafts", None, None]
    access.require("kb.drafts.v2", "prevent_delete")
    assert refusal(access.require, "kb.faq", "prevent_delete") == (
        "Access denied: agent 'bot' may not delete from namespace 'kb.faq' (retrieval.namespaces.kb.prevent_delete)")
    # a subtree operation is refused when any part of the subtree is protected
    assert access.blocked_below("kb", "prevent_delete") == "retrieval.namespaces.kb.prevent_delete"
    assert access.blocked_below("kb.drafts", "prevent_delete") is None


def test_a_folder_covers_everything_below_it_and_its_ancestors_are_reachable() -> None:
    config = FilesAccessConfig(folders={
        "invoices": FolderPermissions(), "invoices/2026/locked": FolderPermissions(prevent_delete=True)})
    access = files_access(config, "bot")
    assert access.governing("invoices/2026/acme.pdf") == "invoices"
    assert access.governing("invoices/2026/locked/a.pdf") == "invoices/2026/locked"
    assert (access.visible("contracts"), access.reachable(""), access.reachable("contracts")) == (False, True, False)
    assert refusal(access.require_subtree, "invoices", "prevent_delete") == (
        "Access denied: agent 'bot' may not delete from path 'invoices': part of it is protected "
        "(files.folders.invoices/2026/locked.prevent_delete)")
    access.require_subtree("invoices/2025", "prevent_delete")
    assert files_access(FilesAccessConfig(session_only=True), "bot").flag("a.txt", "session_only") == (
        True, "session_only")


@pytest.mark.parametrize(("path", "folder", "expected"), [
    ("invoices/2026/acme.pdf", False, "invoices/2026/acme.pdf"),
    ("invoices/", True, "invoices"), ("", True, ""), ("/", True, "/ refused"),
])
def test_paths_are_normalised(path: str, folder: bool, expected: str) -> None:
    if expected.endswith(" refused"):
        refusal(normalise, path, folder=folder)
    else:
        assert normalise(path, folder=folder) == expected


@pytest.mark.parametrize(("path", "says"), [
    (None, "path must be a string, got None"),
    ("", "path must not be empty"),
    ("/etc/passwd", "must be relative to the files root (no leading '/')"),
    ("C:\\x", "must be relative to the files root"),
    ("c:", "must be relative to the files root"),
    ("a\\b", "contains a backslash or NUL character"),
    ("a\x00b", "contains a backslash or NUL character"),
    ("a/../b", "must not contain empty, '.' or '..' segments"),
    ("./a", "must not contain empty, '.' or '..' segments"),
    ("a//b", "must not contain empty, '.' or '..' segments"),
    ("a/", "must not contain empty, '.' or '..' segments"),  # a trailing slash only for a folder
])
def test_paths_that_could_leave_the_sandbox_are_refused_outright(path: object, says: str) -> None:
    assert says in refusal(normalise, path)


def test_folders_and_their_contents() -> None:
    assert (parent_of("a/b/c.txt"), parent_of("c.txt")) == ("a/b", "")
    assert (is_under("a/b/c.txt", "a"), is_under("a/b", ""), is_under("ab/c", "a"), is_under("a", "a")) == (
        True, True, False, False)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_a_symlink_out_of_the_sandbox_is_refused_and_never_listed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    sandbox = Sandbox(tmp_path / "files")
    (sandbox.root / "docs").mkdir()
    (sandbox.root / "docs" / "a.txt").write_text("a")
    (sandbox.root / "docs" / "escape").symlink_to(outside, target_is_directory=True)
    (sandbox.root / "docs" / "link.txt").symlink_to(outside / "secret.txt")
    assert sandbox.locate("docs/a.txt") == sandbox.root / "docs" / "a.txt"
    assert "resolves outside the files root (through a symlink)" in refusal(sandbox.locate, "docs/escape/secret.txt")
    assert sandbox.walk("") == ["docs/a.txt"]
    assert sandbox.walk("nothing-here") == []


def test_empty_folders_are_pruned_up_to_the_first_with_files(tmp_path: Path) -> None:
    sandbox = Sandbox(tmp_path / "files")
    (sandbox.root / "a" / "b" / "c").mkdir(parents=True)
    (sandbox.root / "a" / "keep.txt").write_text("k")
    sandbox.prune("a/b/c")
    assert sorted(p.relative_to(sandbox.root).as_posix() for p in sandbox.root.rglob("*")) == ["a", "a/keep.txt"]
