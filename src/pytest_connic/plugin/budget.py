"""The session's budget in every process: the controller (or the only process) creates the
ledger in a temporary directory removed when the session ends, an xdist worker charges the
controller's (``plugin/history.py`` hands its path to each worker)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_connic.plugin.options import SETTINGS_KEY, Settings

if TYPE_CHECKING:
    from pytest_connic.history.budget import Budget

#: where a worker learns the ledger of the controller's budget
LEDGER_INPUT = "connic_budget_ledger"
BUDGET_KEY = pytest.StashKey["Budget | None"]()


def budget_for(config: pytest.Config) -> Budget | None:
    """The session's budget (None without one): the controller's ledger, in every process."""
    if BUDGET_KEY in config.stash:
        return config.stash[BUDGET_KEY]
    settings: Settings = config.stash[SETTINGS_KEY]
    budget = None
    if settings.budget_tokens is not None or settings.budget_cost is not None:
        from pytest_connic.history.budget import Budget

        workerinput = getattr(config, "workerinput", None)
        if workerinput is not None and workerinput.get(LEDGER_INPUT):
            path = Path(workerinput[LEDGER_INPUT])
        else:
            folder = Path(tempfile.mkdtemp(prefix="connic-budget-"))
            config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
            path = folder / "ledger.sqlite"
        budget = Budget(path, tokens=settings.budget_tokens, cost=settings.budget_cost)
    config.stash[BUDGET_KEY] = budget
    return budget
