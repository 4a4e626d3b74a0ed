"""The showcase project examples/order-desk stays green: every case of every suite passes offline."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_connic.models.base import CassetteError
from pytest_connic.models.cassette import parse_cassette

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "order-desk"


def _case_count(project: Path) -> int:
    """Cases in every suite (``tests/**/*.yaml``, Connic's discovery, no hidden paths)."""
    count = 0
    for suite in sorted((project / "tests").rglob("*.yaml")):
        if any(part.startswith(".") for part in suite.relative_to(project).parts):
            continue
        data = yaml.safe_load(suite.read_text("utf-8"))
        if data:
            count += len(data["tests"])
    return count


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_order_desk_example_passes_offline(pytester: pytest.Pytester) -> None:
    shutil.copytree(
        EXAMPLE,
        pytester.path,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"),
    )
    cases = _case_count(pytester.path)
    assert cases >= 10
    before = _snapshot(pytester.path / "cassettes")

    result = pytester.runpytest("-p", "no:cacheprovider")

    result.assert_outcomes(passed=cases)
    result.stdout.fnmatch_lines([f"{cases}/{cases} cases passed."])
    assert result.ret == 0
    # replay (the default record mode) never writes a cassette
    assert _snapshot(pytester.path / "cassettes") == before


BROKEN_LOOKUP = """    return _with_shipping(dict(order))


def _with_shipping(order):
    order["shipping_cost"] = order["shipping"]["cost"]
    return order
"""


def test_a_broken_tool_fails_every_case_that_calls_it_in_every_report(pytester: pytest.Pytester) -> None:
    """Replay you can trust (issue 38): ``lookup_order`` broken in a helper; every case whose
    recording calls it fails in the terminal, the exit code, JSON, JUnit, HTML and the Markdown
    summary, naming the tool, the error and its file; ``1 failed, 10 passed`` cannot happen."""
    shutil.copytree(EXAMPLE, pytester.path, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))
    tools = pytester.path / "tools" / "orders.py"
    tools.write_text(tools.read_text("utf-8").replace("    return dict(order)\n", BROKEN_LOOKUP), "utf-8")
    result = pytester.runpytest("-p", "no:cacheprovider", "--connic-json", "r.json", "--junitxml", "j.xml",
                                "--connic-html", "r.html", "--connic-summary", "s.md")
    cases = _case_count(pytester.path)
    result.assert_outcomes(failed=4, passed=cases - 4)
    assert result.ret == 1
    cause = "replay diverged: lookup_order now raises KeyError: 'shipping' at tools/orders.py:"
    report = json.loads((pytester.path / "r.json").read_text("utf-8"))
    failed = {c["test_name"]: c["failure_reason"] for c in report["cases"] if not c["passed"]}
    assert sorted(failed) == sorted(["reports the status of a shipped order", "refunds a damaged item",
                                     "escalates a refund above the auto-refund limit",
                                     "finds the order of a returning customer"])
    assert all(reason.startswith(cause) for reason in failed.values()), failed
    junit = (pytester.path / "j.xml").read_text("utf-8")
    assert junit.count(f'message="{cause}') == 4
    assert cause in (pytester.path / "r.html").read_text("utf-8")
    assert (pytester.path / "s.md").read_text("utf-8").count("now raises KeyError") == 4
    result.stdout.fnmatch_lines(["*FAILED tests/order-assistant.yaml::refunds a damaged item - replay diverged: *"])
    # the case replaying more runs than its cassette holds says so
    text = " ".join(line.strip() for line in result.stdout.lines)  # the line wraps at the terminal's width
    assert ("order-assistant::recommends in-stock headphones: 5 runs replayed from 3 recorded runs (copies, not "
            "independent runs" in text)


# ========== fuzzing the example project (folded from test_hardening_fuzz.py) ================================
# Fuzzing through the plugin: mutated agent YAML and mutated cassettes of the example project
# (``examples/order-desk``) run with plain pytest. Whatever a file holds, the session ends with
# located errors or ordinary verdicts: never INTERNALERROR, a hang, a traceback into plugin code,
# or a lost case.
#
# Bounded for CI (a few examples each, one in-process pytest run per example); ``fuzz/run.py``
# runs the same properties for longer (``CONNIC_FUZZ_EXAMPLES``, see ``fuzz/README.md``).

AGENT_FILES = sorted(p.relative_to(EXAMPLE).as_posix() for p in (EXAMPLE / "agents").glob("*.yaml"))
CASSETTES = sorted(p.relative_to(EXAMPLE).as_posix() for p in (EXAMPLE / "cassettes").rglob("*.yaml"))
EXAMPLES = int(os.environ.get("CONNIC_FUZZ_EXAMPLES", "6"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize="CONNIC_FUZZ_EXAMPLES" not in os.environ,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])
#: a hang fails the test
pytestmark = pytest.mark.timeout(60 + 30 * EXAMPLES)
#: a frame of plugin code in a traceback (``.../pytest_connic/collect.py:112``)
PLUGIN_FRAME = re.compile(r"pytest_connic[\\/][\w\\/]*\.py:\d+")
#: the first line of a case's failure report: ``tests/<suite>.yaml:<line>``
CASE_LOCATED = re.compile(r"^tests/[\w./-]+\.yaml:\d+")
#: one in-process session may take this long at most (each run of the example takes < 1 s)

# --- mutations of YAML text (shared by agents and cassettes)

TOKENS = [
    "\n", "\n  ", "  ", "- ", ": ", ":", "? ", ",", "{", "}", "[", "]", "'", '"', "|", ">-", "#", "---", "...",
    "~", "null", "true", "no", "1.0", "0", "-1", "1e400", "99999999999999999999999", "&a ", "*a", "<<: *a",
    "!!binary ", "!!set ", "!!str ", "!custom ", "!!python/object:os.system ", "\t", "\\", "ä", "\u2028",
    "\ufeff", "\x00", "x" * 300,
    # agent keys and values
    "type: tool", "type: sequential", "type: llm", "tools: [orders.lookup_order]", "tool_name: orders.lookup_order",
    "agents: [invoice-parser]", "max_iterations: 1", "timeout: 1", "output_schema: missing", "model: ",
    "system_prompt: '{payload} {context} {x'", "tools:\n  - orders.lookup_order: \"context.x ==\"",
    "approval:\n  tools: [orders.refund_order]", "guardrails:\n  input:\n    - type: custom\n      name: nope",
    "discoverable_tools: [catalog.search_products]", "retry_options: {attempts: 3}", "name: renamed",
    # cassette keys and values
    "version: 2", "runs: []", "turns:", "tool_calls:", "- name: lookup_order", "- name: nope", "name: ''",
    "arguments: '{not json'", "arguments: [1, 2]", "arguments: {order_id: 7}", "content: ", "content: {a: 1}",
    "usage: {input_tokens: -1}", "cost: -3", "children:", "request: {digest: x}", "model: other",
]


def _mutate_text(draw: st.DrawFn, text: str) -> str:
    """One to four edits: tokens, deletions, indentation, duplicated lines, values, aliases, nesting."""
    for _ in range(draw(st.integers(1, 4))):
        lines = text.splitlines(keepends=True) or [""]
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["token", "delete", "indent", "dedent", "duplicate", "value", "alias", "nest"]))
        line = lines[i]
        if op == "token":
            at = draw(st.integers(0, len(line)))
            line = line[:at] + draw(st.sampled_from(TOKENS)) + line[at:]
        elif op == "delete":
            start = draw(st.integers(0, len(text)))
            text = text[:start] + text[start + draw(st.integers(0, 30)):]
            continue
        elif op == "indent":
            line = " " * draw(st.integers(1, 4)) + line
        elif op == "dedent":
            line = line.lstrip(" ")
        elif op == "duplicate":
            line = line * draw(st.integers(2, 3))
        elif op == "value" and ": " in line:
            head = line.split(": ", 1)[0]
            value = draw(st.one_of(st.sampled_from(TOKENS), st.text(max_size=8).map(json.dumps),
                                   st.integers().map(str)))
            line = f"{head}: {value}\n"
        elif op == "alias":
            line = line.replace(": ", ": &v ", 1) + draw(st.sampled_from(["", "x-c: *v\n", "  <<: *v\n", "- *v\n"]))
        elif op == "nest":
            depth = draw(st.integers(1, 120))
            line = line.rstrip("\n") + " " + "[" * depth + "]" * depth + "\n"
        lines[i] = line
        text = "".join(lines)
    return text


JUNK = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**30), st.floats(), st.text(max_size=12),
                 st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))


def _mutate_cassette_data(draw: st.DrawFn, data: Any) -> Any:
    """Structural edits of a cassette: the malformed tool calls a model or a hand can produce."""
    runs = data.get("runs") if isinstance(data, dict) else None
    turns = [t for r in runs or [] if isinstance(r, dict) for t in r.get("turns") or [] if isinstance(t, dict)]
    calls = [c for t in turns for c in t.get("tool_calls") or [] if isinstance(c, dict)]
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["arguments", "name", "drop_name", "content", "drop_turn", "extra_turn",
                                   "usage", "children", "runs"]))
        if op in ("arguments", "name", "drop_name") and calls:
            call = draw(st.sampled_from(calls))
            if op == "arguments":
                call["arguments"] = draw(st.one_of(
                    st.sampled_from(["{not json", "[1, 2]", '{"order_id": "A-1001"}', "", "null"]), JUNK))
            elif op == "name":
                call["name"] = draw(st.one_of(st.sampled_from(["nope", "use_tool", "orders.lookup_order", ""]), JUNK))
            else:
                call.pop("name", None)
        elif op == "content" and turns:
            draw(st.sampled_from(turns))["content"] = draw(st.one_of(
                st.sampled_from(["[" * 3000 + "]" * 3000, '{"action": 1}', "\ud800", "x" * 100_000]), JUNK))
        elif op == "drop_turn" and turns and runs:
            run = draw(st.sampled_from([r for r in runs if isinstance(r, dict)] or [{}]))
            if run.get("turns"):
                run["turns"].pop(draw(st.integers(0, len(run["turns"]) - 1)))
        elif op == "extra_turn" and runs and isinstance(runs[0], dict):
            runs[0].setdefault("turns", []).insert(0, {"tool_calls": [{"name": "lookup_order",
                                                                       "arguments": {"order_id": "A-1"}}]})
        elif op == "usage" and turns:
            draw(st.sampled_from(turns))["usage"] = draw(st.one_of(
                st.fixed_dictionaries({"input_tokens": JUNK, "output_tokens": JUNK}), JUNK))
        elif op == "children" and runs and isinstance(runs[0], dict):
            runs[0]["children"] = draw(st.one_of(
                st.just({"invoice-summarizer": [{"turns": [{"content": "{}"}]}]}), JUNK))
        elif op == "runs" and isinstance(data, dict):
            data["runs"] = draw(st.one_of(st.just([]), st.just([None]), st.just([{}]), JUNK))
    return data


@st.composite
def mutated_agent(draw: st.DrawFn) -> tuple[str, str]:
    rel = draw(st.sampled_from(AGENT_FILES))
    return rel, _mutate_text(draw, (EXAMPLE / rel).read_text("utf-8"))


@st.composite
def mutated_cassette(draw: st.DrawFn) -> tuple[str, str]:
    rel = draw(st.sampled_from(CASSETTES))
    text = (EXAMPLE / rel).read_text("utf-8")
    if draw(st.booleans()):
        data = _mutate_cassette_data(draw, yaml.safe_load(text))
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    else:
        text = _mutate_text(draw, text)
    return rel, text


# --- running and judging one session


class Session:
    """The example project, copied fresh for each Hypothesis example, run in-process."""

    def __init__(self, pytester: pytest.Pytester) -> None:
        self.pytester = pytester
        self.count = 0

    def run(self, files: dict[str, str]) -> tuple[pytest.RunResult, Path]:
        self.count += 1
        root = self.pytester.path / f"example{self.count}"
        shutil.copytree(EXAMPLE, root)
        for rel, text in files.items():
            (root / rel).write_bytes(text.encode("utf-8", "surrogatepass"))
        result = self.pytester.runpytest(
            str(root), "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:timeout",
            "--continue-on-collection-errors", "--connic-json", str(root / "report.json"), "-q",
        )
        return result, root


@pytest.fixture
def session(pytester: pytest.Pytester) -> Session:
    return Session(pytester)


def assert_clean(result: pytest.RunResult, root: Path) -> dict[str, Any]:
    """No INTERNALERROR, no traceback into plugin code; every error located; every case reported."""
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text, text[-3000:]
    assert "Traceback (most recent call last)" not in text, text[-3000:]
    assert not PLUGIN_FRAME.search(text), text[-3000:]
    assert "internal error in pytest-connic" not in text, text[-3000:]
    assert result.ret in (0, 1), (result.ret, text[-3000:])
    for report in result.reprec.getreports("pytest_collectreport"):  # type: ignore[attr-defined]
        if report.failed:
            message = report.longreprtext
            # a file, or an agent by name (the SDK's own wording for an agent that fails to resolve)
            assert re.search(r"agents/[\w./-]+\.yaml|tests/[\w./-]+\.yaml|unknown agent|[Aa]gent '[^']+'", message), message
    ran = []
    for report in result.reprec.getreports("pytest_runtest_logreport"):  # type: ignore[attr-defined]
        if report.when == "call" or (report.when == "setup" and report.failed):
            ran.append(report.nodeid)
        if report.failed:
            assert CASE_LOCATED.match(report.longreprtext), report.longreprtext[:2000]
    report_json = json.loads((root / "report.json").read_text("utf-8"))
    reported = {case["nodeid"] for case in report_json["cases"]}
    assert set(ran) <= reported, f"cases missing from the JSON report: {set(ran) - reported}"
    return report_json


# --- properties


@FUZZ
@given(mutation=mutated_agent())
def test_mutated_agent_yaml_ends_in_located_errors_or_verdicts(session: Session, mutation: tuple[str, str]) -> None:
    rel, text = mutation
    result, root = session.run({rel: text})
    assert_clean(result, root)


@FUZZ
@given(mutation=mutated_cassette())
def test_mutated_cassettes_end_in_located_errors_or_verdicts(session: Session, mutation: tuple[str, str]) -> None:
    rel, text = mutation
    result, root = session.run({rel: text})
    report = assert_clean(result, root)
    try:
        parse_cassette(text, rel)
    except CassetteError as exc:
        # a cassette that does not load fails its case with the loader's located message
        suite, case = rel.removeprefix("cassettes/").removesuffix(".yaml").split("/", 1)
        (failed,) = [c for c in report["cases"] if c["test_name"] == case and c["suite"] == f"tests/{suite}.yaml"]
        assert not failed["passed"]
        location = str(exc).split(": ", 1)[0]
        assert re.search(r":\d+:\d+$", location), str(exc)
        assert location.rsplit(":", 2)[0].endswith(rel), str(exc)


def test_the_unmutated_example_passes(session: Session) -> None:
    """The baseline the properties start from: every case of the example passes."""
    result, root = session.run({})
    report = assert_clean(result, root)
    assert result.ret == 0 and len(report["cases"]) == 11 and all(c["passed"] for c in report["cases"])
