"""Where cassettes live: a case's cassette path under the cassette folder (safe, distinct file
names for any case name; suite folders whose names differ only in case or normalisation kept
apart), and the names older versions gave them."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import time
import unicodedata
import urllib.parse
from collections.abc import Iterable
from pathlib import Path

from pytest_connic.models.base import CassetteError

#: a file name longer than this (UTF-8 bytes, without ``.yaml``) is cut and gets a hash suffix
MAX_NAME_BYTES = 120
#: names Windows refuses as files (cassettes are committed and checked out everywhere)
_WINDOWS_RESERVED = {
    "CON",
    "PRN",
    "AUX",
    "NUL",
    *(f"COM{i}" for i in range(10)),
    *(f"LPT{i}" for i in range(10)),
}
_UNSAFE = re.compile(r'[\x00-\x1f\x7f/\\<>:"|?*]')
_HEX_PAIR = re.compile(r"[0-9A-Fa-f]{2}")


def legacy_safe_name(name: str) -> str:
    """The file name older versions gave a case (``/``, ``:``, ``?``, ... all became ``_``, so
    distinct names could share a file); kept to find cassettes written under it."""
    safe = _UNSAFE.sub("_", name).replace("..", "_")
    safe = re.sub(r"^\.", "_", safe)
    safe = re.sub(r"[. ]$", "_", safe) or "_"
    if safe.split(".")[0].upper() in _WINDOWS_RESERVED:
        safe = "_" + safe
    return _cut(safe, name)


def _cut(safe: str, name: str) -> str:
    if len(safe.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        suffix = "-" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        budget = MAX_NAME_BYTES - len(suffix)
        safe = safe.encode("utf-8", "surrogateescape")[:budget].decode("utf-8", "ignore") + suffix
    return safe


def _escape(char: str) -> str:
    return "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogateescape"))


def safe_name(name: str, *, escape_case: bool = False) -> str:
    """``name`` as one portable file name, by a reversible rule (docs/models.md, "Where
    cassettes live"): the characters no file system takes in a name (``/ \\ < > : " | ? *``,
    control characters) are percent-encoded (``a/b`` -> ``a%2Fb``), and so are a ``%`` that
    would read as an escape (followed by two hex digits), a leading dot, a trailing dot or
    space, the first letter of a Windows device name (``CON`` -> ``%43ON``), and every
    non-ASCII character of a name that is not in Unicode NFC (macOS would store it as its NFC
    or NFD twin); every other name is its own file name. ``escape_case``: capital letters (any
    character ``casefold`` changes) are encoded too (for names that differ only in case, which
    would share a file on macOS and Windows).
    A name longer than ``MAX_NAME_BYTES`` is cut and ends in a hash of the full name.
    :func:`name_of_file` reverses the rule (for names that were not cut)."""
    if not name:
        return "%00"  # only the connic fixture can have an empty name; the suite schema needs one
    out = []
    last = len(name) - 1
    # a name that is not NFC would share a file with its NFC twin on macOS: its non-ASCII is encoded
    unnormal = not unicodedata.is_normalized("NFC", name)
    for i, char in enumerate(name):
        if (
            _UNSAFE.match(char)
            or (char == "%" and _HEX_PAIR.fullmatch(name[i + 1 : i + 3]))
            or (i == 0 and char == ".")
            or (i == last and char in ". ")
            or (escape_case and char.casefold() != char)
            or (unnormal and not char.isascii())
        ):
            out.append(_escape(char))
        else:
            out.append(char)
    if name.split(".")[0].upper() in _WINDOWS_RESERVED and not out[0].startswith("%"):
        out[0] = _escape(out[0])
    return _cut("".join(out), name)


def name_of_file(stem: str) -> str:
    """The case name a cassette file name (without ``.yaml``) stands for: the inverse of
    :func:`safe_name` (a name that was cut gives back its cut form)."""
    return urllib.parse.unquote(stem, errors="strict") if "%" in stem else stem


def cassette_path(cassette_dir: Path, suite_rel: str, case_name: str, *, siblings: Iterable[str] = (),
                  suites_root: Path | None = None) -> Path:
    """``<cassette_dir>/<suite path under tests/, without .yaml>/<safe case name>.yaml``.

    ``suite_rel`` is the suite's path from the project root (``tests/sub/math.yaml``, as in
    node ids); a leading ``tests/`` is dropped. ``siblings``: the names of the other cases
    of the suite (a name that differs from one of them only in case has its capitals
    encoded); ``suites_root``: the project root, whose folders say which suites' folder names
    differ only in case (:func:`suite_folder`). The result always lies inside ``cassette_dir``.
    """
    parts = [p for p in re.split(r"[/\\]+", suite_rel) if p not in ("", ".")]
    folder = suite_folder(parts, suites_root)
    base = Path(os.path.abspath(cassette_dir))
    escape_case = any(s != case_name and _fold(s) == _fold(case_name) for s in siblings)
    path = base.joinpath(*folder, safe_name(case_name, escape_case=escape_case) + ".yaml")
    if os.path.commonpath([base, os.path.abspath(path)]) != str(base):
        raise CassetteError(f"cassette path for case {case_name!r} would leave {base}")
    return path


@functools.lru_cache(maxsize=4096)
def _fold(name: str) -> str:
    """What a case-insensitive, normalising file system compares (macOS, Windows)."""
    return unicodedata.normalize("NFC", name).casefold()


_SUITE_SUFFIX = re.compile(r"\.ya?ml$", re.IGNORECASE)


def _folder_key(entry: str, *, is_dir: bool) -> str | None:
    """What a project entry stands for in the cassette folder: a folder's name, a suite's name
    without a lower-case ``.yaml``/``.yml``, a suite with another case of the suffix whole (None:
    neither a folder nor a suite)."""
    if is_dir:
        return entry
    if entry.endswith((".yaml", ".yml")):
        return entry.rsplit(".", 1)[0]
    return entry if _SUITE_SUFFIX.search(entry) else None


def _collides(key: str, parent: Path | None) -> bool:
    """Whether another entry of ``parent`` stands for a name that differs from ``key`` only in
    case or Unicode normalisation (they would share a folder on macOS and Windows)."""
    if parent is None:
        return False
    try:
        seen = os.stat(parent)
    except OSError:
        return False
    # a folder changed within the last ticks of a coarse file-system clock can change again with the
    # same modification time: it is read afresh, and kept only once its state is settled
    recent = time.time_ns() - seen.st_mtime_ns < _SETTLED_NS
    read = _keys_by_fold.__wrapped__ if recent else _keys_by_fold
    keys = read(str(parent), seen.st_ino, seen.st_mtime_ns, seen.st_size).get(_fold(key), ())
    return any(k != key for k in keys)


#: how long ago a folder must have changed for its state to be kept: the modification time of a
#: file system ticks coarsely (a few milliseconds on Linux, 2 s on FAT)
_SETTLED_NS = 2_000_000_000


@functools.lru_cache(maxsize=256)
def _keys_by_fold(parent: str, inode: int, mtime_ns: int, size: int) -> dict[str, tuple[str, ...]]:
    """The folder keys of ``parent``'s entries, by their folded form: read once per state of the
    folder (its inode, modification time and size, the arguments), not once per case (every
    case's cassette path asks about its suite's folder; with 1,000 suites in ``tests/`` that was
    1,000 entries read per case)."""
    by_fold: dict[str, list[str]] = {}
    try:
        with os.scandir(parent) as entries:
            for entry in entries:
                key = _folder_key(entry.name, is_dir=entry.is_dir())
                if key is not None:
                    by_fold.setdefault(_fold(key), []).append(key)
    except OSError:
        return {}
    return {fold: tuple(keys) for fold, keys in by_fold.items()}


def suite_folder(parts: list[str], root: Path | None = None) -> list[str]:
    """The cassette folder of the suite at ``parts`` (its path from the project root; a leading
    ``tests`` is dropped): each part by :func:`safe_name`'s rule, the suite file without ``.yaml``.
    A part that differs only in case or normalisation from another entry of its folder under
    ``root`` (when given) has its capitals encoded, and a suite whose suffix is not lower case
    (``calc.YAML``) keeps it with its dot encoded (``calc%2EYAML``: not ``calc.yaml``'s folder nor
    ``calc.YAML.yaml``'s). So no two suites share a folder on any file system, and every part
    that needed no escaping keeps its name."""
    folder = []
    for i, part in enumerate(parts):
        if i == 0 and part == "tests":
            continue
        last = i == len(parts) - 1
        key = _folder_key(part, is_dir=not last) or part
        parent = root.joinpath(*parts[:i]) if root is not None else None
        name = safe_name(key, escape_case=_collides(key, parent))
        if last and key == part and _SUITE_SUFFIX.search(part):
            head, _, suffix = name.rpartition(".")
            name = f"{head}%2E{suffix}"
        folder.append(name)
    return folder


def legacy_cassette_path(path: Path) -> Path | None:
    """Where an older version kept the cassette now at ``path`` (None when it is the same file,
    or when the name was cut and cannot be read back)."""
    stem = path.name.removesuffix(".yaml")
    try:
        name = name_of_file(stem)
    except UnicodeDecodeError:
        return None
    if not name or stem not in (safe_name(name), safe_name(name, escape_case=True)):
        return None  # not a name safe_name gives (a cut name, a hand-made file)
    old = legacy_safe_name(name)
    return None if old == stem else path.with_name(old + ".yaml")
