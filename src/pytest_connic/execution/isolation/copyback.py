"""Argument copy-back: what a call in a worker changed in its dict and list arguments (the run
context, a builder's ``context``, a hook's params) applied to the caller's objects in pytest's
process, merged against the data form that was sent, as if the call had run in-process."""

from __future__ import annotations

import msgspec

from pytest_connic.execution.isolation.values import from_ext
from pytest_connic.execution.isolation.wire import (
    Back,
    Copies,
)


def snapshot(back: Back, args: tuple[object, ...], kwargs: dict[str, object]) -> Copies:
    """What the worker received of the arguments it copies back (the base of ``copy_back``):
    their data form (``args``, ``kwargs``: built afresh by ``values.to_data``, never changed), so
    a value that crossed as its description and came back unchanged is left alone in the caller's
    object."""
    return {key: args[key] if isinstance(key, int) else kwargs[key] for key in back}


def copy_back(copied: Copies, sent: Copies, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    """Mutations of dict and list arguments in the worker, applied to the caller's objects.

    Calls of one run may be in flight at once (the tool calls of one model turn) and share the
    run's ``context``, as they share one dict in a single process: so what a call changed is merged
    into the caller's object against what it was sent (``sent``), and the changes other calls
    copied back meanwhile stay."""
    for key, value in copied.items():
        target = args[key] if isinstance(key, int) else kwargs.get(key)
        if key in sent:
            _merge(target, sent[key], value)
        elif isinstance(target, dict) and isinstance(value, dict):
            target.clear()
            target.update(value)
        elif isinstance(target, list) and isinstance(value, list):
            target[:] = value


_ABSENT = object()


def _merge(ours: object, base: object, theirs: object) -> None:
    """Apply the change from ``base`` to ``theirs`` onto ``ours`` in place (dicts and lists)."""
    if isinstance(ours, dict) and isinstance(base, dict) and isinstance(theirs, dict):
        for key in [*theirs, *(k for k in base if k not in theirs)]:  # the worker's order, as in place
            was, now = base.get(key, _ABSENT), theirs.get(key, _ABSENT)
            if _same(was, now):
                continue
            if now is _ABSENT:
                if key in ours and _same(ours[key], was):
                    del ours[key]
            elif key in ours and was is not _ABSENT and isinstance(ours[key], (dict, list)) \
                    and type(ours[key]) is type(was) is type(now):
                _merge(ours[key], was, now)
            elif key in ours and was is _ABSENT and isinstance(ours[key], list) and isinstance(now, list):
                ours[key].extend(now)  # both created the list (``setdefault(k, []).append``)
            else:
                ours[key] = now
    elif isinstance(ours, list) and isinstance(base, list) and isinstance(theirs, list):
        if theirs[:len(base)] == base and ours[:len(base)] == base:
            ours.extend(theirs[len(base):])  # both appended: keep both, the caller's first
        elif not _same(base, theirs):
            ours[:] = theirs


def _same(a: object, b: object) -> bool:
    """Equal values; a value of the protocol's own as it was sent (``values.from_ext``) is
    compared as the worker read it."""
    try:
        return bool(a is b or a == b or (isinstance(a, msgspec.msgpack.Ext) and from_ext(a) == b))
    except Exception:  # noqa: BLE001  (a user value whose __eq__ raises)
        return False


