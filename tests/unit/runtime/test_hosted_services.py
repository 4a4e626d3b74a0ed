"""The pure parts of the hosted services: the judge's answer, the judge prompt, HTML to text,
located warnings (runtime/guardrails.py, runtime/predefined/web.py, runtime/hosted.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pytest_connic.models.base import CallFailed
from pytest_connic.project.sdk import GuardrailRule
from pytest_connic.runtime.guardrails import JUDGE_QUESTIONS, judge_prompt, parse_judgement


@pytest.mark.parametrize(("answer", "expected"), [
    ('{"passed": false, "reason": "asks to ignore the rules"}', {"passed": False, "reason": "asks to ignore the rules"}),
    ('```json\n{"passed": true}\n```', {"passed": True, "reason": None}),
    ('Sure. {"passed": true, "message": "fine"} Hope that helps.', {"passed": True, "reason": "fine"}),
])
def test_a_judge_answer_is_read_as_passed_and_reason(answer: str, expected: dict[str, Any]) -> None:
    assert parse_judgement(answer) == expected


@pytest.mark.parametrize("answer", ["yes", '{"passed": "no"}', "", None, '{"reason": "x"}'])
def test_a_judge_answer_without_a_boolean_passed_is_a_failed_call(answer: str | None) -> None:
    with pytest.raises(CallFailed, match=r'the judge model did not answer \{"passed": true\|false'):
        parse_judgement(answer)


def _inv(system_prompt: str = "You are a bank.", message: str = "hi") -> Any:
    return SimpleNamespace(config=SimpleNamespace(name="bank", system_prompt=system_prompt),
                           delivered={"message": message})


def test_the_judge_prompt_names_the_type_its_config_and_leaves_out_what_happens_after() -> None:
    rule = GuardrailRule(type="topic_restriction", config={
        "allowed_topics": ["billing"], "off_topic_message": "Billing only.", "fail_run": True, "model": "x"})
    prompt = judge_prompt(_inv(), rule, "input")
    assert prompt.startswith("You are Connic's 'topic_restriction' guardrail. You judge the input of an AI agent")
    assert JUDGE_QUESTIONS["topic_restriction"] in prompt
    assert 'Configuration of this guardrail (JSON): {"allowed_topics": ["billing"]}' in prompt
    assert "Billing only." not in prompt and '"passed": true|false' in prompt


def test_the_leakage_judge_sees_the_system_prompt_and_the_relevance_judge_the_request() -> None:
    leak = judge_prompt(_inv(system_prompt="SECRET RULES"), GuardrailRule(type="system_prompt_leakage"), "output")
    assert "The agent's system prompt:\n<<<\nSECRET RULES\n>>>" in leak
    relevant = judge_prompt(_inv(message="where is my card"), GuardrailRule(type="relevance"), "output")
    assert "The user's request was:\n<<<\nwhere is my card\n>>>" in relevant
    assert "SECRET" not in relevant


def test_every_model_based_type_has_a_question() -> None:
    assert set(JUDGE_QUESTIONS) == {"prompt_injection", "moderation", "topic_restriction", "relevance",
                                    "system_prompt_leakage", "data_exfiltration"}


def test_html_becomes_markdown_like_text() -> None:
    pytest.importorskip("html2text")
    from pytest_connic.runtime.predefined.web import html_to_text

    text = html_to_text('<h1>Hours</h1><p>Open at <b>9</b>, <a href="/map">map</a>.</p><img src="x.png">',
                        "https://example.com/")
    assert text == "# Hours\n\nOpen at **9** , [map](https://example.com/map)."
