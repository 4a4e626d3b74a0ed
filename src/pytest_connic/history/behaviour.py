"""What a case did, as the history keeps it for comparisons (docs/history.md, "Comparing
sessions"): per run its output, its tool-call sequence (names, arguments and results in short),
its guardrail and approval decisions, tokens, cost and latency.

Built from a run's record as the reports hold it (``RunRecord.to_dict()`` masked and bounded by
the session's masker, or a ``--connic-json`` report's ``runs_detail`` entry), so a session of the
history and a JSON report file describe a case the same way. Every value is masked already; an
output is bounded by ``connic_report_value_limit``, arguments and results by :data:`SHORT`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from pytest_connic.jsonsafe import JsonBoundsError, load_bounded

#: runs of one case whose behaviour is kept (the first ones started)
KEPT_RUNS = 10
#: characters kept of a tool call's arguments, result or error, and of a run's error
SHORT = 200
#: the keys of a run's record that its behaviour is built from (the rest is not masked for it)
RUN_KEYS = frozenset({"status", "passed", "skipped", "output", "error", "infrastructure_error", "tool_calls",
                      "guardrails", "approvals", "tokens", "cost", "duration_ms"})


def short(value: object, limit: int = SHORT) -> str | None:
    """``value`` as compact text (JSON for anything but a string), cut to ``limit`` characters
    with ``…``; None stays None."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True,
                                                         separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_call(call: Mapping[str, object]) -> dict[str, object]:
    """One tool call in short: ``{name, args, result, error, approval, aborted}``."""
    return {
        "name": str(call.get("name") or call.get("ref") or "?"),
        "args": short(call.get("params") or {}),
        "result": short(call.get("result")) if call.get("has_result") else None,
        "error": short(call.get("error")),
        "approval": call.get("approval"),
        "aborted": bool(call.get("aborted")),
    }


def _items(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _count(value: object) -> int:
    return int(value) if isinstance(value, (int, float, str)) and value else 0


def run_behaviour(run: Mapping[str, object]) -> dict[str, object]:
    """One run, from its record as the reports hold it."""
    found = run.get("tokens")
    tokens: Mapping[str, object] = found if isinstance(found, Mapping) else {}
    return {
        "status": run.get("status"),
        "passed": bool(run.get("passed")),
        "output": run.get("output"),
        "error": short(run.get("error") or run.get("infrastructure_error")),
        "tools": [tool_call(c) for c in _items(run.get("tool_calls")) if isinstance(c, Mapping)],
        "guardrails": [{"direction": g.get("direction"), "name": g.get("name") or g.get("type"),
                        "status": g.get("status")}
                       for g in _items(run.get("guardrails")) if isinstance(g, Mapping)],
        "approvals": [{"tool": a.get("tool"), "decision": a.get("decision")}
                      for a in _items(run.get("approvals")) if isinstance(a, Mapping)],
        "tokens": {"input": _count(tokens.get("input")), "output": _count(tokens.get("output"))},
        "cost": run.get("cost"),
        "latency_ms": run.get("duration_ms"),
    }


def case_behaviour(*, agent: str, name: str, suite: str, line: int,
                   runs: Iterable[Mapping[str, object]]) -> dict[str, object]:
    """A case's behaviour: where it is and its first :data:`KEPT_RUNS` started runs."""
    started = [r for r in runs if isinstance(r, Mapping) and not r.get("skipped")]
    return {"agent": agent, "name": name, "suite": suite, "line": line,
            "runs": [run_behaviour(r) for r in started[:KEPT_RUNS]], "runs_started": len(started)}


def behaviour_text(behaviour: Mapping[str, object]) -> str:
    """As the history stores it (compact JSON)."""
    return json.dumps(behaviour, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)


def parse_behaviour(text: str | None) -> dict[str, object] | None:
    """A stored behaviour, or None (an older row, or a value that is not one)."""
    if not text:
        return None
    try:
        value = load_bounded(text, max_depth=MAX_DEPTH, max_chars=MAX_CHARS)
    except JsonBoundsError:
        return None
    return value if isinstance(value, dict) and behaviour_problem(value) is None else None


#: the deepest a stored behaviour nests: an output is masked to 64 levels (``jsonsafe``), 3 below
#: the top; and the most characters one holds (10 runs of bounded outputs and short tool calls)
MAX_DEPTH = 80
MAX_CHARS = 64 << 20

_NUMBER = (int, float)
#: the keys of a behaviour, of one of its runs, of one tool call and of its tokens, with the JSON
#: types each may hold (a key left out is allowed: every reader of it takes it as missing)
_CASE: dict[str, tuple[type, ...]] = {"agent": (str,), "name": (str,), "suite": (str,), "line": (int,),
                                      "runs": (list,), "runs_started": (int,)}
_RUN: dict[str, tuple[type, ...]] = {
    "status": (str, type(None)), "passed": (bool,), "error": (str, type(None)), "tools": (list,),
    "guardrails": (list,), "approvals": (list,), "tokens": (dict,), "cost": (*_NUMBER, type(None)),
    "latency_ms": (*_NUMBER, type(None))}
_CALL: dict[str, tuple[type, ...]] = {"name": (str,), "args": (str, type(None)), "result": (str, type(None)),
                                      "error": (str, type(None)), "aborted": (bool,)}
_TOKENS: dict[str, tuple[type, ...]] = {"input": (int,), "output": (int,)}


def _kind(value: object) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _fields(value: object, types: dict[str, tuple[type, ...]], where: str) -> str | None:
    if not isinstance(value, dict):
        return f"{where} is {_kind(value)}, not an object"
    for key, kinds in types.items():
        if key in value:
            item = value[key]
            if (isinstance(item, bool) and bool not in kinds) or not isinstance(item, kinds):
                return f"{where}.{key} is {_kind(item)}"
    return None


def behaviour_problem(value: object) -> str | None:
    """What is wrong with a parsed behaviour (a value of the wrong JSON type where the history
    keeps another), in words with its path (``runs[0].tools[1] is a string, not an object``); None
    for a sound one."""
    problem = _fields(value, _CASE, "(behaviour)")
    if problem is not None or not isinstance(value, dict):
        return problem
    for i, run in enumerate(value.get("runs") or []):
        where = f"runs[{i}]"
        problem = _fields(run, _RUN, where)
        if problem is None and isinstance(run, dict):
            problem = _fields(run.get("tokens", {}), _TOKENS, f"{where}.tokens")
            for key in ("tools", "guardrails", "approvals"):
                for j, item in enumerate(run.get(key) or []):
                    problem = problem or _fields(item, _CALL if key == "tools" else {}, f"{where}.{key}[{j}]")
        if problem is not None:
            return problem
    return None


def parts_problem(value: object) -> str | None:
    """What is wrong with parsed ``config_parts`` (``{part: digest}``, both text); None if sound."""
    if not isinstance(value, dict):
        return f"(config_parts) is {_kind(value)}, not an object"
    wrong = next((k for k, v in value.items() if not isinstance(v, str)), None)
    return None if wrong is None else f"[{wrong!r}] is {_kind(value[wrong])}, not a string"


def column_problem(column: str, text: str) -> str | None:
    """What is wrong with the JSON text of a stored ``behaviour`` or ``config_parts`` column (too
    large, nested too deep, not JSON, a value of the wrong type), in words; None for a sound one."""
    try:
        value = load_bounded(text, max_depth=MAX_DEPTH, max_chars=MAX_CHARS)
    except JsonBoundsError as exc:
        return f"column {column} holds {exc}"
    problem = behaviour_problem(value) if column == "behaviour" else parts_problem(value)
    return None if problem is None else f"column {column}: {problem}"
