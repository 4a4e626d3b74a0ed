"""What the reports show of the history: per case its change since the session compared with,
its flakiness and its trend over the recent sessions; rendered as table marks, terminal lines,
a JSON section and static HTML with small inline SVG charts (no external assets)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pytest_connic.history.compare import Change, change, changed_parts, percent
from pytest_connic.history.flaky import Flaky, flakiness
from pytest_connic.history.store import CaseRow, StoredSession

#: sessions a trend shows (the current one included)
TREND_SESSIONS = 20


@dataclass
class CaseHistory:
    change: Change | None = None
    flaky: Flaky | None = None
    #: ``(pass rate, median latency ms)`` per session, oldest first, the current one last
    trend: list[tuple[float | None, float | None]] = field(default_factory=list)
    #: the parts of the case's configuration that changed since the session compared with
    #: (``tools/x.py``, ``plugin settings``): plugin/digests.py
    changed: list[str] = field(default_factory=list)
    #: its cassette differs from the one of the session compared with (re-recorded or edited)
    cassette_changed: bool = False

    def what_changed(self) -> list[str]:
        """The parts that changed, and the cassette when it did, for people."""
        return [*self.changed, *(["cassette re-recorded"] if self.cassette_changed else [])]

    def mark(self) -> str:
        """The case's mark in the results table (empty when nothing to say)."""
        words = []
        if self.change is not None:
            words.append({"newly-failing": "newly failing", "newly-passing": "newly passing",
                          "rate-moved": "rate moved"}[self.change.kind])
        if self.flaky is not None:
            words.append(f"flaky ({self.flaky.flips} flips)")
        return ", ".join(words)


@dataclass
class HistoryView:
    """The history as this session's reports show it."""

    path: str
    #: the session compared with, in words (None: no earlier session of this selection)
    compared_with: str | None
    cases: dict[str, CaseHistory]
    #: a note for the reports (``--connic-since`` found no session at that commit)
    note: str | None = None

    def marks(self) -> dict[str, str]:
        return {nodeid: mark for nodeid, case in self.cases.items() if (mark := case.mark())}

    def flaky(self) -> dict[str, Flaky]:
        return {nodeid: case.flaky for nodeid, case in self.cases.items() if case.flaky is not None}

    def section(self) -> dict[str, object]:
        """The ``history`` section of the JSON report."""
        return {
            "path": self.path,
            "compared_with": self.compared_with,
            "note": self.note,
            "cases": {
                nodeid: {
                    "change": None if c.change is None else {"kind": c.change.kind, "text": c.change.text},
                    "flaky": None if c.flaky is None else {"flips": c.flaky.flips, "sessions": c.flaky.sessions},
                    "trend": [{"pass_rate": rate, "latency_ms": latency} for rate, latency in c.trend],
                    "changed": list(c.changed),
                    "cassette_changed": c.cassette_changed,
                }
                for nodeid, c in sorted(self.cases.items())
            },
        }


def build_view(path: str, current: Mapping[str, CaseRow], past: Sequence[StoredSession],
               compared: StoredSession | None, *, window: int, note: str | None = None) -> HistoryView:
    """``past``: the recent sessions of this selection (oldest first), without the current one;
    ``compared``: the session changes are measured against (the previous one, or ``--connic-since``'s)."""
    cases = {}
    for nodeid, row in current.items():
        rows = [s.cases[nodeid] for s in past if nodeid in s.cases] + [row]
        before = compared.cases.get(nodeid) if compared is not None else None
        trend = [(r.pass_rate, r.latency_ms) for r in rows[-TREND_SESSIONS:]]
        changed = changed_parts(row.config_parts, before.config_parts) if before is not None else []
        cassette = bool(before is not None and row.cassette_digest and before.cassette_digest
                        and row.cassette_digest != before.cassette_digest)
        cases[nodeid] = CaseHistory(change(row, before), flakiness(rows, window), trend, changed, cassette)
    described = None
    if compared is not None:
        s = compared.session
        described = f"session {s.id} of {s.started}" + (f" at commit {s.git_commit[:12]}" if s.git_commit else "")
    return HistoryView(path, described, cases, note)


def terminal_lines(view: HistoryView) -> list[str]:
    """The lines after the results table: what the marks were compared with, the flaky cases."""
    lines = []
    if view.note:
        lines.append(f"  history: {view.note}")
    if view.compared_with:
        changed = sum(1 for c in view.cases.values() if c.change is not None)
        lines.append(f"  history: {changed} case(s) changed since {view.compared_with} ({_shown(view.path)})")
    else:
        lines.append(f"  history: no earlier session of this selection in {_shown(view.path)}")
    for nodeid, case in sorted(view.cases.items()):
        if case.change is not None and case.what_changed():  # what the user changed, where the verdict did
            lines.append(f"  {nodeid}: {case.change.text}; changed: {', '.join(case.what_changed())}")
    for nodeid, flaky in sorted(view.flaky().items()):
        lines.append(f"  {nodeid}: {flaky.text}")
    return lines


# --------------------------------------------------------------------------- HTML

def sparkline(values: Sequence[float | None], *, label: str, high: float | None = None) -> str:
    """A small inline SVG line chart of ``values`` (None: a gap), scaled to [0, high]."""
    width, height, pad = 120, 28, 3
    known = [v for v in values if v is not None]
    top = high if high is not None else max(known, default=0.0) or 1.0
    step = (width - 2 * pad) / max(len(values) - 1, 1)
    points: list[tuple[str, str]] = []
    for i, value in enumerate(values):
        if value is None:
            continue
        x = pad + i * step
        y = height - pad - (min(value, top) / top) * (height - 2 * pad)
        points.append((f"{x:.1f}", f"{y:.1f}"))
    dots = "".join(f'<circle cx="{x}" cy="{y}" r="1.8"/>' for x, y in points[-1:])
    return (f'<svg class="trend" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(label)}">'
            f"<title>{html.escape(label)}</title>"
            f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{" ".join(f"{x},{y}" for x, y in points)}"/>'
            f"{dots}</svg>")


def history_html(section: object, names: Mapping[str, str] | None = None) -> str:
    """The ``history`` section of a JSON report as static, escaped HTML (empty without one);
    ``names``: node id -> the case's name as the page shows it (``agent::name``), else the node id
    unescaped (``%3A%3A`` read as ``::``)."""
    if not isinstance(section, dict) or not section.get("cases"):
        return ""
    import urllib.parse

    names = names or {}
    rows = []
    for nodeid, case in section["cases"].items():
        name = names.get(nodeid) or urllib.parse.unquote(nodeid)
        trend = case.get("trend") or []
        rates = [t.get("pass_rate") for t in trend]
        latencies = [t.get("latency_ms") for t in trend]
        marks = []
        if case.get("change"):
            marks.append(f'<span class="mark {html.escape(case["change"]["kind"])}">'
                         f'{html.escape(case["change"]["text"])}</span>')
        if case.get("flaky"):
            flaky = case["flaky"]
            text = Flaky(int(flaky["flips"]), int(flaky["sessions"])).text
            marks.append(f'<span class="mark flaky">{html.escape(text)}</span>')
        rate_label = "pass rate over the last sessions: " + ", ".join(percent(r) for r in rates)
        latency_label = "median latency over the last sessions: " + ", ".join(
            "—" if v is None else f"{v:.0f} ms" for v in latencies)
        rows.append(f'<tr data-nodeid="{html.escape(nodeid)}"><td class="history-name">{html.escape(name)}</td>'
                    f"<td>{' '.join(marks)}</td>"
                    f"<td>{sparkline(rates, label=rate_label, high=1.0)} {percent(rates[-1] if rates else None)}</td>"
                    f"<td>{sparkline(latencies, label=latency_label)}</td></tr>")
    compared = section.get("compared_with")
    caption = (f"Compared with {compared}" if compared else "No earlier session of this selection") + \
        f" · {len(rows)} case(s) · history {section.get('path', '')}"
    return ('<section id="history" class="history"><style>' + _STYLE + '</style><h2>History</h2>'
            f'<p class="caption">{html.escape(caption)}</p>'
            + (f'<p class="note">{html.escape(str(section["note"]))}</p>' if section.get("note") else "")
            + '<div class="history-scroll"><table><thead><tr><th>Case</th><th>Since last time</th><th>Pass rate</th>'
            "<th>Latency</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table></div></section>")


#: the section's own looks (the page's stylesheet belongs to ``reports/report.css``)
_STYLE = (".history{padding:16px 24px 0;max-width:1200px}.history h2{font-size:16px;margin:0 0 4px}"
          ".history-scroll{overflow-x:auto;max-width:100%}.history .caption{overflow-wrap:anywhere}"
          ".history table{border-collapse:collapse;margin:4px 0 12px;width:100%}"
          ".history td.history-name{overflow-wrap:break-word;word-break:normal;min-width:8em}"
          "@media (max-width:640px){.history th:nth-child(4),.history td:nth-child(4){display:none}"
          ".history svg.trend{width:72px}}"
          ".history th,.history td{padding:2px 10px;text-align:left;border-bottom:1px solid #ddd}"
          ".history svg.trend{vertical-align:middle;color:#2563eb}"
          ".history .mark.newly-failing,.history .mark.flaky{color:#b91c1c}"
          ".history .mark.newly-passing{color:#15803d}")


def budget_html(section: object) -> str:
    """The ``budget`` section of a JSON report as static, escaped HTML (empty without one)."""
    if not isinstance(section, dict):
        return ""
    left = section.get("left_out") or []
    text = str(section.get("text", ""))
    if left:
        text += f"; left out {len(left)} case(s): " + ", ".join(str(n) for n in left)
    return f'<section id="budget" class="budget"><p>{html.escape(text)}</p></section>'


def _shown(path: str) -> str:
    """``path`` relative to the working directory when it is below it, as pytest names files."""
    import os

    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if relative.startswith("..") else relative
