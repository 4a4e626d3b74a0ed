#!/usr/bin/env python3
"""The long fuzzing run: the bounded Hypothesis properties of the test suite, for as long as asked.

    python fuzz/run.py                       # 10 minutes, every target
    python fuzz/run.py --minutes 60 --only agents,cassettes --examples 500

Each round runs the chosen targets once with a fresh Hypothesis seed and ``--examples`` examples per
property (where the property reads ``CONNIC_FUZZ_EXAMPLES``; the others keep their own count and
get a new seed). The first failing round stops the run: its seed and pytest's output (with the
shrunk falsifying example) are printed, and Hypothesis keeps the example in ``.hypothesis/`` so the
next plain ``pytest`` run of that test replays it. Exit status: 0 when every round passed.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {
    # mutated agents/*.yaml of examples/order-desk, through a real pytest session each
    "agents": ["tests/plugin/test_example_project.py::test_mutated_agent_yaml_ends_in_located_errors_or_verdicts"],
    # mutated cassettes (text and structure: malformed tool calls), replayed through the plugin
    "cassettes": ["tests/plugin/test_example_project.py::test_mutated_cassettes_end_in_located_errors_or_verdicts"],
    # random and mutated suites through the suite loader, and Connic's verdict on random suites
    "suites": ["tests/unit/suite/test_loader_fuzz.py"],
    # random text and DSL-like text through the expression compiler and evaluator
    "expressions": ["tests/unit/checks/test_expressions.py::test_random_text_only_ever_raises_expression_error",
                    "tests/unit/checks/test_expressions.py::test_dsl_like_text_compiles_or_fails_cleanly_and_evaluation_never_raises"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to keep starting rounds (default 10)")
    parser.add_argument("--examples", type=int, default=200,
                        help="examples per property and round, for the properties that read CONNIC_FUZZ_EXAMPLES")
    parser.add_argument("--only", default=",".join(TARGETS), help=f"comma-separated targets: {', '.join(TARGETS)}")
    parser.add_argument("--seed", type=int, default=None, help="the first round's seed (later rounds draw new ones)")
    parser.add_argument("--workers", default="2", help="pytest-xdist workers (-n); 0 runs in one process")
    args = parser.parse_args(argv)

    chosen = [t.strip() for t in args.only.split(",") if t.strip()]
    unknown = [t for t in chosen if t not in TARGETS]
    if unknown:
        parser.error(f"unknown target(s) {', '.join(unknown)}; choose from {', '.join(TARGETS)}")
    tests = [test for target in chosen for test in TARGETS[target]]
    env = {**os.environ, "CONNIC_FUZZ_EXAMPLES": str(args.examples)}
    deadline = time.monotonic() + args.minutes * 60
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rounds = 0
    while rounds == 0 or time.monotonic() < deadline:
        rounds += 1
        command = [sys.executable, "-m", "pytest", *tests, "-q", "-x", "-p", "no:cacheprovider",
                   f"--hypothesis-seed={seed}", "-n", args.workers]
        print(f"round {rounds}: seed {seed}: {' '.join(chosen)}", flush=True)
        started = time.monotonic()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stdout[-20000:], done.stderr[-5000:], sep="\n")
            print(f"round {rounds} FAILED with seed {seed}; rerun it with:\n"
                  f"  CONNIC_FUZZ_EXAMPLES={args.examples} python -m pytest {' '.join(tests)} "
                  f"--hypothesis-seed={seed}")
            return 1
        print(f"round {rounds}: passed in {time.monotonic() - started:.0f}s", flush=True)
        seed = random.randrange(2**32)
    print(f"{rounds} round(s) passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
