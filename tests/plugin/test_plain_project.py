"""A plain Python project pays nothing for the plugin: none of its Connic machinery (models,
records, the runtime, the SDK, reports) is imported in a session without a Connic project
(docs/performance.md, start-up)."""

from __future__ import annotations

import pytest

HEAVY = ("pytest_connic.models", "pytest_connic.records", "pytest_connic.runtime", "pytest_connic.execution.isolation",
         "pytest_connic.reports", "pytest_connic.project.loaded", "pytest_connic.usertb", "pytest_connic.suite",
         "connic", "pydantic", "litellm")

CONFTEST = '''
import sys


def pytest_unconfigure(config):
    with open("imported.txt", "w") as fh:
        fh.write("\\n".join(sorted(sys.modules)))
'''


@pytest.mark.parametrize("args", [(), ("--pdb",), ("-p", "no:xdist")], ids=["plain", "pdb", "no-xdist"])
def test_a_plain_project_imports_none_of_the_connic_machinery(pytester: pytest.Pytester, args: tuple[str, ...]) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    assert result.ret == 0, result.stdout.str()
    imported = (pytester.path / "imported.txt").read_text().splitlines()
    assert "pytest_connic.plugin" in imported  # the plugin did load
    heavy = [name for name in imported if name.startswith(HEAVY)]
    assert heavy == []
