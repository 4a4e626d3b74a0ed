"""What crosses between pytest's process and a worker: references, exceptions, words."""

from __future__ import annotations

import sys
import types
from pathlib import Path

from pytest_connic.execution.isolation.copyback import copy_back
from pytest_connic.execution.isolation.exceptions import RemoteUserError, decode_exception, encode_exception
from pytest_connic.execution.isolation.pool import _reference
from pytest_connic.execution.isolation.wire import EncodedException
from pytest_connic.project.located import safe_text
from pytest_connic.runtime.state import describe


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


def _module(tmp_path: Path, name: str, source: str) -> types.ModuleType:
    path = tmp_path / (name.replace(".", "/") + ".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, "utf-8")
    module = types.ModuleType(name)
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102
    return module


def test_a_project_function_in_sys_modules_is_named_by_module_and_qualname(tmp_path: Path) -> None:
    module = _module(tmp_path, "tools.wirecalc", "def add(a, b):\n    return a + b\nsquare = lambda x: x * x\n")
    sys.modules["tools.wirecalc"] = module
    try:
        assert _reference(module.add, tmp_path) == ("module", "tools.wirecalc", "add")
        assert _reference(module.square, tmp_path) is None  # a lambda runs in-process
        assert _reference(module.add, tmp_path / "elsewhere") is None  # outside the project
    finally:
        del sys.modules["tools.wirecalc"]


def test_a_fresh_builder_function_is_named_by_its_file() -> None:
    namespace: dict[str, object] = {"__name__": "_connic_builders_seed_7", "__file__": __file__}
    exec("def build(*args):\n    return 'x'\n", namespace)  # noqa: S102
    build = namespace["build"]
    assert _reference(build, Path(__file__).parent) == ("fresh", "_connic_builders_seed_7", __file__, "build")
    assert describe(build) == "builder 'seed' build()"


def test_closures_and_bound_methods_run_in_process(tmp_path: Path) -> None:
    def closure() -> None:
        pass

    assert _reference(closure, tmp_path) is None
    assert _reference("not a function".upper, tmp_path) is None


def test_an_exception_that_cannot_be_rebuilt_crosses_as_a_stand_in_of_the_same_name() -> None:
    encoded = EncodedException("_connic_builders_seed_1", "BuilderOnlyError", "BuilderOnlyError", "it broke")
    exc = decode_exception(encoded)
    assert isinstance(exc, RemoteUserError)
    assert type(exc).__name__ == "BuilderOnlyError" and str(exc) == "it broke"
    assert isinstance(decode_exception(encode_exception(ValueError("v"), "v")), ValueError)


def test_an_unprintable_exception_is_printed_safely() -> None:
    text = safe_text(Unprintable())
    assert text == "<unprintable Unprintable object>"
    exc = decode_exception(encode_exception(Unprintable(), text))
    assert str(exc) == text and type(exc).__name__ == "Unprintable"


def test_mutations_in_the_worker_are_copied_into_the_callers_objects() -> None:
    context: dict[str, object] = {"a": 1}
    items = [1]
    copy_back({0: {"a": 2, "b": 3}, 1: [1, 2]}, {}, (context, items), {})
    assert context == {"a": 2, "b": 3} and items == [1, 2]
    kw: dict[str, object] = {"old": True}
    copy_back({"context": {"new": True}}, {}, (), {"context": kw})
    assert kw == {"new": True}


def test_calls_in_flight_at_once_merge_their_changes_into_the_shared_context() -> None:
    # two calls of one model turn were sent the same context; each changed its own copy
    context: dict[str, object] = {"keep": 1, "gone": 0, "nested": {"a": 1}}
    sent = {"context": {"keep": 1, "gone": 0, "nested": {"a": 1}}}
    first = {"keep": 1, "gone": 0, "nested": {"a": 1, "b": 2}, "hooked": ["greet"], "first": True}
    second = {"keep": 1, "nested": {"a": 1}, "hooked": ["greet"], "second": True}

    copy_back({"context": first}, sent, (), {"context": context})
    copy_back({"context": second}, sent, (), {"context": context})

    assert context == {"keep": 1, "nested": {"a": 1, "b": 2}, "hooked": ["greet", "greet"],
                       "first": True, "second": True}


def test_describe_names_user_code_as_messages_do() -> None:
    def before() -> None:
        pass

    before.__module__ = "middleware.greeter"
    before.__qualname__ = "before"
    assert describe(before) == "middleware before of agent 'greeter'"
    before.__module__ = "tools.calc"
    before.__qualname__ = "add"
    assert describe(before) == "the tool `calc.add`"


def test_a_builders_own_timeout_error_is_not_its_bound_running_out() -> None:
    import asyncio

    from pytest_connic.execution import builders

    async def call(func: object, *args: object) -> object:
        raise TimeoutError("the database did not answer")

    async def slow(func: object, *args: object) -> object:
        await asyncio.sleep(60)
        return "never"

    module = types.SimpleNamespace(build=lambda *a: "x", cleanup=lambda *a: True)
    case = {"name": "c", "payload": None}
    for caller, expected in ((call, "builder build raised: TimeoutError: the database did not answer"),
                             (slow, "builder build timed out after 0.05s (timeout_s)")):
        try:
            asyncio.run(builders.build(caller, module, {}, case, timeout_s=0.05))  # type: ignore[arg-type]
        except builders.BuilderError as exc:
            assert str(exc) == expected
        else:
            raise AssertionError("no BuilderError")
    assert asyncio.run(builders.cleanup(call, module, {}, {}, case, timeout_s=0.05)) == (  # type: ignore[arg-type]
        "builder cleanup raised: the database did not answer")
    assert asyncio.run(builders.cleanup(slow, module, {}, {}, case, timeout_s=0.05)) == (  # type: ignore[arg-type]
        "builder cleanup timed out after 0.05s (timeout_s)")


def test_an_sdk_exception_whose_init_refuses_its_own_args_crosses_as_itself() -> None:
    # TransferCall(number) validates a phone number while its args hold a sentence: it crosses as
    # its class and state (its __init__ not called), so dispatch still recognises it
    from pytest_connic.project.sdk import TransferCall

    crossed = decode_exception(encode_exception(TransferCall("+4930123456789"), "text"))

    assert type(crossed) is TransferCall
    assert crossed.number == "+4930123456789"
    assert str(crossed) == str(TransferCall("+4930123456789"))
