"""Quiet SDK import (issue 27): a ``conftest.py`` that imports ``connic`` (docs/hooks.md) adds none
of the SDK's ``PydanticDeprecatedSince20`` warnings to a Connic session's warnings summary."""

from __future__ import annotations

from helpers.project import ConnicProject


def test_a_conftest_importing_connic_adds_no_sdk_warnings(calc: ConnicProject) -> None:
    # a subprocess: in this process the SDK is imported already, and would warn no more
    calc.write("conftest.py", "import connic\nfrom connic import GuardrailResult\n")
    calc.write("tests/test_plain.py", "import warnings\n\n\ndef test_warns():\n"
                                      "    warnings.warn(DeprecationWarning('the user\\'s own'))\n")
    result = calc.run_subprocess("-p", "no:randomly", "tests/test_plain.py")
    result.assert_outcomes(passed=1, warnings=1)  # the user's own warnings still show
    assert "PydanticDeprecatedSince20" not in result.stdout.str()
    assert "the user's own" in result.stdout.str()
