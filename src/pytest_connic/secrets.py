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

Encoded forms (``percent_patterns``, ``base64_forms``, found by ``Encodings``), also of each line
of a multi-line value:

- **percent-encoded** (a query string, a form body): each character as itself or as its UTF-8
  bytes in ``%XX`` (upper or lower hex), a space also as ``+``: any encoder's choice of what to
  leave literal is found, also partly encoded.
- **base64**, standard or URL-safe, padded or not, of the value or of its JSON-escaped forms,
  **inside a longer encoded string** (``Basic base64(user:secret)``, a token holding JSON): base64
  writes 6 bits a character, so a value that starts at byte offset ``k`` of the encoded text lies
  on one of three alignments (``k mod 3``). For each, the characters whose 6 bits all come from
  the secret are fixed; the character before them (when the secret starts inside one) holds the
  secret's first 2 or 4 bits under unknown bits of what precedes it, the one after them its last
  2 or 4 bits over unknown bits of what follows: those two are matched as the character classes
  those fixed bits allow. The mask covers them, so no bit of the secret is left; what it matches
  is an encoding of a text that contains the secret at that alignment, nothing else (an
  unrelated 8 characters of base64 would have to encode the same 48 bits).
"""

from __future__ import annotations

import base64
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
    forms: set[str] = set()
    for piece in secret_pieces(value):
        forms.add(piece)
        forms |= json_forms(piece)
        for quoted in (repr, ascii):
            forms.add(quoted(piece)[1:-1])
            # inside a longer repr that quotes with ' (so escapes every ' of the secret)
            forms.add(quoted(piece + "'\"")[1:-4])
        forms.add(piece.encode("unicode_escape").decode("ascii"))
        forms.add(html.escape(piece, quote=True))
    return {f for f in forms if len(f) >= _MIN_LENGTH}


def secret_pieces(value: str) -> set[str]:
    """The value, and each line of at least six characters of a multi-line value."""
    if len(value) < _MIN_LENGTH:
        return set()
    pieces = {value}
    if "\n" in value or "\r" in value:
        pieces |= {line.strip() for line in value.splitlines()}
    return {p for p in pieces if len(p) >= _MIN_LENGTH}


#: characters every percent-encoder leaves as they are (RFC 3986 unreserved)
_UNRESERVED = re.compile(r"[A-Za-z0-9._~-]*")
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
#: a base64 character as either alphabet writes it (``+/`` standard, ``-_`` URL-safe)
_B64_CHAR = {**{c: re.escape(c) for c in _B64[:62]}, "+": r"[+\-]", "/": r"[/_]"}


def percent_patterns(value: str) -> set[str]:
    """Regular expressions of ``value``'s percent-encoded forms (and of each of its lines): none
    for a piece every encoder leaves as it is (its literal form is masked)."""
    return {_percent_pattern(p) for p in secret_pieces(value) if not _UNRESERVED.fullmatch(p)}


def base64_forms(value: str) -> set[tuple[str, str]]:
    """``(pattern, core)`` of ``value``'s base64 forms at the three alignments, for it, each of its
    lines and their JSON-escaped forms; ``core`` is the literal run of whole characters, in the
    standard alphabet (``base64_pattern``)."""
    found: set[tuple[str, str]] = set()
    for piece in secret_pieces(value):
        for text in {piece} | {json.dumps(piece, ensure_ascii=a)[1:-1] for a in (False, True)}:
            found |= {base64_pattern(text.encode("utf-8"), align) for align in range(3)}
    return found


def _hex(byte: int) -> str:
    """``%XX`` of one byte, either case of each hex letter."""
    return "%" + "".join(f"[{d.upper()}{d.lower()}]" if d.isalpha() else d for d in f"{byte:02X}")


def _percent_pattern(piece: str) -> str:
    parts = []
    for char in piece:
        encoded = "".join(_hex(b) for b in char.encode("utf-8"))
        literal = r"\+|%20| " if char == " " else re.escape(char)
        parts.append(f"(?:{literal}|{encoded})")
    return "".join(parts)


def base64_pattern(data: bytes, align: int) -> tuple[str, str]:
    """The base64 of ``data`` standing ``align`` bytes after a 3-byte group's start inside longer
    encoded text: a regular expression of its whole characters (either alphabet), of the classes
    of the partial ones at either edge and of the padding that may follow; and its whole
    characters as written in the standard alphabet."""
    text = base64.b64encode(bytes(align) + data).decode("ascii").rstrip("=")
    start, end = 8 * align, 8 * (align + len(data))  # the value's bits in the encoded stream
    first, last = -(-start // 6), end // 6  # the characters made of its bits alone: [first, last)
    core = "".join(_B64_CHAR[c] for c in text[first:last])
    head = tail = ""
    if start % 6:  # the character before holds the value's first 6 - start % 6 bits, low
        known = 6 - start % 6
        bits = _B64.index(text[first - 1]) & ((1 << known) - 1)
        head = _b64_class({(high << known) | bits for high in range(1 << (6 - known))})
    if end % 6:  # the character after holds its last end % 6 bits, high
        known = end % 6
        bits = _B64.index(text[last]) >> (6 - known)
        tail = _b64_class({(bits << (6 - known)) | low for low in range(1 << (6 - known))})
    return head + core + tail + "={0,2}", text[first:last]  # and the padding, when it ends there


def _b64_class(values: set[int]) -> str:
    chars = {_B64[v] for v in values}
    chars |= {"-" for c in chars if c == "+"} | {"_" for c in chars if c == "/"}
    return "[" + "".join(re.escape(c) for c in sorted(chars)) + "]"


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


class Encodings:
    """The percent-encoded and base64 forms of the secrets, found as spans of a text. Their
    regular expressions are slow beside the literal forms' (character classes and groups defeat
    ``re``'s literal scan: 30 times slower on a megabyte of text), so each runs only where it can
    match: base64 where the text holds one of the cores (plain substring tests at ``str``'s speed,
    after, in a short text, one scan for a run of base64 characters that long: most texts have
    none, and tens of substring tests cost more than a short text's scan), percent-encoding
    within reach of a ``%`` or a ``+``."""

    def __init__(self) -> None:
        self._base64: set[tuple[str, str]] = set()
        self._percent: set[str] = set()
        #: the compiled expressions, made when first needed (most texts never need them)
        self._b64: re.Pattern[str] | None = None
        self._pct: re.Pattern[str] | None = None
        self._cores: tuple[str, ...] = ()
        #: a run of base64 characters as long as the shortest core
        self._run: re.Pattern[str] | None = None
        #: the longest text one percent-encoded form spans
        self.width = 0

    def add(self, values: Iterable[str]) -> None:
        for value in values:
            self._base64 |= base64_forms(value)
            self._percent |= percent_patterns(value)
            self.width = max(self.width, 12 * len(value))  # 4 UTF-8 bytes of 3 characters each
        self._b64 = self._pct = None
        if self._base64:
            cores = {c for _, c in self._base64} | {c.translate(_URLSAFE) for _, c in self._base64}
            self._cores = tuple(sorted(cores, key=lambda c: (-len(c), c)))
            shortest = min(len(c) for c in cores)
            self._run = re.compile(f"[A-Za-z0-9+/_-]{{{shortest}}}")

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where ``text`` holds an encoded secret, as ``(start, end)``, unordered, maybe overlapping."""
        found: list[tuple[int, int]] = []
        if self._holds_core(text):
            if self._b64 is None:
                self._b64 = _alternatives(p for p, _ in self._base64)
            found += [m.span() for m in self._b64.finditer(text)]
        if self._percent and ("%" in text or "+" in text):
            if self._pct is None:
                self._pct = _alternatives(self._percent)
            found += self._percent_spans(self._pct, text)
        return found

    def _holds_core(self, text: str) -> bool:
        if self._run is None:
            return False
        if len(text) < _LONG_TEXT and self._run.search(text) is None:
            return False
        return any(map(text.__contains__, self._cores))

    def _percent_spans(self, pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
        """A percent-encoded form that differs from the literal one holds a ``%`` or a ``+``, and
        lies within ``width`` of it: only those windows are searched."""
        windows: list[list[int]] = []
        for mark in re.finditer(r"[%+]", text):
            low, high = max(0, mark.start() - self.width), mark.start() + self.width + 1
            if windows and low <= windows[-1][1]:
                windows[-1][1] = high
            else:
                windows.append([low, high])
        found: list[tuple[int, int]] = []
        for low, high in windows:
            found += [m.span() for m in pattern.finditer(text, low, min(high, len(text)))]
        return found


_URLSAFE = str.maketrans("+/", "-_")
#: from this length on, the cores' substring tests alone are cheaper than the scan for a run
_LONG_TEXT = 4096


def _alternatives(patterns: Iterable[str]) -> re.Pattern[str]:
    """One expression of ``patterns``, the longest first."""
    return re.compile("|".join(sorted(patterns, key=lambda f: (-len(f), f))))


def _masked(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with every span (merged where they overlap or touch) replaced by ``***``."""
    out: list[str] = []
    end = 0
    for start, stop in sorted(spans):
        if start > end or not out:
            out.append(text[end:start])
            out.append(MASK)
        end = max(end, stop)
    out.append(text[end:])
    return "".join(out)


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
        self._encoded = Encodings()
        self._pattern: re.Pattern[str] | None = None
        #: the heads of the forms a cut can leave (``_cut_heads``), made when first needed
        self._heads: tuple[set[str], int] | None = None
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
        self._encoded.add(fresh)
        self._heads = None
        # longest first, so a secret that contains another is masked whole
        ordered = sorted(self._forms, key=lambda f: (-len(f), f))
        self.longest = max(len(ordered[0]) if ordered else 0, self._encoded.width)
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
        encoded = self._encoded.spans(value)
        if not encoded:  # the usual case: the literal forms' one pass
            masked = self._pattern.sub(MASK, value)
        else:
            masked = _masked(value, [m.span() for m in self._pattern.finditer(value)] + encoded)
        return self._cut_heads(masked) if ELLIPSIS in masked else masked

    def _cut_heads(self, text: str) -> str:
        """A secret cut short where a value was shortened for a report (``format_value``: ``…``
        marks the cut) leaves its head before the mark: the longest head of a form, at least
        ``_MIN_HEAD`` characters, that ends at a mark is masked too."""
        if self._heads is None:
            heads = {form[:k] for form in self._forms for k in range(_MIN_HEAD, len(form))}
            # the longest head of a literal form, not the window of an encoded one (``longest``)
            self._heads = (heads, max(map(len, heads), default=0))
        heads, longest = self._heads
        out: list[str] = []
        start = 0
        for mark in re.finditer(ELLIPSIS, text):
            end = mark.start()
            head = next((k for k in range(min(longest, end - start), _MIN_HEAD - 1, -1)
                         if text[end - k:end] in heads), 0)
            out.append(text[start:end - head] + (MASK if head else ""))
            start = end
        out.append(text[start:])
        return "".join(out)

    def find(self, value: str) -> bool:
        """Whether ``value`` holds a secret in any of its forms (a URL's password included)."""
        if value and "://" in value and _USERINFO.search(value) is not None:
            return True
        if self._pattern is None or not value:
            return False
        return self._pattern.search(value) is not None or bool(self._encoded.spans(value))

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


#: what marks a value shortened for a report (``expressions.format_value``, ``truncation_marker``)
ELLIPSIS = "…"
#: the shortest head of a cut secret that is masked: shorter ones say nothing of the secret
_MIN_HEAD = 4


def truncation_marker(total: int, cut: int) -> str:
    """What ends a value cut for a report: ``… [truncated: 104857600 characters, 104791040 cut]``."""
    return f"… [truncated: {total} characters, {cut} cut]"


def default_masker() -> Masker:
    """A masker that knows the secret-looking values of the current environment."""
    return Masker(secret_values_from_env())
