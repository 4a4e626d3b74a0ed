"""Connic's predefined tools through the plugin: the session puts the SDK's ``connic.tools``
placeholders back when it ends. What the tools do in a run (the local database, files, retrieval,
builders, outbound connectors, the hook, discovery) is tested below the session:
tests/unit/lifecycle/test_predefined_tools.py."""

from __future__ import annotations

import connic.tools as sdk_tools
import pytest

from helpers.project import ConnicProject
from pytest_connic.runtime import placeholders

pytestmark = pytest.mark.isolation_none  # user code in pytest's process: the subject is not isolation (tests/conftest.py)

TALLY = '''
from connic.tools import db_count, db_insert


async def tally(payload: dict) -> dict:
    """Count this visit."""
    await db_insert("visits", {"by": payload.get("message", "")})
    return await db_count("visits")
'''


def test_the_session_puts_the_sdks_placeholders_back_when_it_ends(project: ConnicProject) -> None:
    project.tool("counter", TALLY)
    project.agent("counter", type="tool", tool_name="counter.tally")
    project.suite("counter", """
        version: "1.0"
        tests:
          - name: visits
            payload: one
            expected_result: output.count == 1
    """)
    original = sdk_tools.db_find
    assert not placeholders.is_dispatcher(original)

    project.run().assert_outcomes(passed=1)  # the tool called connic.tools through a dispatcher

    assert sdk_tools.db_find is original and not placeholders.is_dispatcher(sdk_tools.db_insert)
