"""Across sessions: the local history store (SQLite), what changed since the previous session,
flaky cases, and the token and cost budget of a session (a ledger every xdist worker charges).
Pure library code over the standard library; the pytest glue is ``plugin/history.py``."""
