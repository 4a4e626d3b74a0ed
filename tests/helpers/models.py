"""Helpers for the run tests: project conftest.py snippets that supply models through
``pytest_connic_make_model``, and tools that leave evidence behind."""

from __future__ import annotations

import textwrap

# Imported here, in the outer test process, so that pytester's in-process runs reuse them:
# pytester restores ``sys.modules`` after each run, and every fresh import of a plugin's
# package is assertion-rewritten (without a bytecode cache under PYTHONDONTWRITEBYTECODE):
# hypothesis alone, imported by its plugin's terminal summary, costs seconds per run.
import hypothesis  # noqa: F401  (see tests/conftest.py: imported once in the outer process)

#: A project conftest.py whose model answers with what it was asked: the system prompt,
#: the user message, the tools offered and the tool results it read, as JSON.
ECHO_REQUEST_MODEL = textwrap.dedent(
    '''
    import json


    def pytest_connic_make_model(config, agent, model, case, run_index):
        def answer(request):
            return json.dumps({
                "system": request.system_prompt,
                "user": request.messages[0]["content"],
                "tools": {t.name: {"description": t.description, "parameters": t.parameters}
                          for t in request.tools},
                "tool_results": [m["content"] for m in request.messages if m["role"] == "tool"],
                "agent": request.agent_name,
                "run_index": run_index,
                "has_case": case is not None,
                "timeout_s": request.timeout_s,
            })
        return answer
    '''
)

#: Tools that write evidence into files of the project directory (cwd of the pytester run).
EVIDENCE_TOOLS = textwrap.dedent(
    '''
    import asyncio
    import json
    import pathlib
    import time


    def nap(seconds: float, context) -> dict:
        """Sleep, noting when it started and ended.

        Args:
            seconds: how long to sleep
        """
        start = time.time()
        time.sleep(seconds)
        end = time.time()
        # next to tools/, not in the cwd: a nap outliving its run's timeout ends after pytester left
        with open(pathlib.Path(__file__).resolve().parents[1] / "naps.jsonl", "a") as fh:
            fh.write(json.dumps({"run_id": context["run_id"], "start": start, "end": end}) + "\\n")
        return {"slept": seconds}


    async def anap(seconds: float) -> dict:
        """Sleep asynchronously.

        Args:
            seconds: how long to sleep
        """
        await asyncio.sleep(seconds)
        return {"slept": seconds}


    def boom(reason: str) -> dict:
        """Always raises.

        Args:
            reason: why
        """
        raise ValueError(f"kaboom: {reason}")


    async def whoami(context) -> dict:
        """The run id and agent, and how often this run's context saw this tool."""
        context["seen"] = context.get("seen", 0) + 1
        return {"run_id": context["run_id"], "agent": context["agent_name"], "seen": context["seen"]}
    '''
)

#: A project conftest.py whose model asks for the calls listed in the payload
#: (``{"calls": [[name, args], ...]}``), then answers with every tool result it read back
#: (JSON-decoded where possible): ``{"read": [...]}``; ``{"read": []}`` for a payload without calls.
SCRIPTED_MODEL = textwrap.dedent(
    '''
import json

from pytest_connic.models.base import ModelResponse, ToolCallRequest


def _load(text):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def pytest_connic_make_model(config, agent, model, case, run_index):
    def answer(request):
        read = [_load(m["content"]) for m in request.messages if m["role"] == "tool"]
        if read:
            return json.dumps({"read": read})
        plan = _load(request.messages[0]["content"])
        calls = plan.get("calls", []) if isinstance(plan, dict) else []
        if not calls:
            return json.dumps({"read": []})
        return ModelResponse(tool_calls=[
            ToolCallRequest(id=f"call{i}", name=name, arguments=args) for i, (name, args) in enumerate(calls)
        ])
    return answer
'''
)
