"""Every pytest the package declares (``pytest>=8``): APIs newer than the floor are looked up,
never assumed."""

from __future__ import annotations

import pytest

from pytest_connic.plugin import xdist

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)


def test_verbosity_without_pytest_8_1s_test_case_verbosity(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # pytest 8.0 has Config.get_verbosity() but not VERBOSITY_TEST_CASES (8.1): every session of
    # a Connic project crashed there with an INTERNALERROR
    monkeypatch.setattr(xdist, "TEST_CASE_VERBOSITY", None)

    assert xdist.verbose(pytester.parseconfig("-v")) is True
    assert xdist.verbose(pytester.parseconfig()) is False


NATIVE_TOML = """
[tool.pytest]
connic_concurrency = 2
connic_early_stop = true
connic_ab_baseline = 85.5
connic_record_mode = "none"
"""

QUOTED_TOML = """
[tool.pytest]
connic_concurrency = "3"
connic_early_stop = "false"
"""

SHOW_SETTINGS = """
from pytest_connic.plugin.options import SETTINGS_KEY


def pytest_sessionstart(session):
    s = session.config.stash[SETTINGS_KEY]
    print(f"settings: concurrency={s.concurrency!r} early_stop={s.early_stop!r} ab_baseline={s.ab_baseline!r} "
          f"from {s.source('concurrency')}")
"""


@pytest.mark.skipif(tuple(int(p) for p in pytest.__version__.split(".")[:2]) < (9, 2),
                    reason="pytest 9.2 reads ini keys with a type expression (int | str)")
@pytest.mark.parametrize(("toml", "expected"), [
    (NATIVE_TOML, "settings: concurrency=2 early_stop=True ab_baseline=85.5 from ini connic_concurrency"),
    (QUOTED_TOML, "settings: concurrency=3 early_stop=False ab_baseline=90.0 from ini connic_concurrency"),
], ids=["native types", "quoted"])
def test_pytest_9s_native_toml_table_takes_each_setting_in_its_own_type(
        pytester: pytest.Pytester, toml: str, expected: str) -> None:
    pytester.makepyprojecttoml(toml)
    pytester.makeconftest(SHOW_SETTINGS)
    pytester.makepyfile("def test_plain():\n    pass\n")

    result = pytester.runpytest("-s", "-p", "no:xdist")

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([expected])


@pytest.mark.skipif(tuple(int(p) for p in pytest.__version__.split(".")[:2]) < (9, 2),
                    reason="pytest 9.2 reads ini keys with a type expression (int | str)")
def test_a_bad_value_in_the_native_table_names_its_key(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml("[tool.pytest]\nconnic_concurrency = 0\n")
    pytester.makepyfile("def test_plain():\n    pass\n")

    result = pytester.runpytest("-p", "no:xdist")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*invalid value '0' from ini connic_concurrency: must be at least 1*"])


def test_every_private_part_of_pytest_the_plugin_uses_is_there(pytester: pytest.Pytester) -> None:
    """``plugin/pytest_private.py`` names each part of pytest without a public name that the plugin
    uses, with the releases it was tested with: a pytest that moves one fails here."""
    from pytest_connic.plugin import pytest_private

    config = pytester.parseconfigure("--junitxml=junit.xml")
    assert pytest_private.missing(config) == []
    tested = [tuple(int(p) for p in v.split(".")[:2]) for v in pytest_private.PYTEST_TESTED]
    assert tested[0] <= tuple(int(p) for p in pytest.__version__.split(".")[:2] if p.isdigit())
