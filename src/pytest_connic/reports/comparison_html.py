"""The HTML of a comparison (``--connic-compare``, ``python -m pytest_connic compare --html``):
a "Compared with" section of static, escaped HTML, each changed case with a side-by-side diff
(the reference left, the subject right), and a small inline script that puts each case's diff on
its card and filters "Changed only". Kept apart from ``html.py`` (which calls it) on purpose."""

from __future__ import annotations

import html
import json
from typing import Any


def _e(value: object) -> str:
    return html.escape(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def _pct(rate: object) -> str:
    return "—" if not isinstance(rate, (int, float)) else f"{rate * 100:.0f}%"


def _words(ops: list[list[str]], keep: str) -> str:
    """One side of a word diff: the unchanged words and those of side ``keep`` (``-`` or ``+``)."""
    tag = "del" if keep == "-" else "ins"
    return "".join(_e(text) if op == "=" else f"<{tag}>{_e(text)}</{tag}>" if op == keep else "…" if op == "…" else ""
                   for op, text in ops)


def _output(output: dict[str, Any] | None) -> str:
    if not output:
        return ""
    if output["kind"] == "text":
        left, right = _words(output["words"], "-"), _words(output["words"], "+")
    else:
        left = "".join(f"<div>{_e(k['path'])}: <del>{_e(k['before'])}</del></div>" if "before" in k
                       else f"<div>{_e(k['path'])}: (absent)</div>" for k in output["keys"])
        right = "".join(f"<div>{_e(k['path'])}: <ins>{_e(k['after'])}</ins></div>" if "after" in k
                        else f"<div>{_e(k['path'])}: (absent)</div>" for k in output["keys"])
    return _pair("Output", f'<pre class="cmp-text">{left}</pre>', f'<pre class="cmp-text">{right}</pre>')


def _tools(tools: list[list[str]]) -> str:
    if not tools:
        return ""

    def side(keep: str) -> str:
        tag = "del" if keep == "-" else "ins"
        items = [f"<li>{_e(text)}</li>" if op == "=" else f'<li class="cmp-{tag}"><{tag}>{_e(text)}</{tag}></li>'
                 for op, text in tools if op in ("=", keep)]
        return f'<ol class="cmp-tools">{"".join(items)}</ol>'

    return _pair("Tool calls", side("-"), side("+"))


def _pair(label: str, left: str, right: str) -> str:
    return (f'<div class="cmp-label">{_e(label)}</div><div class="cmp-sides">'
            f'<div class="cmp-side"><div class="cmp-head">Before</div>{left}</div>'
            f'<div class="cmp-side"><div class="cmp-head">Now</div>{right}</div></div>')


def case_diff(change: dict[str, Any]) -> str:
    """One changed case: its facts and its side-by-side diff."""
    facts = []
    if change["verdict"]:
        facts.append(f"verdict: {change['verdict']['before']} → <strong>{_e(change['verdict']['after'])}</strong>")
    if change["rate"]:
        facts.append(_e(change["rate"]["text"]))
    facts += [f"{_e(d['what'])}: {_e(d['before'] or '—')} → <strong>{_e(d['after'] or '—')}</strong>"
              for d in change["decisions"]]
    facts.append(_e(change.get("deltas", "")))
    what = list(change["configuration"]) + (["cassette re-recorded"] if change["cassette_changed"] else [])
    if what:
        facts.append("changed: " + _e(", ".join(what)))
    facts += [f"({_e(note)})" for note in change["notes"]]
    return (f'<div class="cmp-case" data-nodeid="{_e(change["nodeid"])}">'
            f'<div class="cmp-name">{_e(change["name"])}</div>'
            + "".join(f'<div class="cmp-fact">{fact}</div>' for fact in facts)
            + _output(change["output"]) + _tools(change["tools"]) + "</div>")


def comparison_html(section: object) -> str:
    """The ``comparison`` section as a "Compared with" block (empty without one)."""
    if not isinstance(section, dict) or "changed" not in section:
        return ""
    head = list(section.get("text") or ["", "", ""])
    only = "".join(f'<li>{_e(what)}: {_e(c["name"])} ({_e(c["verdict"])})</li>'
                   for key, what in (("only_subject", "only in the subject"), ("only_reference", "only in the reference"))
                   for c in section[key])
    return ('<section id="comparison" class="comparison"><style>' + _STYLE + "</style>"
            f'<h2>Compared with {_e(section["reference"])}</h2>'
            f'<p class="cmp-caption">{_e(head[0])}</p><p class="cmp-caption">{_e(head[1])}; {_e(head[2])}</p>'
            '<label class="cmp-filter"><input type="checkbox" id="changed-only"> Changed only</label>'
            + (f'<ul class="cmp-only">{only}</ul>' if only else "")
            + '<div class="cmp-cases">' + "".join(case_diff(c) for c in section["changed"]) + "</div>"
            + "<script>" + _SCRIPT + "</script></section>")


def standalone_page(section: dict[str, Any], csp: str) -> str:
    """The comparison alone as a page (``python -m pytest_connic compare --html`` of two sessions
    of the history, which have no report to show it in); ``csp``: the report's policy."""
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp)}"><title>Connic comparison</title>'
            '</head><body style="margin:0;font:14px/1.45 system-ui,sans-serif">' + comparison_html(section)
            + "</body></html>")


#: the section's own looks; a narrow screen stacks the two sides
_STYLE = (".comparison{padding:16px 24px 0;max-width:1200px}.comparison h2{font-size:16px;margin:0 0 4px;"
          "overflow-wrap:anywhere}.cmp-caption{margin:2px 0;overflow-wrap:anywhere}"
          ".cmp-case{border:1px solid #ddd;border-radius:8px;padding:8px 12px;margin:8px 0;background:inherit}"
          ".cmp-name{font-weight:600;overflow-wrap:anywhere}.cmp-fact{font-size:13px;overflow-wrap:anywhere}"
          ".cmp-label{font-size:12px;font-weight:600;text-transform:uppercase;margin-top:6px}"
          ".cmp-sides{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:8px}"
          ".cmp-side{min-width:0}.cmp-head{font-size:12px;color:#5f6670}"
          ".cmp-text,.cmp-tools{white-space:pre-wrap;overflow-wrap:anywhere;margin:2px 0;font-size:12px}"
          ".cmp-tools{padding-left:20px;font-family:ui-monospace,monospace}"
          "del{background:#ffebe9;color:#82071e;text-decoration:line-through}"
          "ins{background:#dafbe1;color:#116329;text-decoration:none}"
          ".case .cmp-case{margin:8px 14px}"
          "body.changed-only section.case.cmp-unchanged,body.changed-only tr.cmp-unchanged{display:none}"
          "@media (max-width:640px){.cmp-sides{grid-template-columns:minmax(0,1fr)}.comparison{padding:12px 12px 0}}")

#: puts each changed case's diff on its card (built by report.js) and filters "Changed only"
_SCRIPT = """(() => {
  "use strict";
  const diffs = new Map([...document.querySelectorAll("#comparison .cmp-case")].map((d) => [d.dataset.nodeid, d]));
  const changed = new Set(diffs.keys());
  function place() {
    for (const node of document.querySelectorAll("section.case[data-nodeid], #summary-table tr[data-nodeid]")) {
      const id = node.dataset.nodeid;
      node.classList.toggle("cmp-unchanged", !changed.has(id));
      const body = node.tagName === "SECTION" ? node.querySelector(".case-body") : null;
      if (body && diffs.has(id) && !body.querySelector(".cmp-case")) body.insertBefore(diffs.get(id).cloneNode(true), body.children[1] || null);
    }
  }
  const box = document.getElementById("changed-only");
  function apply() { document.body.classList.toggle("changed-only", box.checked); }
  box.checked = /(^#|&)changed(&|$)/.test(location.hash);
  box.addEventListener("change", () => {
    apply();
    const rest = location.hash.replace(/^#/, "").split("&").filter((p) => p && p !== "changed");
    if (box.checked) rest.push("changed");
    try { history.replaceState(null, "", rest.length ? "#" + rest.join("&") : location.pathname + location.search); } catch (e) { /* file: URLs */ }
  });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => { place(); apply(); });
  else { place(); apply(); }
})();"""
