"""What the tests of Connic's sessions share: a model that shows what it was shown (as a project's
conftest.py for a pytest session, and as a ``HookHost`` model below it), and a chat suite whose
second case passes only when it sees the first case's conversation."""

from __future__ import annotations

import json
from typing import Any

from pytest_connic.models.base import ModelRequest

#: a project conftest.py: the model answers with every user turn it was shown and how many messages
SEEN_MODEL = '''
import json


def pytest_connic_make_model(config, agent, model, case, run_index):
    def answer(request):
        return json.dumps({"seen": [m["content"] for m in request.messages if m["role"] == "user"],
                           "messages": len(request.messages)})
    return answer
'''


def seen_model(agent: Any, model: str, case: Any, run_index: int) -> object:
    """``SEEN_MODEL`` below the session (``HookHost(make_model=seen_model)``)."""

    def answer(request: ModelRequest) -> object:
        return json.dumps({"seen": [m["content"] for m in request.messages if m["role"] == "user"],
                           "messages": len(request.messages)})

    return answer


#: ann's second case remembers her first; bob's starts a conversation of his own
CHAT_SUITE = '''
    agent: chat
    tests:
      - name: ann introduces herself
        payload: '{"user": "ann", "message": "my name is Ann"}'
        expected_result: output.messages == 1
      - name: ann is remembered
        payload: '{"user": "ann", "message": "what is my name?"}'
        expected_result: '"my name is Ann" in output.seen[0]'
      - name: bob has his own session
        payload: '{"user": "bob", "message": "who am I?"}'
        expected_result: output.messages == 1
'''
