"""The A/B section (``--connic-ab``) as terminal text and as an HTML fragment.

Both render the ``ab`` key of the JSON report (``pytest_connic.ab.analysis``), already
masked: the terminal gets one table per comparison (control, variant and the difference
variant − control per case and overall) followed by the looks, the tests and the
recommendation; the HTML page gets the same as static, escaped markup.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from pytest_connic.reports.table import Column, escape_text, fit_table, for_console
from pytest_connic.reports.terminal import one_line

#: the section's own styles (report.css styles the cases); colours from report.css's variables
STYLE = (".ab{padding:16px 24px 0;max-width:1200px}.ab table{border-collapse:collapse;margin:8px 0}"
         ".ab td,.ab th{border:1px solid var(--line);padding:2px 8px;text-align:left;"
         "font-variant-numeric:tabular-nums}.ab p{margin:4px 0}"
         ".ab td:first-child{overflow-wrap:anywhere;min-width:5em}.ab td:nth-child(2){white-space:nowrap}"
         ".ab .delta.better{color:var(--pass);background:var(--pass-bg)}"
         ".ab .delta.worse{color:var(--fail);background:var(--fail-bg)}"
         # as the terminal's A/B table: on a narrow window the latency mean and P95, then the cost
         # and the tokens are hidden (the note says which); case, arm, runs, pass rate and P50 stay
         ".ab .fit-note{display:none}"
         "@media (max-width:900px){.ab th:nth-child(5),.ab td:nth-child(5),.ab th:nth-child(7),"
         ".ab td:nth-child(7){display:none}.ab .fit-note.mean{display:block}}"
         "@media (max-width:640px){.ab th:nth-child(8),.ab td:nth-child(8),.ab th:nth-child(9),"
         ".ab td:nth-child(9){display:none}.ab .fit-note.mean{display:none}.ab .fit-note.cost{display:block}"
         ".ab td,.ab th{padding:2px 4px}}")
#: the notes under each table that say which columns a narrow window hides
FIT_NOTES = ('<p class="fit-note mean">Mean and P95 are hidden to fit the window.</p>'
             '<p class="fit-note cost">Mean, P95, Tokens/run and Cost/run are hidden to fit the window.</p>')
HEADERS = ["Case", "Arm", "Runs", "Pass rate [95% CI]", "Mean", "P50", "P95", "Tokens/run", "Cost/run"]
#: the terminal table's columns: on a narrow terminal the case name is cut (rows kept distinct)
#: and the latency mean and P95, the cost and the tokens are hidden, in that order
COLUMNS = [Column("Case", shrink=True, min_width=12, comfort=20), Column("Arm"), Column("Runs"),
           Column(HEADERS[3]), Column("Mean", drop=4), Column("P50"), Column("P95", drop=5),
           Column("Tokens/run", drop=2), Column("Cost/run", drop=3)]


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:.1f}%"


def _pp(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.1f} pp"


def _interval(pair: Sequence[float] | None, *, points: bool = False) -> str:
    if not pair:
        return ""
    lo, hi = pair
    return f"[{lo * 100:+.1f}, {hi * 100:+.1f}]" if points else f"[{lo * 100:.1f}, {hi * 100:.1f}]"


def _ms(x: float | None, *, delta: bool = False) -> str:
    if x is None:
        return "—"
    sign = "+" if delta and x >= 0 else ""
    return f"{sign}{x / 1000:.2f}s" if abs(x) >= 1000 else f"{sign}{round(x)}ms"


def _num(x: float | None, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def arm_row(label: str, name: str, arm: dict[str, Any]) -> list[str]:
    """One arm: runs, pass rate with its Wilson interval, latency, mean tokens and cost per run."""
    rate = f"{_pct(arm['pass_rate'])} {_interval(arm['wilson'])}" if arm["runs"] else "—"
    return [label, name, str(arm["runs"]), rate, _ms(arm["mean_latency_ms"]), _ms(arm["p50_latency_ms"]),
            _ms(arm["p95_latency_ms"]), _num(arm["mean_tokens"], ".0f"), _num(arm["mean_cost"], ".4f")]


def difference_row(diff: dict[str, Any]) -> list[str]:
    """Variant − control, the pass-rate difference with Newcombe's (unadjusted) interval."""
    rate = f"{_pp(diff['pass_rate'])} {_interval(diff['pass_rate_interval_95'], points=True)}"
    return ["", "Δ v − c", "", rate, _ms(diff["mean_latency_ms"], delta=True),
            _ms(diff["p50_latency_ms"], delta=True), _ms(diff["p95_latency_ms"], delta=True),
            _num(diff["mean_tokens"], "+.0f"), _num(diff["mean_cost"], "+.4f")]


def _rows(label: str, block: dict[str, Any]) -> list[list[str]]:
    if block.get("error"):
        return [[label, "not compared", "", "", "", "", "", "", ""]]
    if "control" not in block:
        return [[label, "no runs", "", "", "", "", "", "", ""]]
    return [arm_row(label, "control", block["control"]), arm_row("", "variant", block["variant"]),
            difference_row(block["difference"])]


def comparison_table(comp: dict[str, Any], width: int | None = None) -> list[str]:
    """The table of one comparison: each case, then the pooled arms; fitted to ``width``
    terminal columns (None: as wide as its cells)."""
    rows: list[list[str]] = []
    for case in comp["cases"]:
        rows += _rows(escape_text(case["test_name"]), case)
    if len(comp["cases"]) > 1:
        rows += _rows("overall", comp["overall"])
    return fit_table(COLUMNS, rows, width=width)


def case_notes(comp: dict[str, Any], confidence: str = "95%") -> list[str]:
    """Per case: an error, the final look (with its ``confidence`` adjusted interval), a safety
    pause, too few runs, cassette notes."""
    lines = []
    for case in comp["cases"]:
        name = one_line(case["test_name"])
        if case.get("error"):
            lines.append(f"    {name}: not compared: {one_line(case['error'])}")
            continue
        if case["looks"]:
            look = case["looks"][-1]
            lines.append(f"    {name}: {one_line(look['reason'])}; adjusted {confidence} interval "
                         f"{_interval(look['adjusted_interval'], points=True)} pp → {look['recommendation'].upper()}")
        if case["paused"]:
            lines.append(f"    {name}: variant PAUSED by the safety rule: {one_line(case['pause_reason'] or '')}")
        if case.get("insufficient_runs") and not case["looks"]:
            lines.append(f"    {name}: fewer than {case['min_runs']} runs in an arm: too few to compare")
        for note in case.get("notes") or []:
            lines.append(f"    {name}: note: {one_line(note)}")
    return lines


def overall_lines(comp: dict[str, Any]) -> list[str]:
    """The unpaired and paired tests, the safety state and the recommendation."""
    overall = comp["overall"]
    lines = []
    if overall.get("unpaired"):
        paired = overall["paired"]
        sign, mc = paired["sign_test"], paired["mcnemar"]
        lines.append(f"    unpaired: two-proportion z test p = {overall['unpaired']['p_value']:.4g} "
                     f"(pass rate {_pp(overall['difference']['pass_rate'])})")
        lines.append(f"    paired: sign test over {sign['cases']} case(s) (variant better {sign['variant_better']}, "
                     f"control better {sign['control_better']}, ties {sign['ties']}) p = {sign['p_value']:.4g}; "
                     f"McNemar on {mc['pairs']} paired runs (control only {mc['control_only']}, variant only "
                     f"{mc['variant_only']}) p = {mc['p_value']:.4g}")
    if overall["paused"]:
        lines.append(f"    safety: the variant was PAUSED on {len(overall['paused_cases'])} case(s)")
    if overall["recommendation"] is not None:
        lines.append(f"    Recommendation: {overall['recommendation'].upper()}: {one_line(overall['reason'])}")
    else:
        lines.append("    Exploratory: descriptive only (no decision; differences are variant − control, "
                     "intervals unadjusted)")
    return lines


def plan_line(section: dict[str, Any]) -> str | None:
    """The locked plan of Confidence mode, in one line."""
    plan = section.get("plan")
    if not plan:
        return None
    effect = f"margin {plan['margin'] * 100:g} pp" if plan["margin"] is not None else f"MDE {_pp(plan['mde'])}"
    looks = "/".join(str(n) for n in plan["looks"])
    return (f"  plan: {plan['objective'].replace('_', '-')}, baseline {_pct(plan['baseline'])}, {effect}, "
            f"{plan['confidence'] * 100:g}% confidence, {plan['power'] * 100:g}% power: {plan['runs_per_arm']} "
            f"runs per arm and case at most, looks at {looks} (O'Brien–Fleming)")


def _confidence(section: dict[str, Any]) -> str:
    plan = section.get("plan")
    return f"{plan['confidence'] * 100:g}%" if plan else "95%"


def terminal_lines(section: dict[str, Any], width: int | None = None, encoding: str | None = None) -> list[str]:
    """The whole A/B section for the terminal, its tables fitted to ``width`` columns (None: as
    wide as their cells); a console ``encoding`` without box characters gets ASCII tables."""
    return for_console(_section_lines(section, width), encoding)


def _section_lines(section: dict[str, Any], width: int | None) -> list[str]:
    lines = []
    plan = plan_line(section)
    if plan:
        lines.append(plan)
    if not section["comparisons"]:
        lines.append(f"  no case of a base agent of {section['variant']!r} ran")
    elif section.get("latencies") != "measured":
        lines.append(f"  note: {LOCAL_LATENCIES}")
    confidence = _confidence(section)
    for comp in section["comparisons"]:
        lines.append(f"  {comp['base']} (control) vs {comp['variant']} (variant): {len(comp['cases'])} case(s)")
        lines += comparison_table(comp, width)
        lines += case_notes(comp, confidence)
        lines += overall_lines(comp)
    return lines


#: the HTML table's headers: the cost column says its unit
HTML_HEADERS = [*HEADERS[:-1], "Cost/run (USD)"]
#: for each column of the difference row, whether a larger value is better (None: no direction)
_BETTER_WHEN_HIGHER: list[bool | None] = [None, None, None, True, False, False, False, False, False]
#: the latency columns of a row (Mean, P50, P95): no direction when the latencies are local timings
_LATENCY_COLUMNS = (4, 5, 6)
#: what the section says when its latencies are a replay's (``latencies: local``)
LOCAL_LATENCIES = ("latencies are local timings (replayed or scripted models), not the providers': their "
                   "differences are not judged; compare latencies with --connic-live or --connic-record-mode=all")


def _direction(cell: str, higher_is_better: bool | None) -> str:
    """``better``, ``worse`` or ``""`` for a signed difference cell (``+2.0 pp [...]``, ``-12ms``)."""
    text = cell.strip()
    if higher_is_better is None or not text or text[0] not in "+-":
        return ""
    try:
        value = float(text.split()[0].removesuffix("ms").removesuffix("s"))
    except ValueError:
        return ""
    if value == 0:
        return ""
    return "better" if (value > 0) == higher_is_better else "worse"


def _breakable(text: str) -> str:
    """``text`` escaped, free to break after ``_`` and ``::`` on a narrow window (``<wbr>``, which is
    not copied with the text) rather than inside a word."""
    return html.escape(text).replace("_", "_<wbr>").replace("::", "::<wbr>")


def _html_row(row: list[str], measured: bool = True) -> str:
    """One table row, its case name free to break (:func:`_breakable`); the cells of a difference
    row are classed ``better``/``worse`` (coloured by report.css's pass and fail colours, with an
    arrow for those who do not see colour), its latency cells only when the latencies were
    ``measured``."""
    if len(row) < 2 or row[1] != "Δ v − c":
        return "<tr>" + "".join(f"<td>{_breakable(c) if i == 0 else html.escape(c)}</td>"
                                for i, c in enumerate(row)) + "</tr>"
    cells = []
    for column, (cell, better) in enumerate(zip(row, _BETTER_WHEN_HIGHER)):
        direction = _direction(cell, None if column in _LATENCY_COLUMNS and not measured else better)
        mark = {"better": " ▲", "worse": " ▼"}.get(direction, "")
        title = {"better": ' title="better for the variant"', "worse": ' title="worse for the variant"'}.get(direction, "")
        cls = f' class="delta {direction}"' if direction else ""
        cells.append(f"<td{cls}{title}>{html.escape(cell)}{mark}</td>")
    return '<tr class="difference">' + "".join(cells) + "</tr>"


def ab_html(section: dict[str, Any] | None) -> str:
    """The section as static HTML (every string escaped), or ``""`` without ``--connic-ab``."""
    if not section:
        return ""
    parts = ['<section id="ab" class="ab">', f"<style>{STYLE}</style>",
             f"<h2>A/B comparison ({html.escape(section['mode'])})</h2>"]
    plan = plan_line(section)
    if plan:
        parts.append(f"<p>{html.escape(plan.strip())}</p>")
    measured = section.get("latencies") == "measured"
    if not measured and section["comparisons"]:
        parts.append(f'<p class="note">{html.escape(LOCAL_LATENCIES[0].upper() + LOCAL_LATENCIES[1:])}.</p>')
    confidence = _confidence(section)
    for comp in section["comparisons"]:
        parts.append(f"<h3>{html.escape(comp['base'])} (control) vs {html.escape(comp['variant'])} (variant)</h3>")
        rows = [r for case in comp["cases"] for r in _rows(case["test_name"], case)]
        if len(comp["cases"]) > 1:
            rows += _rows("overall", comp["overall"])
        head = "".join(f"<th>{html.escape(h)}</th>" for h in HTML_HEADERS)
        body = "".join(_html_row(r, measured) for r in rows)
        parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{FIT_NOTES}")
        parts += [f"<p>{html.escape(line.strip())}</p>" for line in case_notes(comp, confidence) + overall_lines(comp)]
    parts.append("</section>")
    return "\n".join(parts)
