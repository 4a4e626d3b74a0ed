"""Every pytest the package declares (``pytest>=8``): APIs newer than the floor are looked up,
never assumed."""

from __future__ import annotations

import pytest

from pytest_connic.plugin import xdist


def test_verbosity_without_pytest_8_1s_test_case_verbosity(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # pytest 8.0 has Config.get_verbosity() but not VERBOSITY_TEST_CASES (8.1): every session of
    # a Connic project crashed there with an INTERNALERROR
    monkeypatch.setattr(xdist, "TEST_CASE_VERBOSITY", None)

    assert xdist.verbose(pytester.parseconfig("-v")) is True
    assert xdist.verbose(pytester.parseconfig()) is False
