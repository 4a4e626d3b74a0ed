"""Builders (spec §4.3), without pytest: builder and mocks module paths, a fresh module for every
load, files merged with the built payload, and Connic's cleanup verdicts."""

from __future__ import annotations

import asyncio
import types
from pathlib import Path

import pytest

from pytest_connic.execution import builders
from pytest_connic.runtime.mocks import ModuleLoadError

# --------------------------------------------------------------------------- unit


def test_builder_and_mocks_paths_accept_the_py_suffix(tmp_path: Path) -> None:
    assert builders.builder_path(tmp_path, "seed") == tmp_path / "tests" / "builders" / "seed.py"
    assert builders.builder_path(tmp_path, "seed.py") == tmp_path / "tests" / "builders" / "seed.py"
    assert builders.mocks_path(tmp_path, "m.py") == tmp_path / "tests" / "mocks" / "m.py"


def test_every_load_is_a_new_module_object(tmp_path: Path) -> None:
    path = tmp_path / "tests" / "builders" / "seed.py"
    path.parent.mkdir(parents=True)
    path.write_text("STATE = []\ndef build(*a):\n    STATE.append(1)\n    return len(STATE)\n")
    first, second = builders.load_builder(tmp_path, "seed"), builders.load_builder(tmp_path, "seed")
    assert first is not second
    assert first.build() == 1 and first.build() == 2 and second.build() == 1
    path.write_text("x = 1\n")
    with pytest.raises(ModuleLoadError, match=r"tests/builders/seed.py defines no build\(\) function"):
        builders.load_builder(tmp_path, "seed")


@pytest.mark.parametrize(
    "built, fixtures, payload, rest",
    [
        ({"a": 1, "files": [{"name": "b"}]}, [{"name": "y"}], {"a": 1, "files": [{"name": "b"}, {"name": "y"}]}, []),
        ({"a": 1}, [{"name": "y"}], {"a": 1}, [{"name": "y"}]),
        ("text", [{"name": "y"}], "text", [{"name": "y"}]),
    ],
)
def test_merge_files_puts_the_builders_files_first(built: object, fixtures: list[dict[str, str]], payload: object,
                                                  rest: list[dict[str, str]]) -> None:
    assert builders.merge_files(built, fixtures) == (payload, rest)


@pytest.mark.parametrize(
    "cleanup_source, verdict",
    [
        ("def cleanup(run, context, args):\n    return None\n", None),
        ("async def cleanup(run, context, args):\n    return True\n", None),
        ("def cleanup(run, context, args):\n    return False\n", "builder cleanup returned False"),
        ("def cleanup(run, context, args):\n    return 'ok'\n", "builder cleanup must return bool or None, got str"),
        ("def cleanup(run, context, args):\n    return 0\n", "builder cleanup must return bool or None, got int"),
        ("def cleanup(run, context, args):\n    raise ValueError('gone')\n", "builder cleanup raised: gone"),
        ("def cleanup(run, context, args):\n    raise KeyError\n", "builder cleanup raised: KeyError"),
        ("cleanup = None\n", None),
    ],
)
def test_cleanup_verdicts(cleanup_source: str, verdict: str | None) -> None:
    module = types.ModuleType("b")
    exec(cleanup_source, vars(module))  # noqa: S102  (the module under test, from the table above)

    async def call(func, *args):  # type: ignore[no-untyped-def]
        result = func(*args)
        return await result if asyncio.iscoroutine(result) else result

    assert asyncio.run(builders.cleanup(call, module, {}, {}, {"builder_args": None})) == verdict
