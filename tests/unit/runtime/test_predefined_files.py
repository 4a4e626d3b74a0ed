"""The local ``file_*`` tools: sandbox directory, metadata, listing, and access rules."""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from connic import tools as sdk_tools
from connic.core import FilesAccessConfig, FolderPermissions

from pytest_connic.runtime.predefined import FILE_TOOL_NAMES, LocalFiles, PredefinedToolError
from pytest_connic.runtime.predefined.access import files_access
from pytest_connic.runtime.predefined.files import Caller

run = asyncio.run


@pytest.fixture
def files(tmp_path: Path) -> Iterator[LocalFiles]:
    store = LocalFiles(tmp_path / "files")
    yield store
    store.close()


def agent(files: LocalFiles, config: FilesAccessConfig | None = None, **identity: Any) -> Any:
    return files.bind(config, "clerk", **identity)


def paths(listing: dict[str, Any]) -> list[str]:
    return [meta["_path"] for meta in listing["files"]]


# --------------------------------------------------------------------------- write and read


def test_write_then_read_text(files: LocalFiles) -> None:
    clerk = agent(files, run_id="run-1", session_id="s-1")
    meta = run(clerk.file_write("reports/2026/summary.md", "# Summary", metadata={"status": "draft"}))
    assert meta["_path"] == "reports/2026/summary.md"
    assert (meta["_folder"], meta["_name"]) == ("reports/2026", "summary.md")
    assert meta["_mime_type"] == "text/markdown"
    assert meta["_size"] == len(b"# Summary")
    assert (meta["_source"], meta["_agent"], meta["_run_id"], meta["_session_id"]) == (
        "agent",
        "clerk",
        "run-1",
        "s-1",
    )
    assert meta["status"] == "draft"
    assert uuid.UUID(meta["_id"])
    assert (files.root / "reports" / "2026" / "summary.md").read_text() == "# Summary"
    result = run(clerk.file_read("reports/2026/summary.md"))
    assert result["content"] == b"# Summary"
    assert result["file"] == meta


def test_write_bytes_and_explicit_mime_type(files: LocalFiles) -> None:
    data = bytes(range(256))
    meta = run(files.file_write("blobs/raw", data, mime_type="application/x-custom"))
    assert meta["_mime_type"] == "application/x-custom"
    assert meta["_size"] == 256
    assert meta["_source"] == "api"
    assert run(files.file_read("blobs/raw"))["content"] == data
    assert run(files.file_write("blobs/unknown", b"x"))["_mime_type"] == "application/octet-stream"
    assert run(files.file_write("blobs/unknown-text", "x"))["_mime_type"] == "text/plain"


def test_existing_path_gets_a_numbered_name_unless_overwrite(files: LocalFiles) -> None:
    run(files.file_write("reports/summary.md", "one"))
    second = run(files.file_write("reports/summary.md", "two"))
    third = run(files.file_write("reports/summary.md", "three"))
    assert (second["_path"], third["_path"]) == ("reports/summary (2).md", "reports/summary (3).md")
    assert run(files.file_read("reports/summary.md"))["content"] == b"one"
    replaced = run(files.file_write("reports/summary.md", "new", metadata={"v": 2}, overwrite=True))
    assert replaced["_path"] == "reports/summary.md"
    assert run(files.file_read("reports/summary.md"))["content"] == b"new"
    assert run(files.file_read("reports/summary.md"))["file"]["v"] == 2


def test_read_of_a_missing_file_returns_an_error(files: LocalFiles) -> None:
    assert run(files.file_read("nope.txt")) == {"error": "File not found: nope.txt"}
    run(files.file_write("folder/a.txt", "x"))
    assert "error" in run(files.file_read("folder"))


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"metadata": {"_status": "x"}}, "must not start with '_'"),
        ({"metadata": {"status": None}}, "must not be null"),
        ({"metadata": ["x"]}, "JSON object"),
        ({"content": 12}, "text or bytes"),
        ({"mime_type": 3}, "mime_type must be a string"),
    ],
)
def test_write_rejects_bad_arguments(files: LocalFiles, arguments: dict[str, Any], message: str) -> None:
    call: dict[str, Any] = {"path": "a.txt", "content": "x", **arguments}
    with pytest.raises(PredefinedToolError, match=message):
        run(files.file_write(**call))
    assert not (files.root / "a.txt").exists()


def test_cannot_write_over_a_folder_or_below_a_file(files: LocalFiles) -> None:
    run(files.file_write("a/b.txt", "x"))
    with pytest.raises(PredefinedToolError, match="it is a folder"):
        run(files.file_write("a", "x", overwrite=True))
    with pytest.raises(PredefinedToolError, match="is a file, not a folder"):
        run(files.file_write("a/b.txt/c.txt", "x"))


# --------------------------------------------------------------------------- list


@pytest.fixture
def tree(files: LocalFiles) -> LocalFiles:
    run(
        files.file_write(
            "invoices/2026/acme.pdf", b"%PDF" * 100, metadata={"status": "pending", "amount": 90}
        )
    )
    run(files.file_write("invoices/2026/zeta.pdf", b"%PDF", metadata={"status": "paid", "amount": 10}))
    run(
        files.file_write("invoices/2025/beta.pdf", b"%PDF" * 10, metadata={"status": "pending", "amount": 50})
    )
    run(files.file_write("invoices/readme.txt", "notes"))
    run(files.file_write("top.md", "# top"))
    return files


def test_list_shows_direct_files_and_subfolders(tree: LocalFiles) -> None:
    root = run(tree.file_list())
    assert (root["folder"], root["folders"], paths(root)) == ("", ["invoices"], ["top.md"])
    invoices = run(tree.file_list("invoices/"))
    assert invoices["folder"] == "invoices"
    assert invoices["folders"] == ["invoices/2025", "invoices/2026"]
    assert paths(invoices) == ["invoices/readme.txt"]
    assert (invoices["count"], invoices["total"]) == (1, 1)


def test_list_recursive_with_metadata_filter_and_sort(tree: LocalFiles) -> None:
    listing = run(tree.file_list("invoices", recursive=True, filter={"status": "pending"}))
    assert listing["folders"] == []
    assert paths(listing) == ["invoices/2026/acme.pdf", "invoices/2025/beta.pdf"]  # default sort {_name: 1}
    by_size = run(
        tree.file_list("", recursive=True, filter={"_mime_type": "application/pdf"}, sort={"_size": -1})
    )
    assert paths(by_size) == ["invoices/2026/acme.pdf", "invoices/2025/beta.pdf", "invoices/2026/zeta.pdf"]
    combined = {"$or": [{"amount": {"$gte": 60}}, {"_folder": "invoices/2025"}], "_size": {"$gt": 4}}
    assert paths(run(tree.file_list("invoices", recursive=True, filter=combined))) == [
        "invoices/2026/acme.pdf",
        "invoices/2025/beta.pdf",
    ]


def test_list_pages_with_total(tree: LocalFiles) -> None:
    page = run(tree.file_list("", recursive=True, limit=2, skip=1))
    assert (page["count"], page["total"]) == (2, 5)
    assert [m["_name"] for m in page["files"]] == ["beta.pdf", "readme.txt"]
    with pytest.raises(PredefinedToolError, match="limit must be"):
        run(tree.file_list(limit=1001))


def test_list_scope_session_and_run(files: LocalFiles) -> None:
    run(agent(files, run_id="r1", session_id="s1").file_write("out/a.txt", "a"))
    run(agent(files, run_id="r2", session_id="s1").file_write("out/b.txt", "b"))
    run(agent(files, run_id="r3", session_id="s2").file_write("out/c.txt", "c"))
    viewer = agent(files, run_id="r2", session_id="s1")
    assert paths(run(viewer.file_list("out", scope="session"))) == ["out/a.txt", "out/b.txt"]
    assert paths(run(viewer.file_list("out", scope="run"))) == ["out/b.txt"]
    assert len(run(viewer.file_list("out"))["files"]) == 3
    with pytest.raises(PredefinedToolError, match="needs a current session"):
        run(agent(files).file_list("out", scope="session"))
    with pytest.raises(PredefinedToolError, match="scope must be"):
        run(viewer.file_list("out", scope="everything"))


def test_files_placed_by_hand_are_listed_and_readable(files: LocalFiles) -> None:
    (files.root / "seed").mkdir()
    (files.root / "seed" / "data.csv").write_text("a,b\n1,2\n")
    (listed,) = run(files.file_list("seed"))["files"]
    assert (listed["_path"], listed["_source"], listed["_size"]) == ("seed/data.csv", "dashboard", 8)
    assert listed["_mime_type"] == "text/csv"
    assert run(files.file_read("seed/data.csv"))["file"]["_id"] == listed["_id"]
    assert run(files.file_read("seed/data.csv"))["content"] == b"a,b\n1,2\n"


# --------------------------------------------------------------------------- update and delete


def test_update_merges_metadata_and_null_removes(tree: LocalFiles) -> None:
    result = run(
        tree.file_update("invoices/2026/acme.pdf", metadata={"status": "paid", "amount": None, "by": "x"})
    )
    assert result["moved"] == 0
    meta = result["file"]
    assert (meta["status"], meta["by"]) == ("paid", "x")
    assert "amount" not in meta
    assert run(tree.file_read("invoices/2026/acme.pdf"))["file"] == meta
    with pytest.raises(PredefinedToolError, match="must not start with '_'"):
        run(tree.file_update("invoices/2026/acme.pdf", metadata={"_path": "x"}))


def test_update_moves_a_file_with_its_metadata(tree: LocalFiles) -> None:
    result = run(
        tree.file_update("invoices/2026/acme.pdf", new_path="done/acme.pdf", metadata={"status": "done"})
    )
    assert result["moved"] == 1
    assert (result["file"]["_path"], result["file"]["_folder"], result["file"]["status"]) == (
        "done/acme.pdf",
        "done",
        "done",
    )
    assert result["file"]["amount"] == 90
    assert "error" in run(tree.file_read("invoices/2026/acme.pdf"))
    assert run(tree.file_read("done/acme.pdf"))["content"] == b"%PDF" * 100


def test_moving_a_folder_moves_everything(tree: LocalFiles) -> None:
    result = run(tree.file_update("invoices/2026", new_path="archive/2026"))
    assert result == {"moved": 2, "folder": "archive/2026"}
    assert run(tree.file_list("invoices"))["folders"] == ["invoices/2025"]
    moved = run(tree.file_list("archive/2026"))
    assert paths(moved) == ["archive/2026/acme.pdf", "archive/2026/zeta.pdf"]
    assert moved["files"][0]["status"] == "pending"
    assert not (tree.root / "invoices" / "2026").exists()


@pytest.mark.parametrize(
    "path, arguments, message",
    [
        ("invoices/2026/acme.pdf", {"new_path": "invoices/2026/zeta.pdf"}, "already exists"),
        ("invoices", {"new_path": "invoices/sub"}, "into itself"),
        ("invoices/2026", {"new_path": "invoices/2026"}, "into itself"),
        ("invoices", {"metadata": {"a": 1}}, "metadata can only be set on files"),
        ("invoices/2026/acme.pdf", {}, "needs new_path, metadata, or both"),
        ("nothing.txt", {"new_path": "x.txt"}, "No file or folder"),
    ],
)
def test_bad_updates(tree: LocalFiles, path: str, arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(PredefinedToolError, match=message):
        run(tree.file_update(path, **arguments))
    assert len(run(tree.file_list("", recursive=True))["files"]) == 5


def test_delete_a_file_and_a_folder(tree: LocalFiles) -> None:
    assert run(tree.file_delete("top.md")) == {"deleted": 1}
    assert "error" in run(tree.file_read("top.md"))
    with pytest.raises(PredefinedToolError, match="pass recursive=true"):
        run(tree.file_delete("invoices"))
    assert run(tree.file_delete("invoices/2026", recursive=True)) == {"deleted": 2}
    assert run(tree.file_list("invoices"))["folders"] == ["invoices/2025"]
    with pytest.raises(PredefinedToolError, match="No file or folder"):
        run(tree.file_delete("invoices/2026/acme.pdf"))
    assert run(tree.file_delete("invoices", recursive=True)) == {"deleted": 2}
    assert list(tree.root.iterdir()) == []


# --------------------------------------------------------------------------- sandbox


ESCAPES = ["../x.txt", "a/../../x.txt", "/etc/passwd", "a//b.txt", "./a.txt", "a\\..\\b.txt", "C:/x.txt", ""]


@pytest.mark.parametrize("path", ESCAPES)
def test_paths_that_leave_the_sandbox_are_refused(files: LocalFiles, tmp_path: Path, path: str) -> None:
    for call in (
        files.file_write(path, "x"),
        files.file_read(path),
        files.file_delete(path, recursive=True),
        files.file_update(path, metadata={"a": 1}),
    ):
        with pytest.raises(PredefinedToolError):
            run(call)
    run(files.file_write("inside.txt", "x"))
    with pytest.raises(PredefinedToolError):
        run(files.file_update("inside.txt", new_path=path or "/"))
    assert not (tmp_path / "x.txt").exists()
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("files.index.sqlite3")] == ["files"]
    assert [p.name for p in files.root.iterdir()] == ["inside.txt"]


def test_list_refuses_escaping_folders(files: LocalFiles) -> None:
    for folder in ("..", "../..", "/etc", "a/../.."):
        with pytest.raises(PredefinedToolError, match="relative|segments"):
            run(files.file_list(folder))


def test_symlinks_pointing_out_are_refused(files: LocalFiles, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    os.symlink(outside, files.root / "out")
    os.symlink(outside / "secret.txt", files.root / "link.txt")
    with pytest.raises(PredefinedToolError, match="outside the files root"):
        run(files.file_read("out/secret.txt"))
    with pytest.raises(PredefinedToolError, match="outside the files root"):
        run(files.file_read("link.txt"))
    with pytest.raises(PredefinedToolError, match="outside the files root"):
        run(files.file_write("out/new.txt", "x"))
    with pytest.raises(PredefinedToolError, match="outside the files root"):
        run(files.file_write("link.txt", "overwrite", overwrite=True))
    run(files.file_write("inside.txt", "x"))
    with pytest.raises(PredefinedToolError, match="outside the files root"):
        run(files.file_update("inside.txt", new_path="out/moved.txt"))
    with pytest.raises(PredefinedToolError, match="outside the files root"):
        run(files.file_list("out"))
    assert paths(run(files.file_list("", recursive=True))) == ["inside.txt"]
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret"


def test_symlinks_inside_the_root_are_followed(files: LocalFiles) -> None:
    run(files.file_write("real/a.txt", "a"))
    os.symlink(files.root / "real" / "a.txt", files.root / "alias.txt")
    assert run(files.file_read("alias.txt"))["content"] == b"a"


# --------------------------------------------------------------------------- access rules


def config(**arguments: Any) -> FilesAccessConfig:
    return FilesAccessConfig(**arguments)


def test_folders_restrict_what_the_agent_sees(tree: LocalFiles) -> None:
    clerk = agent(tree, config(folders={"invoices/2026": FolderPermissions()}))
    assert run(clerk.file_list())["folders"] == ["invoices"]
    assert paths(run(clerk.file_list("", recursive=True))) == [
        "invoices/2026/acme.pdf",
        "invoices/2026/zeta.pdf",
    ]
    assert run(clerk.file_list("invoices"))["folders"] == ["invoices/2026"]
    message = (
        "Access denied: agent 'clerk' may not access path 'top.md' "
        r"\(not listed in files.folders: invoices/2026\)"
    )
    with pytest.raises(PredefinedToolError, match=message):
        run(clerk.file_read("top.md"))
    with pytest.raises(PredefinedToolError, match="not listed in files.folders"):
        run(clerk.file_write("other/x.txt", "x"))
    with pytest.raises(PredefinedToolError, match="not listed in files.folders"):
        run(clerk.file_list("invoices/2025"))
    with pytest.raises(PredefinedToolError, match="not listed in files.folders"):
        run(clerk.file_delete("invoices", recursive=True))
    assert run(clerk.file_write("invoices/2026/new.pdf", b"x"))["_path"] == "invoices/2026/new.pdf"


def test_folder_names_are_normalised_by_the_sdk(tree: LocalFiles) -> None:
    clerk = agent(tree, config(folders={"/invoices/": FolderPermissions()}))
    assert run(clerk.file_read("invoices/readme.txt"))["content"] == b"notes"


def test_prevent_write_blocks_write_and_update(tree: LocalFiles) -> None:
    clerk = agent(tree, config(prevent_write=True))
    for call in (
        clerk.file_write("new.txt", "x"),
        clerk.file_update("top.md", metadata={"a": 1}),
        clerk.file_update("top.md", new_path="moved.md"),
    ):
        with pytest.raises(PredefinedToolError, match=r"may not write to path '[^']+' \(prevent_write\)"):
            run(call)
    assert run(clerk.file_read("top.md"))["content"] == b"# top"
    assert run(clerk.file_delete("top.md")) == {"deleted": 1}


def test_moving_needs_write_access_to_both_folders(tree: LocalFiles) -> None:
    clerk = agent(
        tree,
        config(folders={"invoices": FolderPermissions(), "templates": FolderPermissions(prevent_write=True)}),
    )
    with pytest.raises(
        PredefinedToolError, match=r"templates/a.pdf' \(files.folders.templates.prevent_write\)"
    ):
        run(clerk.file_update("invoices/2026/acme.pdf", new_path="templates/a.pdf"))
    with pytest.raises(PredefinedToolError, match="files.folders.templates.prevent_write"):
        run(clerk.file_update("invoices/2026", new_path="templates/2026"))
    assert run(tree.file_read("invoices/2026/acme.pdf"))["file"]["_path"] == "invoices/2026/acme.pdf"
    assert run(clerk.file_update("invoices/2026/acme.pdf", new_path="invoices/done/acme.pdf"))["moved"] == 1


def test_prevent_delete_and_protected_subfolders(tree: LocalFiles) -> None:
    clerk = agent(tree, config(prevent_delete=True, folders={"invoices": FolderPermissions()}))
    with pytest.raises(
        PredefinedToolError, match=r"may not delete from path 'invoices/readme.txt' \(prevent_delete\)"
    ):
        run(clerk.file_delete("invoices/readme.txt"))
    partly = agent(
        tree,
        config(
            folders={"invoices": FolderPermissions(), "invoices/2025": FolderPermissions(prevent_delete=True)}
        ),
    )
    with pytest.raises(
        PredefinedToolError, match="part of it is protected .files.folders.invoices/2025.prevent_delete"
    ):
        run(partly.file_delete("invoices", recursive=True))
    assert len(run(tree.file_list("invoices", recursive=True))["files"]) == 4
    assert run(partly.file_delete("invoices/2026", recursive=True)) == {"deleted": 2}


def test_session_only_hides_other_sessions_files(files: LocalFiles) -> None:
    run(agent(files, session_id="s1").file_write("uploads/mine.txt", "1"))
    run(agent(files, session_id="s2").file_write("uploads/theirs.txt", "2"))
    run(files.file_write("templates/t.txt", "t"))
    rules = config(
        session_only=True,
        folders={"uploads": FolderPermissions(), "templates": FolderPermissions(session_only=False)},
    )
    viewer = agent(files, rules, session_id="s1")
    assert paths(run(viewer.file_list("uploads"))) == ["uploads/mine.txt"]
    assert "error" in run(viewer.file_read("uploads/theirs.txt"))
    assert run(viewer.file_read("templates/t.txt"))["content"] == b"t"
    with pytest.raises(PredefinedToolError, match="No file or folder"):
        run(viewer.file_delete("uploads/theirs.txt"))
    assert run(viewer.file_delete("uploads", recursive=True)) == {"deleted": 1}
    assert run(files.file_read("uploads/theirs.txt"))["content"] == b"2"


# --------------------------------------------------------------------------- surface and threads


def test_signatures_match_the_sdk(files: LocalFiles) -> None:
    def parameters(function: Any) -> list[tuple[str, Any, Any]]:
        return [(p.name, p.default, p.kind) for p in inspect.signature(function).parameters.values()]

    bound = agent(files)
    for name in FILE_TOOL_NAMES:
        assert parameters(getattr(bound, name)) == parameters(getattr(sdk_tools, name)), name
        assert parameters(getattr(files, name)) == parameters(getattr(sdk_tools, name)), name


def test_concurrent_writes_from_threads_all_land(files: LocalFiles) -> None:
    start = threading.Barrier(20)

    def write(i: int) -> None:
        start.wait()
        run(files.file_write("out/report.txt", f"{i}"))

    with ThreadPoolExecutor(max_workers=20) as pool:
        list(pool.map(write, range(20)))  # re-raises any worker's exception
    listing = run(files.file_list("out"))
    assert listing["total"] == 20
    contents = {run(files.file_read(m["_path"]))["content"] for m in listing["files"]}
    assert contents == {str(i).encode() for i in range(20)}


# --------------------------------------------------------------------------- who sees a file, as values


def test_a_caller_sees_a_file_in_its_folders_and_a_session_only_file_of_its_session() -> None:
    config = FilesAccessConfig(folders={"shared": FolderPermissions(session_only=False),
                                        "private": FolderPermissions(session_only=True)})
    access = files_access(config, "clerk")
    mine = Caller(access, agent="clerk", session_id="s1")
    stranger, sessionless = Caller(access, session_id="s2"), Caller(access)
    private = {"_path": "private/notes.txt", "_session_id": "s1"}
    shared = {"_path": "shared/a.txt", "_session_id": "s2"}
    outside = {"_path": "elsewhere/b.txt", "_session_id": "s1"}
    by_hand = {"_path": "private/placed-by-hand.txt"}  # no session wrote it: no caller's session owns it
    assert [(mine.sees(m), stranger.sees(m), sessionless.sees(m)) for m in (private, shared, outside, by_hand)] == [
        (True, False, False), (True, True, True), (False, False, False), (False, False, False)]
