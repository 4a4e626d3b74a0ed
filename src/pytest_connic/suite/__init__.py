"""Suites: discovery, YAML with positions, validation into a ``Suite`` of ``CaseSpec``."""
