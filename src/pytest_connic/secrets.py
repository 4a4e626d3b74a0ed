"""Secrets never reach a cassette, a report, a trace or a failure message.

A value is secret when it comes from an environment variable whose name looks
secret (``*_KEY``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ...), or from a
``--connic-env`` file (every value there is masked: those files exist to hold
credentials). ``Masker`` replaces every occurrence with ``***``, in every form
a secret takes on its way into text: as is, JSON-escaped (``\\"``, ``\\n``),
``\\u``-escaped (JSON with ``ensure_ascii``, ``ascii()``), JSON-encoded inside JSON up to
``JSON_DEPTH`` levels (a JSON string holding a JSON document), ``repr``-escaped, and
each line of a multi-line value on its own (a PEM key printed line by line). The password of a
URL's user-info (``https://user:password@host``) is masked in any text, known or not.
Values (and lines) shorter than six characters are never masked: masking ``1`` or
``true`` would shred reports.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import overload

MASK = "***"

_SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|AUTH|CREDENTIAL|PRIVATE|SESSION|COOKIE|DSN)", re.IGNORECASE
)
#: values shorter than this are not masked: masking "1" or "true" would shred reports
_MIN_LENGTH = 6


def looks_secret(name: str) -> bool:
    """Whether an environment variable's name suggests a credential."""
    return bool(_SECRET_NAME.search(name))


def secret_values_from_env(environ: Mapping[str, str] | None = None) -> set[str]:
    """The values of every environment variable whose name looks secret."""
    env = os.environ if environ is None else environ
    return {value for name, value in env.items() if looks_secret(name) and len(value) >= _MIN_LENGTH}


def secret_forms(value: str) -> set[str]:
    """Every text form of ``value`` the masker looks for: the value, its escaped forms, and
    (for a multi-line value) each line of at least six characters with its escaped forms."""
    if len(value) < _MIN_LENGTH:
        return set()
    pieces = {value}
    if "\n" in value or "\r" in value:
        pieces |= {line.strip() for line in value.splitlines()}
    forms: set[str] = set()
    for piece in pieces:
        if len(piece) < _MIN_LENGTH:
            continue
        forms.add(piece)
        forms |= json_forms(piece)
        for quoted in (repr, ascii):
            forms.add(quoted(piece)[1:-1])
            # inside a longer repr that quotes with ' (so escapes every ' of the secret)
            forms.add(quoted(piece + "'\"")[1:-4])
        forms.add(piece.encode("unicode_escape").decode("ascii"))
        forms.add(html.escape(piece, quote=True))
    return {f for f in forms if len(f) >= _MIN_LENGTH}


#: how many times a secret may be JSON-encoded inside JSON (a JSON string in a JSON string ...)
JSON_DEPTH = 6


def json_forms(value: str, depth: int = JSON_DEPTH) -> set[str]:
    """``value`` as it reads inside a JSON string, inside a JSON string in that, ... ``depth``
    levels deep (``json.dumps({"i": json.dumps({"pw": value})})``), with and without
    ``ensure_ascii`` at each level; stops early once a level escapes nothing more."""
    found: set[str] = set()
    level = {value}
    for _ in range(depth):
        level = {json.dumps(v, ensure_ascii=a)[1:-1] for v in level for a in (False, True)} - found
        if not level - {value}:
            break
        found |= level
    return found


#: the password of a URL's user-info (``https://user:password@host``): masked in any text
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:]*:)(?P<password>[^\s/@]+)(?=@)")


def url_passwords(text: str) -> set[str]:
    """The passwords of every URL user-info in ``text`` (a ``--connic-mcp-url`` value)."""
    return {m.group("password") for m in _USERINFO.finditer(text)}


class Masker:
    """Replaces known secret values (in every form, see the module docstring) in text and in
    JSON-like data.

    ``report_limit``: the longest string a report keeps (``jsonsafe.masked`` and
    :meth:`report_text` cut longer ones, with a marker saying how much was cut); None keeps
    everything. Cassettes and checks never see it.
    """

    def __init__(self, values: Iterable[str] = (), *, report_limit: int | None = None) -> None:
        self._values: set[str] = set()
        self._forms: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        #: the longest form: a window this wide around a cut is masked before cutting
        self.longest = 0
        self.report_limit = report_limit
        self.add(values)

    def add(self, values: Iterable[str]) -> None:
        """Remember more secret values."""
        fresh = {v for v in values if isinstance(v, str) and len(v) >= _MIN_LENGTH} - self._values
        if not fresh:
            return
        self._values |= fresh
        for value in fresh:
            self._forms |= secret_forms(value)
        # longest first, so a secret that contains another is masked whole
        ordered = sorted(self._forms, key=lambda f: (-len(f), f))
        self.longest = len(ordered[0]) if ordered else 0
        self._pattern = re.compile("|".join(re.escape(v) for v in ordered)) if ordered else None

    @property
    def values(self) -> frozenset[str]:
        return frozenset(self._values)

    @property
    def active(self) -> bool:
        """Whether there is any secret to mask."""
        return self._pattern is not None

    def text(self, value: str) -> str:
        """``value`` with every secret replaced by ``***``."""
        if not value:
            return value
        if "://" in value:  # a URL's user-info password, whether or not its value is known
            value = _USERINFO.sub(lambda m: m.group("head") + MASK, value)
        if self._pattern is None:
            return value
        return self._pattern.sub(MASK, value)

    def find(self, value: str) -> bool:
        """Whether ``value`` holds a secret in any of its forms (a URL's password included)."""
        if value and "://" in value and _USERINFO.search(value) is not None:
            return True
        return self._pattern is not None and bool(value) and self._pattern.search(value) is not None

    def report_text(self, value: str) -> str:
        """``value`` masked, then cut to ``report_limit`` characters with a marker (for reports)."""
        limit = self.report_limit
        if limit is None or len(value) <= limit or (len(value) <= limit + 80 and _CUT.search(value)):
            return self.text(value)  # short, or cut already (a report of a report: xdist)
        # mask a window wider than the cut, so a secret across the cut is masked whole
        head = self.text(value[: limit + self.longest])[:limit]
        return head + truncation_marker(len(value), len(value) - len(head))

    @overload
    def data(self, value: str) -> str: ...
    @overload
    def data(self, value: Mapping[str, object]) -> Mapping[str, object]: ...
    @overload
    def data(self, value: object) -> object: ...

    def data(self, value: object) -> object:
        """A copy of JSON-like ``value`` with secrets masked in every string (keys too)."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.data(k): self.data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value


_CUT = re.compile(r"… \[truncated: \d+ characters, \d+ cut\]\Z")


def truncation_marker(total: int, cut: int) -> str:
    """What ends a value cut for a report: ``… [truncated: 104857600 characters, 104791040 cut]``."""
    return f"… [truncated: {total} characters, {cut} cut]"


def default_masker() -> Masker:
    """A masker that knows the secret-looking values of the current environment."""
    return Masker(secret_values_from_env())
