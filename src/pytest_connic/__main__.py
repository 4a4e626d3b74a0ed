"""``python -m pytest_connic merge shard-*.json --json all.json --html all.html --junitxml all.xml``
and ``python -m pytest_connic compare last -2``.

Merges the ``--connic-json`` reports of shards into the reports one run of every shard would
have written. It runs pytest with ``--connic-merge`` (a session that runs no case and reports the
shards' cases), so the reports come from the same code as a single run's (docs/ci.md). Other
pytest options go after ``--``. The exit code is that session's: the one a single run would have.

``compare A B`` shows what changed from B to A, each a session of the history or a
``--connic-json`` report (docs/history.md, "Comparing sessions"); it runs no pytest session.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from collections.abc import Sequence

#: this command's options and the pytest option each becomes
_OUTPUTS = (("json", "--connic-json"), ("html", "--connic-html"), ("junitxml", "--junitxml"),
            ("coverage_json", "--connic-coverage-json"), ("traces", "--connic-traces"))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pytest_connic", description=(
        "merge: merge shards' --connic-json reports into the reports of one run (docs/ci.md); compare: what "
        "changed between two sessions of the history or two --connic-json reports (docs/history.md)."))
    commands = parser.add_subparsers(dest="command", required=True, metavar="{merge,compare}")
    merge = commands.add_parser("merge", help="merge shards' --connic-json reports into one set of reports",
                                description="Merge shards' --connic-json reports into the reports of one run.")
    merge.add_argument("shards", nargs="+", metavar="SHARD.json", help="a shard's --connic-json report (or a glob)")
    merge.add_argument("--json", metavar="PATH", help="the merged JSON report")
    merge.add_argument("--html", metavar="PATH", help="the merged HTML report")
    merge.add_argument("--junitxml", metavar="PATH", help="the merged JUnit XML (pytest's own writer)")
    merge.add_argument("--coverage-json", dest="coverage_json", metavar="PATH",
                       help="the runtime coverage report of the merged cases (run in the project)")
    merge.add_argument("--traces", metavar="DIR", help="one JSON trace file per run of every shard")
    merge.epilog = "Options after -- go to pytest unchanged."
    from pytest_connic.compare.cli import add_parser

    add_parser(commands)
    return parser


def pytest_command(argv: Sequence[str]) -> list[str]:
    """The pytest command line that performs ``argv``'s merge."""
    argv = list(argv)
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    args = _parser().parse_args(argv)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    if importlib.util.find_spec("xdist") is not None:
        command += ["-n", "0"]  # a merge runs no case: no workers, whatever the project's addopts say
    for shard in args.shards:
        command += ["--connic-merge", shard]
    for name, option in _OUTPUTS:
        value = getattr(args, name)
        if value:
            command += [option, value]
    return command + extra


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["compare"]:
        from pytest_connic.compare.cli import run

        return run(_parser().parse_args(argv))
    command = pytest_command(argv)
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
