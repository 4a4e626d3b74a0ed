"""Which variants ``--connic-ab VARIANT`` compares with which base agents.

A variant is an agent named ``{base}-test-{name}``; Connic's loader marks it
(``is_test_variant``, ``base_agent_name``, ``test_name``) and keeps the longest
matching base. ``VARIANT`` is ``all``, a variant's full agent name, or its test
name (the part after ``-test-``), which may select one variant of several bases.
"""

from __future__ import annotations

from collections.abc import Mapping

ALL = "all"


def variants(agents: Mapping[str, object]) -> dict[str, tuple[str, str]]:
    """Every variant of a project: ``{variant name: (base name, test name)}``."""
    found = {}
    for name, agent in agents.items():
        config = getattr(agent, "config", None)
        base = getattr(config, "base_agent_name", None)
        if getattr(config, "is_test_variant", False) and base:
            found[name] = (str(base), str(getattr(config, "test_name", "") or ""))
    return found


def select(agents: Mapping[str, object], wanted: str) -> dict[str, list[str]]:
    """``{base agent: [variant agents, sorted]}`` that ``wanted`` selects (empty when none)."""
    chosen: dict[str, list[str]] = {}
    for name, (base, test) in sorted(variants(agents).items()):
        if wanted in (ALL, name, test):
            chosen.setdefault(base, []).append(name)
    return chosen


def no_match_message(wanted: str, available: list[str], source: str) -> str:
    """The usage error for a ``VARIANT`` that names no variant agent."""
    listed = ", ".join(sorted(available)) if available else "none (a variant is an agent named {base}-test-{name})"
    return (f"invalid value {wanted!r} from {source}: no A/B variant agent matches; expected 'all', a variant's "
            f"agent name or its test name; variants in the project: {listed}")
