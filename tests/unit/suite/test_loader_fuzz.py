"""Fuzzing the suite loader: whatever a file holds, ``load_suite`` returns a ``Suite`` (cases
possibly carrying a located ``error``), ``None`` (an empty document), or raises ``SuiteError``
whose every line starts with ``tests/<file>:line:column:`` — never any other exception, so that
collection never ends in INTERNALERROR or a traceback into plugin code.

Inputs: random text, YAML token soup, corpus files mutated (keys, values, indentation, inserted
tokens, anchors and aliases, deep nesting), and random suites built from Connic's keys — for
those, the verdict must also equal Connic's. Plus targeted bounds: alias and merge-key bombs,
oversized and deeply nested documents, recursive aliases.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from connic import test_schema as connic_schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_connic.suite.loader import SuiteError, load_suite
from pytest_connic.yamlpos import MAX_BYTES, MAX_DEPTH, YamlError, load_with_positions

CORPUS = Path(__file__).resolve().parents[2] / "corpus"
SEEDS = [p.read_text("utf-8") for p in sorted(CORPUS.glob("*/*.yaml")) if p.stat().st_size < 4000]
LOCATED = re.compile(r"tests/fuzz\.yaml:(\d+):(\d+): \S")
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz")
    (root / "agents").mkdir()
    (root / "tests").mkdir()
    return root


def load(project: Path, content: str | bytes) -> tuple[str, list[str]]:
    """Load ``content`` as ``tests/fuzz.yaml``; check the outcome's shape; return the verdict."""
    path = project / "tests" / "fuzz.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
    try:
        suite = load_suite(path, project)
    except SuiteError as exc:
        assert_located(str(exc))
        return "reject", [str(exc)]
    if suite is None:
        return "skip", []
    errors = [case.error for case in suite.cases if case.error is not None]
    for error in errors:
        assert_located(error)
    for case in suite.cases:
        assert (case.error is None) == (case.resolved is not None and case.compiled is not None)
    return ("reject" if errors else "accept"), errors


def assert_located(message: str) -> None:
    lines = message.splitlines()
    assert lines
    assert LOCATED.match(lines[0]), f"not located: {lines[0]!r}"
    for line in lines[1:]:  # an expression's echo and its caret are indented under their message
        assert LOCATED.match(line) or line.startswith("    "), f"not located: {line!r}"


# --- strategies

TOKENS = [
    "tests:", "defaults:", "name: ", "payload: ", "runs: ", "files: ", "builder: ", "agent: ",
    "expected_tool_calls:", "expected_child_agents:", "approval_decisions:", "x-note: ",
    "\n", "\n  ", "\n    ", "  ", "- ", "-", ": ", ":", "? ", ",", "{", "}", "[", "]", "'", '"', "|", ">-",
    "#", "---", "...", "%YAML 1.1\n", "\t", "~", "null", "true", "yes", "1.0", "0", "101", "-1",
    "&a ", "*a", "&b ", "*b", "<<: ", "<<: *a", "!!binary ", "!!set ", "!!omap ", "!!str ", "!case ",
    "!!python/object:os.system ", "calc.add", "output.x == 1", "len(output)", "\\", "ä", "\u2028", "\x85",
    "\r\n", "\ufeff", "\x00", "\x07", "a" * 121,
]


@st.composite
def token_soup(draw: st.DrawFn) -> str:
    return "".join(draw(st.lists(st.sampled_from(TOKENS), max_size=40)))


def _insert(text: str, at: int, piece: str) -> str:
    return text[:at] + piece + text[at:]


@st.composite
def mutated_corpus(draw: st.DrawFn) -> str:
    """A corpus file with one to four edits: tokens, values, keys, indentation, aliases, nesting."""
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        lines = text.splitlines(keepends=True) or [""]
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["token", "delete", "indent", "dedent", "duplicate", "value", "key", "alias",
                                   "nest"]))
        line = lines[i]
        if op == "token":
            line = _insert(line, draw(st.integers(0, len(line))), draw(st.sampled_from(TOKENS)))
        elif op == "delete":
            a = draw(st.integers(0, len(text)))
            text = text[:a] + text[a + draw(st.integers(0, 20)) :]
            continue
        elif op == "indent":
            line = " " * draw(st.integers(1, 4)) + line
        elif op == "dedent":
            line = line[draw(st.integers(1, 4)) :] if line.startswith(" ") else line
        elif op == "duplicate":
            line = line * 2
        elif op == "value" and ": " in line:
            head = line.split(": ", 1)[0]
            value = draw(st.one_of(st.sampled_from(TOKENS), st.text(max_size=8).map(repr), st.integers().map(str)))
            line = f"{head}: {value}\n"
        elif op == "key" and ":" in line:
            key, rest = line.split(":", 1)
            line = draw(st.sampled_from(["", "x-", "_"])) + key.strip(" -")[::-1] + ":" + rest
            line = " " * (len(key) - len(key.lstrip(" -"))) + line
        elif op == "alias":
            line = line.replace(": ", ": &v ", 1) + draw(st.sampled_from(["", "    - *v\n", "x-c: *v\n", "  <<: *v\n"]))
        elif op == "nest":
            depth = draw(st.integers(1, 80))
            line = line.rstrip("\n") + " " + "[" * depth + "]" * depth + "\n"
        lines[i] = line
        text = "".join(lines)
    return text


JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 200), st.floats(), st.text(max_size=6),
    st.lists(st.integers(0, 3), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(0, 3), max_size=2),
)
INT = st.one_of(st.integers(-2, 4000), st.sampled_from(["5", " 1_0 ", "101", "0", "5.0", "x", "1e2"]), JUNK)
BOOL = st.one_of(st.booleans(), st.sampled_from(["yes", "on", "0", "Off", "maybe", " yes"]), st.integers(-1, 2), JUNK)
REF = st.one_of(st.sampled_from(["m", "m.py", "a/b", "..x", "a..b", "ä", ".env", "", "a.tar.gz", "a b"]), JUNK)
EXPR = st.one_of(st.sampled_from(["context.x == 1", "true"]), JUNK)  # compiles wherever an expression may be
NAME = st.one_of(st.sampled_from(["a", "b", "A", "", "n" * 120, "n" * 121]), JUNK)
TOOL_CALL = st.one_of(st.sampled_from(["calc.add", ""]), st.dictionaries(st.sampled_from(["calc.add", ""]), EXPR,
                                                                          max_size=2), JUNK)
APPROVAL = st.one_of(
    st.fixed_dictionaries(
        {"tool": st.one_of(st.sampled_from(["t", " "]), JUNK)},
        optional={"decision": st.one_of(st.sampled_from(["approve", "reject", "timeout", "approved"]), JUNK),
                  "params": EXPR, "reason": st.one_of(st.text(max_size=3), JUNK),
                  "response": st.one_of(st.sampled_from(["123", " "]), JUNK), "note": JUNK},
    ),
    JUNK,
)


def _lists(item: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(item, max_size=3), JUNK)


def _children(depth: int) -> st.SearchStrategy[Any]:
    fields: dict[str, st.SearchStrategy[Any]] = {
        "expected_triggered": INT, "expected_payload": EXPR, "expected_result": EXPR,
        "expected_tool_calls": _lists(TOOL_CALL), "expected_tool_call_order": _lists(st.one_of(NAME, JUNK)),
        "expected_no_tool_calls": _lists(st.one_of(NAME, JUNK)),
    }
    if depth:
        fields["expected_child_agents"] = _children(depth - 1)
    child = st.one_of(st.fixed_dictionaries({}, optional=fields), JUNK)
    return st.one_of(st.dictionaries(st.sampled_from(["summarizer", "x-child", ""]), child, max_size=2), JUNK)


CASE = st.fixed_dictionaries(
    {"name": NAME},
    optional={
        "payload": st.one_of(st.sampled_from(["", "x", '{"a": 1}']), JUNK), "builder": REF, "mocks": REF,
        "files": _lists(REF), "builder_args": st.one_of(st.dictionaries(st.text(max_size=4), JUNK, max_size=2), JUNK),
        "runs": INT, "success_threshold": INT, "timeout_s": INT, "strict_mocks": BOOL, "strict_hook_mocks": BOOL,
        "strict_approval_decisions": BOOL, "approval_decisions": _lists(APPROVAL), "expected_result": EXPR,
        "expected_tool_calls": _lists(TOOL_CALL), "expected_tool_call_order": _lists(st.one_of(NAME, JUNK)),
        "expected_no_tool_calls": _lists(st.one_of(NAME, JUNK)), "expected_child_agents": _children(2),
    },
)
SUITE = st.fixed_dictionaries(
    {"tests": st.one_of(st.lists(st.one_of(CASE, JUNK), max_size=3), JUNK)},
    optional={
        "version": st.one_of(st.just("1.0"), JUNK), "agent": st.one_of(st.just("demo"), JUNK),
        "defaults": st.one_of(st.fixed_dictionaries({}, optional={"runs": INT, "timeout_s": INT, "mocks": REF,
                                                                  "strict_mocks": BOOL}), JUNK),
    },
)


def sdk_verdict(data: Any) -> str:
    if data is None:
        return "skip"
    try:
        connic_schema.TestFile(**data)
    except Exception:  # noqa: BLE001 - connic test turns any exception into a suite error
        return "reject"
    return "accept"


# --- properties


@FUZZ
@given(text=st.one_of(st.text(max_size=200), token_soup()))
def test_random_text_never_escapes_as_another_exception(project: Path, text: str) -> None:
    load(project, text)


@FUZZ
@given(content=st.binary(max_size=100))
def test_random_bytes_never_escape_as_another_exception(project: Path, content: bytes) -> None:
    load(project, content)


@FUZZ
@given(text=mutated_corpus())
def test_mutated_corpus_files_never_escape_as_another_exception(project: Path, text: str) -> None:
    load(project, text)


@FUZZ
@given(data=SUITE, flow=st.booleans())
def test_random_suites_get_connic_verdict(project: Path, data: dict[str, Any], flow: bool) -> None:
    """Suites of Connic's keys (expressions that compile): pytest-connic's verdict is Connic's."""
    text = yaml.safe_dump(data, default_flow_style=flow, allow_unicode=True, sort_keys=False)
    verdict, errors = load(project, text)
    assert verdict == sdk_verdict(yaml.safe_load(text)), errors


def same(a: Any, b: Any) -> bool:
    """Equality that treats NaN as equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


@FUZZ
@given(text=st.one_of(token_soup(), mutated_corpus(), st.text(max_size=100)))
def test_yaml_loader_returns_what_safe_load_returns(text: str) -> None:
    """``load_with_positions`` is ``yaml.safe_load`` (what Connic uses) plus positions and bounds."""
    try:
        expected = yaml.safe_load(text)
        ok = True
    except (yaml.YAMLError, RecursionError):
        ok = False
    try:
        data, positions = load_with_positions(text)
    except YamlError as exc:
        assert exc.line is not None and exc.line >= 1 and exc.column is not None and exc.column >= 1
        bounded = "too large" in exc.message or "too deeply" in exc.message
        assert not ok or bounded, f"safe_load accepts what the loader refuses: {exc.message}"
        return
    assert ok, "the loader accepts what safe_load refuses"
    assert same(data, expected)
    n_lines = sum(text.count(c) for c in "\n\r\x85\u2028\u2029") + 2  # PyYAML's line breaks
    for line, column in [*positions.values.values(), *positions.keys.values()]:
        assert 1 <= line <= n_lines and column >= 1


# --- targeted bounds


def _refused(project: Path, text: str, words: str) -> str:
    verdict, (message,) = load(project, text)
    assert verdict == "reject" and words in message, message
    return message


def test_alias_bomb_is_refused_fast(project: Path) -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    bomb = "\n".join(lines) + "\ntests:\n  - name: a\n    payload: x\n    builder_args: {boom: *a9}\n"
    message = _refused(project, bomb, "document too large")
    assert "after alias expansion" in message


MERGE_LEVELS = ", ".join(["&m0 {k: v}"] + [f"&m{i} {{<<: [*m{i - 1}, *m{i - 1}]}}" for i in range(1, 41)])


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(f"tests:\n  - <<: [{MERGE_LEVELS}]\n    name: a\n    payload: x\n", id="in-a-case"),
        pytest.param(f"x-omap: !!omap [a: {{<<: [{MERGE_LEVELS}]}}]\ntests: []\n", id="inside-omap"),
    ],
)
def test_merge_key_bomb_is_refused_fast(project: Path, text: str) -> None:
    """Each level merges the previous one twice; PyYAML would copy 2**40 pairs before building."""
    _refused(project, text, "merge keys (<<) expand to more than")


def test_merge_key_that_includes_itself_is_refused(project: Path) -> None:
    _refused(project, "x-base: &b\n  k: v\n  <<: *b\ntests: []\n", "tests/fuzz.yaml")


def test_document_over_ten_megabytes_is_refused(project: Path) -> None:
    message = _refused(project, "# " + "x" * MAX_BYTES + "\ntests: []\n", "file too large")
    assert message.startswith("tests/fuzz.yaml:1:1: ")


def test_size_is_counted_in_bytes_not_characters(project: Path) -> None:
    text = "# " + "ä" * (MAX_BYTES // 2 + 1) + "\n"  # fewer characters than the limit, more bytes
    assert len(text) < MAX_BYTES
    _refused(project, text, "file too large")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("tests: " + "[" * 1000 + "]" * 1000 + "\n", id="flow-1000"),
        pytest.param("tests:\n" + "".join(" " * i + "- \n" for i in range(1, 1001)), id="block-1000"),
        pytest.param("tests:\n" + "".join(" " * i + "k:\n" for i in range(1, 1001)), id="mapping-1000"),
        pytest.param("x-deep: " + "{a: " * 1000 + "1" + "}" * 1000 + "\ntests: []\n", id="x-key-1000"),
    ],
)
def test_nesting_a_thousand_deep_is_refused_without_recursion_error(project: Path, text: str) -> None:
    message = _refused(project, text, "nested too deeply")
    assert f"more than {MAX_DEPTH} levels" in message


def test_nesting_far_past_the_c_stack_does_not_crash_the_process() -> None:
    """libyaml's composer recurses in C: 100,000 levels would crash the interpreter (SIGSEGV)."""
    code = (
        "from pytest_connic.yamlpos import YamlError, load_with_positions\n"
        "try:\n    load_with_positions('[' * 100_000 + ']' * 100_000)\n"
        "except YamlError as exc:\n    print('refused:', exc.message, exc.line, exc.column)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("refused: document nested too deeply"), done.stdout


@pytest.mark.parametrize(
    "text",
    [
        "tests: &a [*a]\n",
        "x-loop: &a [*a]\ntests:\n  - name: a\n    payload: x\n",
        "tests:\n  - name: a\n    payload: x\n    builder: b\n    builder_args: &a {self: *a}\n",
    ],
)
def test_recursive_alias_is_refused(project: Path, text: str) -> None:
    _refused(project, text, "nested too deeply")


def test_text_that_is_not_utf8_is_refused_with_location(project: Path) -> None:
    verdict, (message,) = load(project, b"tests:\n  - name: \xff\xfe\n")
    assert verdict == "reject" and message.startswith("tests/fuzz.yaml:2:11: not UTF-8 text")


def test_crlf_line_endings_give_the_same_locations(project: Path) -> None:
    text = (CORPUS / "invalid" / "second_case_invalid.yaml").read_text("utf-8")
    assert load(project, text.replace("\n", "\r\n")) == load(project, text)


@st.composite
def alias_graph(draw: st.DrawFn) -> str:
    """Anchored sequences and mappings of aliases to earlier anchors, scalars of every kind, nested
    lists, and now and then a cycle, a merge key or a tag the builder constructs its own way."""
    scalar = st.sampled_from(["lol", "1", "2.5", "true", "~", "!!int 3", "!!binary aGk=", "'q'", "0x1F"])
    lines: list[str] = []
    for i in range(draw(st.integers(1, 7))):
        refs = [f"*a{j}" for j in range(i)]
        if draw(st.integers(0, 9)) == 0:
            refs.append(f"*a{i}")  # a cycle: the node inside its own value
        items = draw(st.lists(st.one_of(scalar, st.sampled_from(refs)) if refs else scalar, min_size=0, max_size=6))
        nest = draw(st.integers(0, 4))
        items = [("[" * nest) + item + ("]" * nest) for item in items]
        kind = draw(st.sampled_from(["seq", "map", "merge", "set"]))
        if kind == "seq":
            body = "[" + ", ".join(items) + "]"
        elif kind == "map" or not refs:
            body = "{" + ", ".join(f"k{n}: {item}" for n, item in enumerate(items)) + "}"
        elif kind == "merge":
            body = "{<<: " + draw(st.sampled_from(refs)) + ", " + ", ".join(f"m{n}: {item}" for n, item in enumerate(items)) + "}"
        else:
            body = "!!set {" + ", ".join(f"s{n}" for n in range(len(items))) + "}"
        lines.append(f"a{i}: &a{i} {body}")
    return "\n".join(lines) + "\n"


@settings(max_examples=300, deadline=None)
@given(text=alias_graph(), nodes=st.integers(3, 80), depth=st.integers(2, 8))
def test_the_bomb_check_refuses_what_building_refuses_where_it_refuses_it(text: str, nodes: int, depth: int) -> None:
    """``_refuse_bombs`` counts a plain alias graph instead of building it: on any graph, with
    bounds small enough to be reached, the result is what building alone gives, to the column."""
    from pytest_connic import yamlpos

    def outcome() -> object:
        try:
            return load_with_positions(text)[0]
        except YamlError as exc:
            return exc.message, exc.line, exc.column
        except (yaml.YAMLError, ValueError, TypeError) as exc:  # what safe_load itself raises, the same both ways
            return type(exc).__name__

    with pytest.MonkeyPatch.context() as bounds:
        bounds.setattr(yamlpos, "MAX_NODES", nodes)
        bounds.setattr(yamlpos, "MAX_DEPTH", depth)
        checked = outcome()
        bounds.setattr(yamlpos, "_refuse_bombs", lambda node, loader: None)
        built = outcome()
    assert same(checked, built)


def test_an_alias_bomb_is_refused_without_building_a_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """9 levels of 9 aliases: 81 nodes, 9**9 values once built; refused from the graph alone, at the
    value that is one too many: the last ``lol`` of ``b0``, reached through the aliases of ``b6``."""
    from pytest_connic import yamlpos

    lines = ["b0: &b0 {" + ", ".join(f"k{j}: lol" for j in range(9)) + "}"]
    lines += [f"b{i}: &b{i} {{{', '.join(f'k{j}: *b{i - 1}' for j in range(9))}}}" for i in range(1, 9)]
    monkeypatch.setattr(yamlpos._Builder, "build", lambda *args: pytest.fail("built"))
    with pytest.raises(YamlError) as refused:
        load_with_positions('version: "1.0"\n' + "\n".join(lines) + "\n")
    assert (refused.value.message, refused.value.line, refused.value.column) == (
        "document too large: more than 200000 values (after alias expansion)", 2, 77)
