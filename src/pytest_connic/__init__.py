"""pytest-connic: run Connic agent test suites with plain pytest."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
