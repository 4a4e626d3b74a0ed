"""Cassettes: format, paths, replay, recording modes, digests, secrets (no network)."""

from __future__ import annotations

import asyncio
import builtins
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_connic.models import (
    CaseModels,
    CassetteError,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
    ToolSpec,
    cassette_path,
    first_difference,
    parse_cassette,
    request_fingerprint,
    safe_name,
)
from pytest_connic.models.cassette import load_cassette
from pytest_connic.models.cassette_paths import MAX_NAME_BYTES
from pytest_connic.models.divergence import ReplayDiverged
from pytest_connic.secrets import Masker, default_masker

TOOLS = {
    "add": ToolSpec("add", "Add two numbers", {"type": "object", "properties": {"a": {}, "b": {}}}),
    "sub": ToolSpec("sub", "Subtract", {"type": "object", "properties": {}}),
}


def req(
    agent: str = "calc",
    messages: list[dict[str, Any]] | None = None,
    tools: tuple[str, ...] = ("add",),
    system: str = "You add numbers.",
    model: str = "openai/gpt-4o-mini",
) -> ModelRequest:
    return ModelRequest(
        agent_name=agent,
        model=model,
        system_prompt=system,
        messages=messages if messages is not None else [{"role": "user", "content": "4 + 6?"}],
        tools=[TOOLS[t] for t in tools],
    )


def complete(model: Any, request: ModelRequest) -> ModelResponse:
    return asyncio.run(model.complete(request))


def write(tmp_path: Path, text: str, name: str = "case.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


class ScriptedLive:
    """A fake provider model: answers from a list, remembers requests."""

    def __init__(self, answers: list[ModelResponse]) -> None:
        self.answers = list(answers)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return self.answers.pop(0)


def no_live(agent: str) -> Any:
    raise AssertionError(f"a live model was requested for {agent}")


def case(path: Path, mode: str = "none", live: Any = no_live, masker: Masker | None = None, *,
         strict: bool = True) -> CaseModels:
    return CaseModels(path, mode=mode, live=live, masker=masker or Masker(), strict=strict)


SCRIPTED = """\
version: 1
runs:
  - turns:
      - tool_calls:
          - name: add
            arguments: {a: 4, b: 6}
      - content: '{"sum": 10}'
        usage: {input_tokens: 120, output_tokens: 9}
        cost: 0.5
    children:
      summarizer:
        - turns:
            - content: first summary
        - turns:
            - content: {summary: second}
  - turns:
      - content: '{"sum": 11}'
"""


# -- format ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("runs: [\n", ":2:1: invalid YAML"),
        ("", ":1:1: the cassette is empty"),
        ("version: 2\nruns: []\n", ":1:10: version: unsupported cassette version 2"),
        ("version: 1\n", "missing key 'runs'"),
        ("runs: []\n", ":1:7: runs: expected at least one run"),
        (
            "runs:\n  - turns:\n      - content: hi\n        tool_call: []\n",
            ":4:9: runs[0].turns[0].tool_call: unknown key 'tool_call'; did you mean 'tool_calls'?",
        ),
        (
            "runs:\n  - turns:\n      - usage: {input_tokens: 1}\n",
            ":3:9: runs[0].turns[0]: a turn needs 'content' (the answer) or 'tool_calls'",
        ),
        (
            "runs:\n  - turns: [{content: a}]\n  - turns:\n      - tool_calls:\n          - arguments: {}\n",
            ":5:13: runs[1].turns[0].tool_calls[0].name: expected a tool name, found nothing",
        ),
        (
            "runs:\n  - turns:\n      - content: a\n        usage: {input_tokens: -1}\n",
            ":4:31: runs[0].turns[0].usage.input_tokens: expected a token count",
        ),
        (
            "runs:\n  - children:\n      summarizer: {turns: []}\n",
            ":3:19: runs[0].children.summarizer: expected a list of invocations",
        ),
        (
            "runs:\n  - turns:\n      - tool_calls: [{name: add, arguments: [1]}]\n",
            ":3:45: runs[0].turns[0].tool_calls[0].arguments: expected a mapping of arguments, found a list",
        ),
        (
            "runs:\n  - turns: [{content: a}]\n    session:\n      history: [hello]\n",
            ":4:17: runs[0].session.history[0]: expected a message with a 'role', found str 'hello'",
        ),
        (
            "runs:\n  - turns: [{content: a}]\n    session: {histroy: []}\n",
            "runs[0].session",
        ),
    ],
)
def test_load_errors_are_located(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(CassetteError) as info:
        load_cassette(path)
    message = str(info.value)
    assert message.startswith(str(path) + ":")
    assert expected in message


def test_x_keys_are_ignored_and_content_mappings_become_json() -> None:
    cassette = parse_cassette(
        "x-note: hi\nruns:\n  - turns:\n      - content: {sum: 10}\n        x-why: hand\n"
    )
    assert cassette.runs[0].turns is not None
    assert cassette.runs[0].turns.turns[0].content == '{"sum": 10}'


# -- paths -------------------------------------------------------------------


HOSTILE = [
    "../../etc/passwd",
    "a/b\\c",
    "nul\x00byte",
    "ctrl\x1b[31m\n",
    ".hidden",
    "..",
    ".",
    "",
    'con:fused?*|<>"',
    "trailing dot.",
    "CON",
    "nul.txt",
    "x" * 1000,
    "日本語" * 100,
]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_case_names_stay_inside_the_cassette_dir(tmp_path: Path, name: str) -> None:
    base = tmp_path / "cassettes"
    path = cassette_path(base, "tests/sub/math.yaml", name)
    assert path.parent == base / "sub" / "math"
    file_name = path.name
    assert not set(file_name) & set('/\\\x00\n\x1b:?*|<>"')
    assert not file_name.startswith(".")
    assert file_name.split(".")[0].upper() not in {"CON", "NUL"}
    assert len(file_name.encode("utf-8")) <= MAX_NAME_BYTES + len(".yaml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("ok")  # the file system accepts it
    assert path.resolve().is_relative_to(base.resolve())


def test_path_rule_and_hostile_suite_paths(tmp_path: Path) -> None:
    assert cassette_path(tmp_path, "tests/math.yaml", "adds two") == tmp_path / "math" / "adds two.yaml"
    assert cassette_path(tmp_path, "tests/a/b.yaml", "c") == tmp_path / "a" / "b" / "c.yaml"
    evil = cassette_path(tmp_path, "tests/../../../evil.yaml", "..")
    assert evil.resolve().is_relative_to(tmp_path.resolve())


def test_long_names_stay_distinct() -> None:
    first, second = safe_name("y" * 300 + "1"), safe_name("y" * 300 + "2")
    assert first != second
    assert len(first.encode()) <= MAX_NAME_BYTES


# -- replay ------------------------------------------------------------------


def test_replay_with_tool_calls_and_children(tmp_path: Path) -> None:
    models = case(write(tmp_path, SCRIPTED)).for_run(0)
    root = models.model_for("calc", root=True)
    first = complete(root, req())
    assert first.content is None
    assert first.tool_calls == [ToolCallRequest("call_1_1", "add", {"a": 4, "b": 6})]
    second = complete(root, req())
    assert (second.content, second.input_tokens, second.output_tokens, second.cost) == (
        '{"sum": 10}',
        120,
        9,
        0.5,
    )
    assert second.model == "openai/gpt-4o-mini"
    for expected in ("first summary", '{"summary": "second"}'):
        child = models.model_for("summarizer", root=False)
        assert complete(child, req("summarizer", tools=())).content == expected
    assert models.finish(completed=True) == []
    assert models.notes == []


def test_run_i_replays_runs_i_modulo_len(tmp_path: Path) -> None:
    models = case(write(tmp_path, SCRIPTED))
    run3 = models.for_run(3)
    assert complete(run3.model_for("calc", root=True), req()).content == '{"sum": 11}'
    assert run3.finish(completed=True) == []


def test_running_out_of_turns(tmp_path: Path) -> None:
    path = write(tmp_path, SCRIPTED)
    run = case(path).for_run(1)
    model = run.model_for("calc", root=True)
    complete(model, req())
    with pytest.raises(CassetteError) as info:
        complete(model, req())
    assert str(info.value) == (
        f"{path}: runs[1].turns: the agent asked for model turn 2 of run 2 but the cassette has 1; "
        "the agent took more steps than recorded"
    )


def test_unused_turns_are_divergences_only_when_the_run_completed(tmp_path: Path) -> None:
    path = write(tmp_path, SCRIPTED)
    models = case(path)
    run = models.for_run(0)
    complete(run.model_for("calc", root=True), req())
    complete(run.model_for("summarizer", root=False), req("summarizer", tools=()))
    messages = run.finish(completed=True)
    assert messages == [
        (
            f"{path}: runs[0].turns: the agent completed run 1 after 1 of 2 recorded model turn(s); "
            "it took fewer steps than recorded"
        ),
        (
            f"{path}: runs[0].children.summarizer[1].turns: agent 'summarizer' was recorded with 1 turn(s) "
            "but run 1 never invoked it (invocation 2); the run took fewer steps than recorded"
        ),
    ]
    other = models.for_run(2)
    complete(other.model_for("calc", root=True), req())
    assert other.finish(completed=False) == []


def test_unknown_tool_names_the_offered_tools(tmp_path: Path) -> None:
    path = write(tmp_path, SCRIPTED)
    model = case(path).for_run(0).model_for("calc", root=True)
    with pytest.raises(CassetteError) as info:
        complete(model, req(tools=("sub",)))
    assert str(info.value) == (
        f"{path}: runs[0].turns[0].tool_calls[0]: the cassette calls tool 'add', "
        "but the request of 'calc' offers: sub"
    )


def test_child_without_entry_names_it(tmp_path: Path) -> None:
    run = case(write(tmp_path, SCRIPTED)).for_run(0)
    for _ in range(2):
        run.model_for("summarizer", root=False)
    third = run.model_for("summarizer", root=False)
    with pytest.raises(CassetteError, match=r"runs\[0\]: no entry children\.summarizer\[2\]: .*records 2"):
        complete(third, req("summarizer"))
    with pytest.raises(CassetteError, match=r"no entry children\.writer\[0\]"):
        complete(run.model_for("writer", root=False), req("writer"))


def test_missing_cassette_is_read_lazily(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "cassettes" / "missing.yaml"
    models = case(path)

    def no_files(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a file was opened")

    with monkeypatch.context() as patch:
        patch.setattr(builtins, "open", no_files)
        patch.setattr(Path, "read_text", no_files)
        run = models.for_run(0)
        model = run.model_for("calc", root=True)
        assert run.finish(completed=True) == []
    with pytest.raises(CassetteError) as info:
        complete(model, req())
    assert str(info.value) == (
        f"no cassette for this case: expected {path}; record one with --connic-record-mode=once "
        "(needs provider credentials) or write it by hand (docs/models.md)"
    )
    assert not path.exists()


def test_a_broken_cassette_fails_every_run_with_its_location(tmp_path: Path) -> None:
    path = write(tmp_path, "runs:\n  - turns: 3\n")
    models = case(path)
    for index in range(2):
        with pytest.raises(CassetteError, match=r":2:12: runs\[0\]\.turns: expected a list of turns"):
            complete(models.for_run(index).model_for("calc", root=True), req())


def test_an_unreadable_cassette_is_a_cassette_error(tmp_path: Path) -> None:
    path = tmp_path / "dir.yaml"
    path.mkdir()
    with pytest.raises(CassetteError, match="dir.yaml: the cassette is a directory"):
        complete(case(path).for_run(0).model_for("calc", root=True), req())


# -- recording ---------------------------------------------------------------


def answer(content: str | None = None, *calls: tuple[str, dict[str, Any]], tokens: int = 7) -> ModelResponse:
    tool_calls = [ToolCallRequest(f"prov_{n}", name, args) for n, (name, args) in enumerate(calls)]
    return ModelResponse(
        content=content, tool_calls=tool_calls, input_tokens=tokens, output_tokens=2, cost=0.25
    )


def play_run(models: CaseModels, index: int, *, child: bool = False) -> list[ModelResponse]:
    run = models.for_run(index)
    root = run.model_for("calc", root=True)
    out = [complete(root, req()), complete(root, req())]
    if child:
        out.append(complete(run.model_for("summarizer", root=False), req("summarizer", tools=())))
    assert run.finish(completed=True) == []
    return out


def test_once_records_a_missing_cassette_then_replays_it(tmp_path: Path) -> None:
    path = tmp_path / "c" / "case.yaml"
    lives: list[ScriptedLive] = []

    def factory(agent: str) -> ScriptedLive:
        if agent == "summarizer":
            lives.append(ScriptedLive([answer("summary\nline two")]))
        else:
            lives.append(ScriptedLive([answer(None, ("add", {"a": 1, "b": 2})), answer("3")]))
        return lives[-1]

    recorder = case(path, "once", factory)
    recorded = play_run(recorder, 0, child=True)
    assert recorder.save() == path
    text = path.read_text()
    assert "content: |-\n" in text  # multi-line strings as literal blocks
    assert "prov_0" not in text  # provider tool-call ids are not kept
    data = yaml.safe_load(text)
    first = data["runs"][0]["turns"][0]
    assert first["tool_calls"] == [{"name": "add", "arguments": {"a": 1, "b": 2}}]
    assert first["request"]["model"] == "openai/gpt-4o-mini"
    assert len(first["request"]["digest"]) == 64
    assert data["runs"][0]["children"]["summarizer"][0]["turns"][0]["content"] == "summary\nline two"
    replayed = play_run(case(path, "once"), 0, child=True)
    assert [r.content for r in replayed] == [r.content for r in recorded]
    assert replayed[0].tool_calls[0].arguments == {"a": 1, "b": 2}
    assert replayed[1].input_tokens == 7 and replayed[1].cost == 0.25


def test_once_replays_an_existing_cassette(tmp_path: Path) -> None:
    models = case(write(tmp_path, SCRIPTED), "once")
    assert complete(models.for_run(1).model_for("calc", root=True), req()).content == '{"sum": 11}'
    assert models.save() is None


def sum_live(run_index_box: list[int]) -> Any:
    def factory(agent: str) -> ScriptedLive:
        return ScriptedLive([answer(None, ("add", {"a": 1, "b": 1})), answer(f"new {run_index_box[0]}")])

    return factory


def test_new_runs_replays_known_runs_and_appends_new_ones(tmp_path: Path) -> None:
    path = write(tmp_path, "runs:\n  - turns:\n      - content: old 0\n")
    box = [0]
    models = case(path, "new_runs", sum_live(box))
    assert complete(models.for_run(0).model_for("calc", root=True), req()).content == "old 0"
    for index in (2, 1):
        box[0] = index
        assert play_run(models, index)[1].content == f"new {index}"
    models.save()
    runs = load_cassette(path).runs
    contents = [run.turns.turns[-1].content for run in runs if run.turns]
    assert contents == ["old 0", "new 1", "new 2"]


def test_all_re_records_everything(tmp_path: Path) -> None:
    path = write(tmp_path, "runs: [{turns: [{content: stale}]}, {turns: [{content: stale}]}]\n")
    box = [0]
    models = case(path, "all", sum_live(box))
    box[0] = 0
    play_run(models, 0)
    models.save()
    runs = load_cassette(path).runs
    assert len(runs) == 1 and runs[0].turns is not None
    assert [t.content for t in runs[0].turns.turns] == [None, "new 0"]


def test_all_ignores_a_broken_cassette(tmp_path: Path) -> None:
    path = write(tmp_path, "runs: [\n")
    models = case(path, "all", sum_live([0]))
    play_run(models, 0)
    assert models.save() == path
    assert load_cassette(path).runs


def test_recording_without_a_live_model_is_a_clear_error(tmp_path: Path) -> None:
    models = CaseModels(tmp_path / "x.yaml", mode="once", live=None, masker=Masker())
    with pytest.raises(CassetteError, match="needs to call a model provider.*pytest-connic\\[live\\]"):
        complete(models.for_run(0).model_for("calc", root=True), req())


def test_a_run_whose_model_call_failed_is_not_saved(tmp_path: Path) -> None:
    class Failing:
        async def complete(self, request: ModelRequest) -> ModelResponse:
            raise RuntimeError("provider down")

    models = case(tmp_path / "x.yaml", "once", lambda agent: Failing())
    with pytest.raises(RuntimeError):
        complete(models.for_run(0).model_for("calc", root=True), req())
    assert models.save() is None
    assert not (tmp_path / "x.yaml").exists()


def test_live_mode_never_touches_cassettes(tmp_path: Path) -> None:
    live = ScriptedLive([answer("live answer")])
    models = case(tmp_path / "absent.yaml", "live", lambda agent: live)
    model = models.for_run(0).model_for("calc", root=True)
    assert model is live
    assert complete(model, req()).content == "live answer"
    assert models.save() is None
    assert not (tmp_path / "absent.yaml").exists()


def test_concurrent_runs_in_threads_save_in_run_order(tmp_path: Path) -> None:
    path = tmp_path / "concurrent.yaml"

    class Echo:
        """Answers with the user message, after a random pause (runs finish out of order)."""

        async def complete(self, request: ModelRequest) -> ModelResponse:
            await asyncio.sleep(random.uniform(0, 0.02))
            return answer(str(request.messages[0]["content"]))

    models = case(path, "all", lambda agent: Echo())
    threads_seen: set[int] = set()

    def one_run(index: int) -> None:
        threads_seen.add(threading.get_ident())
        run = models.for_run(index)
        complete(
            run.model_for("calc", root=True), req(messages=[{"role": "user", "content": f"run {index}"}])
        )
        assert run.finish(completed=True) == []
        models.save()  # saving while other runs still record must be safe

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one_run, random.sample(range(16), 16)))
    assert len(threads_seen) > 1
    models.save()
    runs = load_cassette(path).runs
    assert [r.turns.turns[0].content for r in runs if r.turns] == [f"run {i}" for i in range(16)]


# -- digests -----------------------------------------------------------------


def conversation(tool_result: str = '{"sum": 10}') -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "4 + 6?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 4, "b": 6}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": tool_result},
    ]


def test_first_difference_names_the_first_differing_part() -> None:
    recorded = request_fingerprint(req(messages=conversation()))
    assert first_difference(recorded, req(messages=conversation())) is None
    assert first_difference(recorded, req(messages=conversation('{"sum": 11}'))) == "message 2 (tool) differs"
    assert (
        first_difference(recorded, req(messages=conversation(), system="Be terse."))
        == "system prompt differs"
    )
    assert (
        first_difference(recorded, req(messages=conversation(), tools=("add", "sub")))
        == "tools differ: added sub"
    )
    assert first_difference(recorded, req(messages=conversation(), tools=())) == "tools differ: removed add"
    longer = [*conversation(), {"role": "user", "content": "and?"}]
    assert first_difference(recorded, req(messages=longer)) == (
        "message 3 (user) is new: 1 more message(s) than recorded"
    )
    assert "model differs" in str(first_difference(recorded, req(messages=conversation(), model="openai/o3")))


def test_digests_ignore_tool_call_ids_and_argument_formatting() -> None:
    recorded = request_fingerprint(req(messages=conversation()))
    other = conversation()
    other[1]["tool_calls"][0]["id"] = "call_zzz"
    other[1]["tool_calls"][0]["function"]["arguments"] = '{"b":6,"a":4}'
    other[2]["tool_call_id"] = "call_zzz"
    assert first_difference(recorded, req(messages=other)) is None


def test_strict_replay_of_a_changed_prompt_fails_the_run(tmp_path: Path) -> None:
    """The recorded answers were made for another request: in strict replay (the default) the
    model call raises instead of answering."""
    fingerprint = request_fingerprint(req(messages=conversation()))
    data = {"version": 1, "runs": [{"turns": [{"content": "10", "request": fingerprint}]}]}
    path = write(tmp_path, yaml.safe_dump(data))
    run = case(path).for_run(0)
    with pytest.raises(ReplayDiverged) as info:
        complete(run.model_for("calc", root=True), req(messages=conversation("changed")))
    assert str(info.value).startswith(f"{path}: runs[0].turns[0]: the request of 'calc' in run 1 differs from "
                                      "the recorded one: message 2 (tool) differs; the recording keeps digests only")
    assert info.value.divergence.index == 2 and info.value.divergence.role == "tool"
    assert run.notes == []


def test_lenient_replay_of_a_changed_prompt_adds_a_note_not_a_failure(tmp_path: Path) -> None:
    fingerprint = request_fingerprint(req(messages=conversation()))
    data = {"version": 1, "runs": [{"turns": [{"content": "10", "request": fingerprint}]}]}
    path = write(tmp_path, yaml.safe_dump(data))
    models = case(path, strict=False)
    run = models.for_run(0)
    assert complete(run.model_for("calc", root=True), req(messages=conversation("changed"))).content == "10"
    expected = (
        f"{path}: runs[0].turns[0]: the request of 'calc' in run 1 differs from the recorded one: "
        "message 2 (tool) differs; the recording keeps digests only (an older version made it): re-record the "
        "case to see what changed and to let UUIDs, hex ids and times vary (docs/models.md, \"Replay you can "
        "trust\")"
    )
    assert run.notes == [expected]
    assert run.finish(completed=True) == []
    assert models.notes == run.notes
    same = models.for_run(1)
    complete(same.model_for("calc", root=True), req(messages=conversation()))
    assert same.notes == []


# -- secrets -----------------------------------------------------------------


def test_secrets_never_reach_a_cassette(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET123")
    masker = default_masker()
    monkeypatch.setenv("LATE_TOKEN", "late-secret-value")  # appears after the masker was made
    leaky = ScriptedLive(
        [
            answer(None, ("add", {"a": "sk-test-SECRET123", "note": "late-secret-value"})),
            answer("the key is sk-test-SECRET123"),
        ]
    )
    path = tmp_path / "secret.yaml"
    models = case(path, "once", lambda agent: leaky, masker)
    run = models.for_run(0)
    model = run.model_for("calc", root=True)
    secret_prompt = [{"role": "user", "content": "my key is sk-test-SECRET123 and UNIQUE-MARKER"}]
    complete(model, req(messages=secret_prompt))
    complete(model, req(messages=secret_prompt))
    models.save()
    text = path.read_text()
    assert "SECRET123" not in text and "late-secret-value" not in text
    # the request's text is kept (to say what changed in a replay), masked like the answers
    assert "content: my key is *** and UNIQUE-MARKER" in text
    assert "the key is ***" in text and "a: '***'" in text


def test_replay_mode_none_runs_many_runs_concurrently(tmp_path: Path) -> None:
    models = case(write(tmp_path, SCRIPTED))

    async def one(index: int) -> str | None:
        run = models.for_run(index)
        model = run.model_for("calc", root=True)
        response = await model.complete(req())
        while response.tool_calls:
            response = await model.complete(req())
        assert run.finish(completed=True) == []
        return response.content

    async def main() -> list[str | None]:
        return await asyncio.gather(*(one(i) for i in range(1, 8, 2)))

    assert asyncio.run(main()) == ['{"sum": 11}'] * 4


def test_a_session_section_round_trips(tmp_path: Path) -> None:
    from pytest_connic.models.cassette_write import cassette_to_data

    text = ("runs:\n  - turns: [{content: a}]\n    session:\n      key: ann\n      from: [first]\n"
            "      history: [{role: user, content: hi}]\n")
    cassette = load_cassette(write(tmp_path, text))
    start = cassette.runs[0].session
    assert start is not None and (start.agent, start.key, start.cases) == (None, "ann", ["first"])
    assert cassette_to_data(cassette)["runs"][0]["session"] == {
        "agent": None, "key": "ann", "from": ["first"], "history": [{"role": "user", "content": "hi"}]}
