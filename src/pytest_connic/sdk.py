"""Import the Connic SDK once, quietly.

The SDK's pydantic models use class-based ``Config`` and emit
``PydanticDeprecatedSince20`` at import; that is the SDK's business, not the
user's, so it stays out of every test run's warning summary.
"""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import connic  # noqa: F401
    import connic.core  # noqa: F401
    import connic.loader  # noqa: F401
    import connic.test_schema  # noqa: F401
    import connic.tools  # noqa: F401
