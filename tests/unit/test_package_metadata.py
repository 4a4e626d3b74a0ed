"""The package introduces itself on an index page: project URLs and a development status in its
metadata, and a README whose links resolve there (an index shows the README alone: a relative
``docs/`` link is a dead link on it). The repository links name files of this checkout, and their
anchors headings those files have."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later; the checks are the same everywhere

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _project() -> dict[str, object]:
    return dict(tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"])


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but ``-`` and ``_`` removed, spaces to ``-``."""
    headings = re.findall(r"^#+\s+(.+?)\s*$", markdown, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_the_metadata_has_project_urls_and_a_development_status() -> None:
    project = _project()
    urls = project["urls"]
    assert isinstance(urls, dict)
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(urls)
    assert all(str(url).startswith("https://") for url in urls.values())
    classifiers = project["classifiers"]
    assert isinstance(classifiers, list)
    assert sum(c.startswith("Development Status :: ") for c in classifiers) == 1
    assert "Framework :: Pytest" in classifiers


def test_every_readme_link_resolves_on_a_package_index_page() -> None:
    urls = _project()["urls"]
    assert isinstance(urls, dict)
    blob = str(urls["Source"]).rstrip("/") + "/blob/main/"
    links = LINK.findall((ROOT / "README.md").read_text("utf-8"))
    assert links, "the README links to its docs"
    relative = [link for link in links if not link.startswith(("https://", "http://", "#"))]
    assert relative == [], f"relative links are dead on an index page: {relative}"
    for link in links:
        if not link.startswith(blob):
            continue
        path, _, anchor = link.removeprefix(blob).partition("#")
        target = ROOT / path
        assert target.is_file(), f"{link}: no {path} in this checkout"
        if anchor:
            assert anchor in _anchors(target.read_text("utf-8")), f"{link}: no heading #{anchor} in {path}"
