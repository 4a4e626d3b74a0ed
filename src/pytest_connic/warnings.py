"""Warnings pytest-connic emits."""

from __future__ import annotations


class ConnicWarning(UserWarning):
    """Base class of every warning pytest-connic emits: ``ConnicWarning(message)``, or
    ``ConnicWarning(message, key)`` for a warning shown once per session for ``key``. The key
    travels with the warning (pytest-xdist sends a warning's arguments to the controller), so the
    controller shows a keyed warning once however many workers met it; its text is the message."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""

    @property
    def key(self) -> str | None:
        """What the warning is shown once per session for (None: it is shown every time)."""
        return str(self.args[1]) if len(self.args) > 1 and self.args[1] is not None else None


class GuardrailNotEvaluatedWarning(ConnicWarning):
    """A model-based built-in guardrail cannot run offline and counted as passed."""


class CassetteDivergenceWarning(ConnicWarning):
    """A replayed request differs from the one recorded in the cassette."""


class ConnicLoadWarning(ConnicWarning):
    """What Connic's loader (``connic lint``) warns about in a project, located at the file it is
    about: a schema that does not load, middleware or hooks that fail to load, a skipped ``api:``
    tool ref. Shown once per session."""


class UnknownAgentKeyWarning(ConnicLoadWarning):
    """An agent file (or ``_defaults.yaml``) sets a key Connic's agent configuration does not have."""


class ConnicHistoryWarning(ConnicWarning):
    """The history could not be read or written (read-only, locked, corrupt): the session goes on,
    the file is left as it is."""


class ConnicMergeWarning(ConnicWarning):
    """A merged shard holds cases whose suite file is not in this checkout (a shard of another
    project, branch or checkout): merged as this project's cases, said once per shard."""
