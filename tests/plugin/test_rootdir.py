"""Path options never move pytest's rootdir (issue 27): ``--connic-json ../x.json`` with the file
existing outside the project keeps the project's rootdir, for each path option; where pytest would
also pick another ini file, the session stops with the ``=`` form."""

from __future__ import annotations

import pytest

from helpers.project import ConnicProject
from pytest_connic.plugin.rootdir import PATH_OPTIONS, space_form

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

OPTIONS = ["--connic-json", "--connic-html", "--connic-history", "--connic-traces", "--connic-coverage-json",
           "--connic-merge", "--connic-summary", "--connic-compare"]


def test_every_path_option_is_covered() -> None:
    assert PATH_OPTIONS == frozenset(OPTIONS)
    assert space_form(["--connic-json", "a.json", "--connic-html=b.html", "--", "--connic-traces", "x"]) == [
        ("--connic-json", "a.json")]


@pytest.mark.parametrize("option", OPTIONS)
def test_the_space_form_keeps_the_projects_rootdir(calc: ConnicProject, option: str) -> None:
    outside = calc.root.parent / f"{calc.root.name}-outside"
    outside.mkdir()
    target = outside / ("traces" if option == "--connic-traces" else "x.json")
    if option == "--connic-traces":
        target.mkdir()
    else:  # an earlier run's report (a shard --connic-merge can read)
        target.write_text('{"cases": []}', "utf-8")
    result = calc.run(option, str(target), "-k", "nothing-selected")
    result.stdout.fnmatch_lines([f"rootdir: {calc.root}"])


def test_a_moved_ini_file_stops_with_the_equals_form(calc: ConnicProject) -> None:
    calc.write("pytest.ini", "[pytest]\n")
    outside = calc.root.parent / f"{calc.root.name}-outside.json"
    outside.write_text("{}", "utf-8")
    result = calc.run("--connic-json", str(outside))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*write the option with '=': --connic-json={outside}"])
