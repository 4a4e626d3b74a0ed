"""The expected_* checks of a case: compiled once at collection, evaluated on each run record."""
