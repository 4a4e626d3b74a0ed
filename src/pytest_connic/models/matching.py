"""Matching rules: the parts of a request the user leaves out of the comparison with a recording.

A rule is written as a mapping, the same in a cassette's ``match:`` block and (one per line) in
the ini key ``connic_match_rules``::

    - replace: '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}'
      with: '<uuid>'                       # optional (default '<replaced>')
      in: 'messages[role=tool].content'    # optional (default: the system prompt and every message)
    - ignore: 'messages[*].content.run_id' # this value is not compared (it reads '<ignored>')

Rules normalise the request before its digests are computed, both when a turn is recorded (the
stored digest is of the normalised request) and when it is replayed, so two requests that
differ only in what the rules cover match. No rule: matching is strict.

A path walks the request as data (``model``, ``system``, ``messages``, ``tools``): ``.key``,
``[n]`` (an index, negative from the end), ``[*]`` (every item or value), ``[key=value]`` (the
items whose ``key`` is ``value``: ``messages[role=tool]``). A string that the path walks on
into is read as JSON (a tool's result is the JSON text of what it returned).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass

from pytest_connic.errors import ConnicError
from pytest_connic.models.base import ModelRequest, ToolSpec
from pytest_connic.patterns import Bounded, Deadline, PatternError, PatternTimeout

_KEYS = ("replace", "with", "in", "ignore")
_ROOTS = ("model", "system", "messages", "tools")
_SEGMENT = re.compile(r"\.([A-Za-z0-9_\-]+|\*)|\[(-?\d+|\*|[A-Za-z0-9_\-]+=[^\]]*|'[^']*'|\"[^\"]*\")\]")
_NAME = re.compile(r"[A-Za-z0-9_\-]+")
#: what a rule's ``ignore`` leaves in place of the value
#: what a path segment holds: a key (``key``), nothing (``each``), an index (``index``), or a
#: ``(key, value)`` pair (``where``)
SegmentArg = str | int | tuple[str, str] | None
Segment = tuple[str, SegmentArg]

IGNORED = "<ignored>"
REPLACED = "<replaced>"


class MatchRuleError(ConnicError):
    """A matching rule that cannot be used (a bad regular expression, a bad path, a wrong key);
    the message names the rule's key (``match[0].replace``) and says what is wrong."""


@dataclass(frozen=True)
class MatchRule:
    """One rule: ``ignore`` a path, or ``replace`` a pattern (within ``scope``) by ``placeholder``."""

    kind: str  #: ignore | replace
    path: tuple[Segment, ...] | None  #: ignore: its path; replace: its ``in`` (None: all text)
    pattern: Bounded | None  #: applied with a time bound (``patterns.py``)
    placeholder: str
    data: Mapping[str, object]  #: the rule as written (a cassette keeps it when it is re-recorded)
    #: where the rule is written, as errors name it (``cassettes/x.yaml:3:14: match[0]``, ``ini
    #: connic_match_rules line 1``)
    origin: str = "rule"


def parse_rule(data: object, where: str = "rule") -> MatchRule:
    """A rule from its mapping; ``MatchRuleError("<where>.<key>: ...")`` when it cannot be used."""
    if not isinstance(data, Mapping):
        raise MatchRuleError(f"{where}: expected a mapping with 'replace' (and 'with', 'in') or 'ignore', "
                             f"found {type(data).__name__} {data!r}")
    for key in data:
        if key not in _KEYS and not (isinstance(key, str) and key.startswith("x-")):
            raise MatchRuleError(f"{where}.{key}: unknown key {key!r}; known keys: {', '.join(_KEYS)}")
    if ("replace" in data) == ("ignore" in data):
        raise MatchRuleError(f"{where}: a rule has 'replace' (a regular expression) or 'ignore' (a path), "
                             "exactly one of them")
    placeholder = _text(data.get("with", IGNORED if "ignore" in data else REPLACED), f"{where}.with")
    if "ignore" in data:
        return MatchRule("ignore", parse_path(_text(data["ignore"], f"{where}.ignore"), f"{where}.ignore"),
                         None, placeholder, dict(data), where)
    pattern = _text(data["replace"], f"{where}.replace")
    try:
        compiled = Bounded(pattern)
    except PatternError as exc:
        raise MatchRuleError(f"{where}.replace: invalid regular expression {pattern!r}: {exc}") from None
    scope = parse_path(_text(data["in"], f"{where}.in"), f"{where}.in") if "in" in data else None
    return MatchRule("replace", scope, compiled, placeholder, dict(data), where)


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise MatchRuleError(f"{where}: expected a string, found {type(value).__name__} {value!r}")
    return value


def parse_path(text: str, where: str = "path") -> tuple[Segment, ...]:
    """``messages[*].content`` as segments ``(("key", "messages"), ("each", None), ("key", "content"))``."""
    root = _NAME.match(text)
    if root is None or root.group() not in _ROOTS:
        raise MatchRuleError(f"{where}: invalid path {text!r}: a path starts with one of {', '.join(_ROOTS)}")
    segments: list[Segment] = [("key", root.group())]
    at = root.end()
    while at < len(text):
        found = _SEGMENT.match(text, at)
        if found is None:
            raise MatchRuleError(f"{where}: invalid path {text!r} at character {at + 1}: expected .key, [n], "
                                 "[*] or [key=value]")
        segments.append(_segment(found.group(1), found.group(2)))
        at = found.end()
    return tuple(segments)


def _segment(name: str | None, bracket: str | None) -> Segment:
    if name is not None:
        return ("each", None) if name == "*" else ("key", name)
    assert bracket is not None
    if bracket == "*":
        return ("each", None)
    if bracket[0] in "'\"":
        return ("key", bracket[1:-1])
    if "=" in bracket:
        key, _, value = bracket.partition("=")
        return ("where", (key, value))
    return ("index", int(bracket))


def parse_ini_lines(lines: Sequence[str]) -> tuple[MatchRule, ...]:
    """The rules of ``connic_match_rules``: each line one rule in YAML (``ignore: PATH`` or
    ``{replace: 'REGEX', with: '<uuid>'}``); ``MatchRuleError`` naming the line."""
    import yaml

    rules = []
    for n, line in enumerate(lines, 1):
        where = f"line {n} ({line!r})"
        try:
            data = yaml.safe_load(line)
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc)
            raise MatchRuleError(f"{where}: not a YAML mapping ({problem}); quote a regular expression "
                                 "in single quotes: {replace: '[0-9]+', with: '<n>'}") from None
        rules.append(dataclasses.replace(parse_rule(data, where), origin=f"ini connic_match_rules, line {n}"))
    return tuple(rules)


# -- applying rules ----------------------------------------------------------


def as_data(request: ModelRequest) -> dict[str, object]:
    """The parts of a request that rules and digests see, as data (a deep copy)."""
    return copy.deepcopy({"model": request.model, "system": request.system_prompt,
                          "messages": request.messages,
                          "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters}
                                    for t in request.tools]})


#: how long the rules may take on one request, in all (seconds): a rule that backtracks is an
#: error naming it, never a hung session
RULES_BUDGET_S = 2.0


def normalise(request: ModelRequest, rules: Sequence[MatchRule]) -> ModelRequest:
    """``request`` with every rule applied in order (``request`` itself when there are none);
    ``MatchRuleError`` naming the rule when its regular expression runs past ``RULES_BUDGET_S``."""
    if not rules:
        return request
    data = as_data(request)
    deadline = Deadline(RULES_BUDGET_S)
    for rule in rules:
        try:
            _apply(data, rule, deadline)
        except PatternTimeout as exc:
            raise MatchRuleError(f"{rule.origin}.replace: {exc}") from None
    tools = [ToolSpec(str(t.get("name")), str(t.get("description")), _parameters(t.get("parameters")))
             if isinstance(t, Mapping) else ToolSpec(str(t), "", {}) for t in _items(data["tools"])]
    return dataclasses.replace(request, model=str(data["model"]), system_prompt=str(data["system"]),
                               messages=[_message(m) for m in _items(data["messages"])], tools=tools)


def _items(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _parameters(value: object) -> dict[str, object] | str | None:
    """A tool's parameters after the rules: its JSON schema (None: it has none), or the
    placeholder of a rule that replaced the schema whole."""
    if value is None:
        return None
    return {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else str(value)


def _message(value: object) -> dict[str, object]:
    if not isinstance(value, Mapping):
        raise MatchRuleError(f"a matching rule replaced a whole message by {value!r}; "
                             "ignore or replace a part of it (messages[*].content)")
    return {str(k): v for k, v in value.items()}


def _apply(data: dict[str, object], rule: MatchRule, deadline: Deadline) -> None:
    if rule.kind == "ignore":
        assert rule.path is not None
        _edit(data, rule.path, lambda _value: rule.placeholder)
    elif rule.path is None:
        for part in ("system", "messages"):
            data[part] = _substitute(data[part], rule, deadline)
    else:
        _edit(data, rule.path, lambda value: _substitute(value, rule, deadline))


def _substitute(value: object, rule: MatchRule, deadline: Deadline) -> object:
    """Every string in ``value`` (at any depth) with the rule's pattern replaced."""
    assert rule.pattern is not None
    if isinstance(value, str):
        return rule.pattern.sub(lambda _m: rule.placeholder, value, deadline)
    if isinstance(value, Mapping):
        return {k: _substitute(v, rule, deadline) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, rule, deadline) for v in value]
    return value


def _edit(value: object, path: Sequence[Segment], change: Callable[[object], object]) -> object:
    """``value`` with ``change`` applied to what ``path`` reaches (nothing when it reaches nothing)."""
    if not path:
        return change(value)
    if isinstance(value, str):  # walking on into a string: it is read as JSON, and written back
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return value
        if not isinstance(parsed, (Mapping, list)):
            return value
        return json.dumps(_edit(parsed, path, change), ensure_ascii=False, sort_keys=True)
    (kind, arg), rest = path[0], path[1:]
    if isinstance(value, MutableMapping):
        keys = [arg] if kind == "key" and arg in value else list(value) if kind == "each" else []
        for key in keys:
            value[key] = _edit(value[key], rest, change)
    elif isinstance(value, list):
        for index in _indexes(value, kind, arg):
            value[index] = _edit(value[index], rest, change)
    return value


def _indexes(value: list[object], kind: str, arg: SegmentArg) -> Iterator[int]:
    if kind == "index" and isinstance(arg, int) and -len(value) <= arg < len(value):
        yield arg % len(value)
    elif kind == "each":
        yield from range(len(value))
    elif kind == "where" and isinstance(arg, tuple):
        key, wanted = arg
        yield from (i for i, item in enumerate(value)
                    if isinstance(item, Mapping) and str(item.get(key)) == wanted)
