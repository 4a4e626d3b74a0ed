"""Headless Chromium for the HTML report tests: the binary, a run that dumps the DOM, and a parser
of what a person sees (the text of every visible case section)."""

from __future__ import annotations

import os
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
]


def find_chromium() -> str:
    """The Chromium binary; without it a skip, or a failure under CI (a broken setup)."""
    if not os.path.exists(CHROMIUM):
        message = f"{CHROMIUM} not found: install the Debian package 'chromium' (apt-get install -y chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM


class Visible(HTMLParser):
    """The text of every case section, and whether the section is hidden."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[tuple[bool, list[str]]] = []
        self._inside = False
        self.badges: list[str] = []
        self._badge = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "img":
            raise AssertionError(f"an <img> element was created: {attrs}")
        if tag == "section" and "case" in (values.get("class") or "").split():
            self.sections.append(("hidden" in values, []))
            self._inside = True
        self._badge = tag == "span" and "badge" in (values.get("class") or "").split()

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self._inside = False

    def handle_data(self, data: str) -> None:
        if self._inside:
            self.sections[-1][1].append(data)
        if self._badge:
            self.badges.append(data)
            self._badge = False

    def visible_text(self) -> str:
        return "\n".join("".join(parts) for hidden, parts in self.sections if not hidden)


def run_chromium(binary: str, tmp_path: Path, url: str, *extra: str) -> str:
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    result = subprocess.run(
        [binary, *FLAGS, f"--user-data-dir={profile}", *extra, url],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout
