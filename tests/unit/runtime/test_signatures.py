"""What a user function's signature accepts (``runtime/signatures.py``): how many positional
arguments a hook or middleware can take, and whether it declares ``context``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest

from pytest_connic.runtime.signatures import accepts_positional, takes_context


def one(content): ...
def two(content, context): ...
def two_with_default(content, context=None): ...
def star(*args): ...
def keyword_only(content, *, context): ...
def positional_only(content, context, /): ...
def kwargs_only(**kwargs): ...


@pytest.mark.parametrize(("func", "count", "accepts"), [
    (one, 1, True), (one, 2, False),
    (two, 2, True), (two, 3, False),
    (two_with_default, 2, True),
    (star, 5, True),  # *args takes any number
    (keyword_only, 1, True), (keyword_only, 2, False),  # a keyword-only context is not positional
    (positional_only, 2, True),
    (kwargs_only, 1, False),
    (partial(two, "bound"), 1, True), (partial(two, "bound"), 2, False),
    (print, 3, True),  # a builtin with *args
])
def test_accepts_positional(func: Callable[..., object], count: int, accepts: bool) -> None:
    assert accepts_positional(func, count) is accepts


def test_a_callable_without_a_signature_is_given_the_benefit_of_the_doubt() -> None:
    class NoSignature:
        __signature__ = "not a signature"  # inspect.signature raises TypeError

        def __call__(self, *args: object) -> None: ...

    assert accepts_positional(NoSignature(), 7) is True
    assert takes_context(NoSignature()) is False


@pytest.mark.parametrize(("func", "takes"), [
    (one, False), (two, True), (two_with_default, True), (keyword_only, True), (star, False), (kwargs_only, False),
])
def test_takes_context_only_for_a_parameter_named_context(func: Callable[..., object], takes: bool) -> None:
    assert takes_context(func) is takes
