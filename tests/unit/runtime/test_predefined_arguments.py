"""A predefined tool called with an argument it does not take says so in the tool's name (the name
the user wrote in the agent's ``tools:``), with the arguments it takes: not in the name of the
Python function behind it (``tavily_search() got an unexpected keyword argument 'city'``)."""

from __future__ import annotations

import pytest

from pytest_connic.runtime.predefined import web
from pytest_connic.runtime.predefined_dispatch import check_arguments


def test_an_unknown_argument_is_the_tools_error_in_its_own_name() -> None:
    with pytest.raises(TypeError) as raised:
        check_arguments("web_search", web.tavily_search, {"query": "hotels", "city": "Paris"})
    assert str(raised.value) == ("web_search: got an unexpected keyword argument 'city' (its arguments: query, "
                                 "max_results, country, include_news)")
    assert "tavily" not in str(raised.value)


def test_a_missing_argument_too_and_good_ones_pass() -> None:
    with pytest.raises(TypeError, match=r"^web_read_page: missing a required argument: 'url' \(its arguments: url, "
                                        r"follow_redirects\)$"):
        check_arguments("web_read_page", web.read_page, {"follow_redirects": False})
    check_arguments("web_search", web.tavily_search, {"query": "hotels", "max_results": 3})
