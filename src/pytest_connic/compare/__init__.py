"""Comparing two sessions of the history or two ``--connic-json`` reports (docs/history.md,
"Comparing sessions"): what the agent does differently, per case. Plain library code: the pytest
side is ``plugin/compare.py``, the command ``python -m pytest_connic compare``."""
