"""``--connic-html PATH``: one self-contained HTML file to browse cases, runs and traces.

The page is built from the JSON report (so it shows exactly what ``--connic-json`` holds, already
masked). Styles and script are inlined from ``report.css`` and ``report.js`` beside this module;
the data travels as JSON in a ``<script type="application/json">`` element with ``<``, ``>`` and
``&`` escaped, and the script builds the DOM with ``textContent`` only, so no user string is ever
parsed as HTML. A Content-Security-Policy forbids every network request.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from importlib.resources import files

from pytest_connic.jsonsafe import JsonValue, to_jsonable

#: no fetches, no external images, styles or scripts: only what is inline
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="generator" content="pytest-connic">
<title>{title}</title>
<style>
{css}
</style>
</head>
<body>
<header>
<h1>Connic test report</h1>
<p class="summary" id="summary">{summary}</p>
{context}
<div class="controls">
<label><input type="checkbox" id="failing-only"> Failing only</label>
<input type="search" id="search" placeholder="Search cases, run ids, outputs, errors, tools" aria-label="Search">
<button type="button" id="expand-all">Expand all</button>
<button type="button" id="collapse-all">Collapse all</button>
<span id="shown-count"></span>
</div>
</header>
{ab}
<section class="overview" aria-label="Summary of the cases">
<table id="summary-table"><thead><tr>
<th data-key="order" aria-sort="ascending">Result</th><th data-key="name">Case</th><th data-key="where">Where</th>
<th data-key="runs" class="num">Runs</th><th data-key="threshold" class="num">Threshold</th>
<th data-key="rate" class="num">Pass rate</th><th data-key="latency" class="num">Median latency</th>
<th data-key="tokens" class="num">Tokens</th><th data-key="cost" class="num">Cost (USD)</th>
</tr></thead><tbody></tbody></table>
<p class="fit-note where">Where is hidden to fit the window: each case's card has it.</p>
<p class="fit-note phone">Where, Threshold, Pass rate, Tokens and Cost are hidden to fit the window: each case's card has them.</p>
</section>
{history}
{comparison}
<main id="cases"></main>
<p class="empty" id="no-match" hidden>No case matches the filter.</p>
<noscript><p class="empty">The case list needs JavaScript; the data is in the JSON below.</p></noscript>
<script type="application/json" id="connic-report">{data}</script>
<script>
{js}
</script>
</body>
</html>
"""


def render_html(report: Mapping[str, JsonValue], context: Mapping[str, object] | None = None) -> str:
    """The HTML page for a report built by :func:`build_json_report`; ``context``: where and how
    the run happened (:func:`context_html`), shown in the header."""
    status = str(report.get("status") or "unknown")
    return _PAGE.format(
        csp=CSP,
        title=html.escape(f"Connic test report: {status}"),
        summary=summary_html(report),
        context=context_html(context or {}),
        ab=_ab_html(report.get("ab")),
        history=_history_html(report),
        comparison=_comparison_html(report),
        css=_asset("report.css"),
        data=embed_json(report),
        js=_asset("report.js"),
    )


def embed_json(value: object) -> str:
    """``value`` as JSON that is inert inside ``<script>``: ``<``, ``>``, ``&`` and the JS line
    separators as ``\\uXXXX`` escapes, so neither ``</script>`` nor ``<!--`` can appear."""
    text = json.dumps(to_jsonable(value), ensure_ascii=False, separators=(",", ":"))
    for char in ("<", ">", "&", "\u2028", "\u2029"):
        text = text.replace(char, f"\\u{ord(char):04x}")
    return text


def summary_html(report: Mapping[str, JsonValue]) -> str:
    """The header line, escaped: run status badge, counts, environment (visible without JS)."""
    status = str(report.get("status") or "unknown")
    summary = report.get("summary")
    counts = summary if isinstance(summary, dict) else {}
    text = (f"{_plural(counts.get('cases', 0), 'case')}: {counts.get('passed', 0)} passed, "
            f"{counts.get('failed', 0)} failed, {_plural(counts.get('errors', 0), 'error')}")
    if report.get("environment_id"):
        text += f" · environment {report['environment_id']}"
    if report.get("test_run_id"):
        text += f" · test run {report['test_run_id']}"
    return f'<span class="badge {html.escape(_css_class(status))}">{html.escape(status.upper())}</span> {html.escape(text)}'


#: the header's facts about the run, in this order: (key in the context, label)
CONTEXT_FIELDS = [("project", "Project"), ("command", "Command"), ("time", "Time"), ("commit", "Commit"),
                  ("versions", "Versions"), ("pytest", "pytest")]


def context_html(context: Mapping[str, object]) -> str:
    """Project, command, time, commit, versions and pytest's own outcome (its summary line and exit
    code, with a badge), escaped, visible without JavaScript; nothing for an empty context."""
    rows = []
    for key, label in CONTEXT_FIELDS:
        value = context.get(key)
        if value in (None, "", {}):
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        text = html.escape(str(value))
        if key == "pytest":
            outcome = str(context.get("pytest_status") or "")
            text = (f'<span class="badge {html.escape(_css_class(outcome))}">{html.escape(outcome.upper())}</span> '
                    + text) if outcome else text
        rows.append(f'<div><dt>{html.escape(label)}</dt><dd class="ctx-{key}">{text}</dd></div>')
    return f'<dl class="context" id="context">{"".join(rows)}</dl>' if rows else ""


def _plural(count: JsonValue, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _css_class(status: str) -> str:
    return status if status in ("passed", "failed", "error") else "error"


def _ab_html(section: object) -> str:
    """The ``--connic-ab`` section as static, escaped HTML (empty without it)."""
    from pytest_connic.reports.ab_report import ab_html

    return ab_html(section if isinstance(section, dict) else None)


def _history_html(report: Mapping[str, JsonValue]) -> str:
    """The budget line and the ``history`` section (changes, flaky cases, inline SVG trends)."""
    from pytest_connic.history.view import budget_html, history_html

    cases = report.get("cases")
    names = {str(c.get("nodeid")): f"{c.get('agent_name')}::{c.get('test_name')}"
             for c in (cases if isinstance(cases, list) else []) if isinstance(c, dict)}
    return budget_html(report.get("budget")) + history_html(report.get("history"), names)


def _comparison_html(report: Mapping[str, JsonValue]) -> str:
    """The ``comparison`` section (``--connic-compare``): ``reports/comparison_html.py``."""
    from pytest_connic.reports.comparison_html import comparison_html

    return comparison_html(report.get("comparison"))


def _asset(name: str) -> str:
    text = files("pytest_connic.reports").joinpath(name).read_text(encoding="utf-8")
    if "</script" in text.lower() or "</style" in text.lower():  # would end the inline element early
        raise RuntimeError(f"{name} must not contain a closing script or style tag")
    return text
