"""Report renderers: pure functions from ``CaseOutcome`` lists to text, JSON, HTML and files.

No pytest here: ``plugin.py`` wires them into hooks. Modules: ``json_report`` (``--connic-json``),
``terminal`` (results table, failure details, summary lines), ``junit`` (JUnit properties),
``traces`` (spans and ``--connic-traces``), ``html`` (``--connic-html``), ``stats``, ``jsonsafe``.
"""
