"""What the tests of the recorded world share: a tool that returns a child's run id, ``random``
values and today's time, and a middleware that writes the time into the prompt."""

from __future__ import annotations

PROBE = '''
import random
from datetime import date, datetime

from connic.tools import trigger_agent


async def ask(question: str) -> dict:
    """Ask the helper agent and draw two random numbers.

    Args:
        question: what to ask
    """
    child = await trigger_agent("helper", {"question": question})
    return {"child_run": child["run_id"], "draws": [random.random(), random.random()],
            "at": datetime.now().isoformat(), "day": date.today().isoformat()}


def body(payload: dict) -> dict:
    """The helper agent (a tool agent)."""
    return {"answered": payload}
'''

MIDDLEWARE = '''
from datetime import datetime


def before(content, context):
    stamp = datetime.now().isoformat()  # to the microsecond
    content["parts"].append({"text": f"sent {stamp} (run started {context['timestamp']})"})
    return content
'''
