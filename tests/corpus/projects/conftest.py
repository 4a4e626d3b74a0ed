"""Whole Connic projects copied from connic-awesome-agents, run by tests/plugin/test_hosted_guardrails.py and test_mcp.py
in pytester's directory; pytest's own run of this repository does not collect their suites."""

collect_ignore = ["customer-support", "compliance-auditor"]
