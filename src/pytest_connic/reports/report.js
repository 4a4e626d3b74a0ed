// Renders the embedded report. Builds the DOM with textContent only: no user string is ever
// parsed as HTML. Honours "#failing" and "#q=<text>" (or "?failing=1&q=<text>") on load.
// Failures come first, in the case list and in the summary table (sortable by any column: click
// a header, again to reverse); the filter applies to both.
(() => {
  "use strict";
  const report = JSON.parse(document.getElementById("connic-report").textContent);
  const $ = (id) => document.getElementById(id);
  const items = [];

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // ``text`` in ``node``, free to break after each of ``marks`` ("/", "::", "_") when its column
  // is narrow, rather than inside a word (<wbr>: nothing of it is copied with the text)
  function breakable(node, text, marks) {
    const parts = String(text).split(new RegExp("(?<=" + marks.map((m) => m.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|") + ")"));
    parts.forEach((part, i) => {
      node.appendChild(document.createTextNode(part));
      if (i < parts.length - 1) node.appendChild(document.createElement("wbr"));
    });
    return node;
  }

  function add(parent, ...kids) {
    for (const kid of kids) if (kid) parent.appendChild(kid);
    return parent;
  }

  function pretty(value) {
    if (value === null || value === undefined) return "";
    if (typeof value === "string") {
      const text = value.trim();
      if (text.startsWith("{") || text.startsWith("[")) {
        try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* not JSON: as is */ }
      }
      return value;
    }
    return JSON.stringify(value, null, 2);
  }

  function isEmpty(value) {
    return value === null || value === undefined || value === "" ||
      (typeof value === "object" && Object.keys(value).length === 0);
  }

  function field(label, value) {
    if (isEmpty(value)) return null;
    return add(el("div", "field"), el("div", "label", label), el("pre", null, pretty(value)));
  }

  function pct(x) { return x === null || x === undefined ? "—" : (x * 100).toFixed(1).replace(/\.0$/, "") + "%"; }
  function ms(x) {
    if (x === null || x === undefined) return "—";
    return x >= 1000 ? (x / 1000).toFixed(2) + "s" : Math.round(x) + "ms";
  }

  // a latency with the skipped retry delays it includes: "30.01s (30.00s virtual)"
  function latency(x, virtual) { return ms(x) + (virtual > 0 && x ? " (" + ms(virtual) + " virtual)" : ""); }
  // dollars, "—" when a price is unknown (cost_known false), never a made-up $0.0000
  function dollars(cost, known) {
    if (cost === null || cost === undefined || known === false) return "—";
    return cost === 0 ? "$0" : "$" + Number(cost).toFixed(cost >= 0.0001 ? 4 : 6);
  }

  function badge(status) {
    const text = { passed: "PASS", failed: "FAIL", error: "ERROR", skipped: "SKIPPED" }[status] || status;
    return el("span", "badge " + status, text);
  }

  function caseStatus(c) { return c.status || (c.passed ? "passed" : "failed"); }

  // --- trace ---------------------------------------------------------------------------------

  function meta(span) {
    try { return JSON.parse(span.metadata_json || "{}") || {}; } catch (e) { return {}; }
  }

  function spanLabel(span, m) {
    const base = m.tool_name || m.name || span.name || "span";
    if (m.kind === "model") return base + " · " + (m.input_tokens || 0) + " in / " + (m.output_tokens || 0) + " out tokens";
    if (m.kind === "run") return (m.child ? "child run " : "run ") + base + (m.status === "completed" ? "" : " [" + m.status + "]");
    if (m.kind === "guardrail") return base + ": " + m.status;
    if (m.kind === "agent") return "agent " + base + (m.status && m.status !== "completed" ? " [" + m.status + "]" : "");
    return base;
  }

  function marks(m) {
    const out = [];
    if (m.mocked) out.push(m.mock_function ? "mocked by " + m.mock_function : "mocked");
    if (m.aborted) out.push("aborted");
    if (m.approval) out.push("approval: " + m.approval);
    if (m.via_discovery) out.push("via use_tool");
    for (const hook of m.hooks || []) if (hook && hook.mock) out.push(hook.phase + " hook mocked by " + hook.mock);
    return out.map((text) => el("span", "mark", text));
  }

  function spanDetails(m) {
    const io = el("div", "io");
    const pair = (label, value) => add(io, add(el("div"), el("div", "label", label), el("pre", null, pretty(value))));
    if (m.kind === "tool") {
      pair("params", m.params || {});
      if (m.has_result) pair("result", m.result);
    } else if (m.kind === "run" && m.child) {
      pair("input", m.input);
      pair("output", m.output);
    } else if (m.kind === "model" && !isEmpty(m.content)) {
      pair("content", m.content);
    } else if (m.kind === "guardrail" && m.message && m.status !== "blocked") {  // a block shows it as the error
      pair("message", m.message);
    }
    return io.childNodes.length ? io : null;
  }

  // What a case's report has said already (its reason, a run's checks and error): the same text,
  // or a long enough part of one, is not repeated further down (the terminal report does the same).
  function Said(...texts) {
    const said = texts.filter(Boolean).map(fold);
    return {
      has: (text, part = true) => { const t = fold(text); return !!t && said.some((s) => s === t || (part && t.length >= 16 && s.includes(t))); },
      fresh: (text) => { if (!text || said.some((s) => s === fold(text) || (fold(text).length >= 16 && s.includes(fold(text))))) return null; said.push(fold(text)); return text; },
    };
  }

  function fold(text) { return text === null || text === undefined ? "" : String(text).replace(/\s+/g, " ").trim(); }

  function contextShown(run) {
    const context = run.run_context;
    if (!context || typeof context !== "object" || Array.isArray(context)) return context;
    const same = { run_id: run.run_id, agent_name: run.agent_name, payload: run.input };
    const out = {};
    for (const [k, v] of Object.entries(context)) {
      if (k in same && JSON.stringify(v) === JSON.stringify(same[k])) continue;
      out[k] = v;
    }
    return out;
  }

  function spanNode(span, children, said) {
    const m = meta(span);
    const ok = span.status === "ok";
    const head = add(el("div", "span-head"), el("span", "glyph " + (ok ? "ok" : "error"), ok ? "✓" : "✗"),
      el("span", "span-label", spanLabel(span, m)), el("span", "kind", m.kind || span.name));
    if (span.duration_ms !== null && span.duration_ms !== undefined) add(head, el("span", "dur", ms(span.duration_ms)));
    add(head, ...marks(m));
    const error = m.error || m.message;
    // a run's error is often part of the reason; a call's error there still says which call it was
    if (!ok && error && !(said && said.has(error, m.kind === "run"))) add(head, el("span", "span-error", "— " + error));
    const li = add(el("li", "span span-" + (m.kind || "other")), head, spanDetails(m));
    const kids = children.get(span.span_id) || [];
    if (kids.length) add(li, add(el("ul"), ...kids.map((kid) => spanNode(kid, children, said))));
    return li;
  }

  function traceTree(spans, said) {
    if (!spans || !spans.length) return null;
    const ids = new Set(spans.map((s) => s.span_id));
    const ordered = spans.slice().sort((a, b) => (a.span_order || 0) - (b.span_order || 0));
    const children = new Map();
    const roots = [];
    for (const span of ordered) {
      if (span.parent_span_id && ids.has(span.parent_span_id) && span.parent_span_id !== span.span_id) {
        if (!children.has(span.parent_span_id)) children.set(span.parent_span_id, []);
        children.get(span.parent_span_id).push(span);
      } else {
        roots.push(span);
      }
    }
    return add(el("div", "field"), el("div", "label", "Trace"), add(el("ul", "trace"), ...roots.map((s) => spanNode(s, children, said))));
  }

  // --- runs and cases ------------------------------------------------------------------------

  function runNode(run, reason) {
    const status = run.skipped ? "skipped" : run.passed ? "passed" : "failed";
    const tokens = run.tokens || {};
    const summary = add(el("summary"), badge(status), el("strong", null, "Run " + ((run.index || 0) + 1)),
      el("span", "run-id", run.run_id), el("span", "facts", [run.status, latency(run.duration_ms, run.virtual_ms),
        (tokens.input || 0) + " in / " + (tokens.output || 0) + " out tokens"].join(" · ")));
    const body = el("div", "run-body");
    const said = Said(reason);
    const failures = (run.failures || []).filter((f) => said.fresh(f));
    if (failures.length) {
      add(body, add(el("div", "field"), el("div", "label", "Failed checks"),
        add(el("ul", "failures"), ...failures.map((f) => el("li", null, f)))));
    } else if ((run.failures || []).length) {
      add(body, add(el("div", "field"), el("div", "label", "Failed checks"), el("div", "said", "the reason above")));
    }
    add(body, field("Infrastructure error", said.fresh(run.infrastructure_error)), field("Error", said.fresh(run.error)),
      field("Input", run.input), field("Output", run.output), field("Context", contextShown(run)), traceTree(run.traces, said));
    const details = add(el("details", "run"), summary, body);
    details.open = status === "failed";
    return details;
  }

  function caseFacts(c) {
    const tokens = c.tokens || {};
    const wilson = c.wilson_95 ? "95% CI " + pct(c.wilson_95[0]) + "–" + pct(c.wilson_95[1]) : null;
    const facts = [c.successes + "/" + c.runs + " runs", "threshold " + c.success_threshold + "%",
      c.replay_note || null, "pass rate " + pct(c.pass_rate), wilson, "median " + latency(c.median_latency_ms, c.median_latency_virtual_ms),
      c.runs_detail && c.runs_detail.some((r) => !r.skipped) ? "cost " + dollars(c.cost, c.cost_known) : null,
      (tokens.input || 0) + " in / " + (tokens.output || 0) + " out tokens"];
    return el("span", "facts", facts.filter(Boolean).join(" · "));
  }

  function searchText(c) {
    const parts = [c.agent_name, c.test_name, c.nodeid, c.failure_reason, c.setup_error, ...(c.warnings || [])];
    for (const run of c.runs_detail || []) {
      parts.push(run.run_id, pretty(run.output), run.error, ...(run.failures || []));
      for (const span of run.traces || []) { const m = meta(span); parts.push(m.tool_name, m.name); }
    }
    return parts.filter((p) => p !== null && p !== undefined).join("\n").toLowerCase();
  }

  // failures first (failed, error, interrupted), then skipped, then passed; stable otherwise
  function rank(status) { return status === "passed" ? 2 : status === "skipped" ? 1 : 0; }

  // The notes of a case's runs (divergence notes first, each text once) and its warnings (those
  // that do not repeat a note): shown on the card itself, in the always-visible summary, not only
  // inside a collapsed trace.
  function caseNotes(c) {
    const notes = new Map();
    for (const run of c.runs_detail || []) {
      for (const event of run.events || []) {
        if (event && event.type === "note" && event.text && !notes.has(event.text)) notes.set(event.text, !!event.divergence);
      }
    }
    const ordered = [...notes].sort((a, b) => Number(b[1]) - Number(a[1]));
    const lines = ordered.map(([text, divergence]) => el("div", "card-note" + (divergence ? " divergence" : ""),
      (divergence ? "Divergence: " : "Note: ") + text));
    // the case's CassetteDivergenceWarning repeats a divergence note shown above: once is enough
    const said = (warning) => [...notes.keys()].some((text) => warning.includes(text));
    for (const warning of c.warnings || []) {
      if (!said(warning)) lines.push(el("div", "card-note warning", "Warning: " + warning));
    }
    return lines.length ? add(el("div", "card-notes"), ...lines) : null;
  }

  // A failure's traceback (the user's frames), when the runs carry one: on the card, above the runs.
  function caseTraceback(c) {
    const t = c.traceback;
    if (!t || typeof t.text !== "string" || !t.text.trim()) return null;
    // the label is set in capitals: what raised and where go on a line of their own, as written
    const origin = t.origin ? el("div", "traceback-origin", t.origin + " raised" + (t.where ? " at " + t.where : "")) : null;
    return add(el("div", "field"), el("div", "label", "Traceback"), origin, el("pre", "traceback", t.text));
  }

  function caseNode(c, index) {
    const status = caseStatus(c);
    const summary = add(el("summary"), badge(status), el("span", "case-name", c.agent_name + "::" + c.test_name), caseFacts(c),
      caseNotes(c));
    const body = add(el("div", "case-body"), el("div", "where", c.nodeid + "  (" + c.suite + ":" + c.line + ")"));
    if (c.failure_reason) add(body, el("div", "reason", c.failure_reason));
    add(body, caseTraceback(c));
    if (c.replay_note) add(body, el("div", "note", c.replay_note + ": the runs beyond the recorded ones replay copies of them, not independent runs (no interval is given)"));
    if (c.skipped_runs) add(body, el("div", "note", c.skipped_runs + " run(s) not started" + (c.early_stop_reason ? ": " + c.early_stop_reason : "")));
    add(body, ...(c.runs_detail || []).map((run) => runNode(run, c.failure_reason)));
    const details = add(el("details"), summary, body);
    details.open = status !== "passed";
    const section = add(el("section", "case"), details);
    section.dataset.status = status;
    section.id = "case-" + index;
    section.dataset.nodeid = c.nodeid;  // the comparison's diffs find their card by it
    const item = { node: section, details: details, status: status, text: searchText(c), row: null };
    item.row = summaryRow(c, status, item);
    items.push(item);
    return section;
  }

  // --- the summary table ----------------------------------------------------------------------

  function summaryRow(c, status, item) {
    const tokens = c.tokens || {};
    const row = el("tr", "row-" + status);
    row.dataset.nodeid = c.nodeid;
    const link = breakable(el("a", "case-link"), c.agent_name + "::" + c.test_name, ["::", "_"]);
    link.href = "#";
    link.addEventListener("click", (event) => {
      event.preventDefault();  // the hash holds the filter
      item.details.open = true;
      item.node.scrollIntoView({ block: "start" });
    });
    const cells = [add(el("td"), badge(status)), add(el("td"), link), breakable(el("td", "where"), c.suite + ":" + c.line, ["/"]),
      el("td", "num", c.successes + "/" + c.runs), el("td", "num", c.success_threshold + "%"),
      el("td", "num", pct(c.pass_rate)), el("td", "num", latency(c.median_latency_ms, c.median_latency_virtual_ms)),
      el("td", "num", (tokens.input || 0) + "\u00a0in\u00a0/ " + (tokens.output || 0) + "\u00a0out"),  // breaks after "/" only
      el("td", "num", (c.runs_detail || []).some((r) => !r.skipped) ? dollars(c.cost, c.cost_known) : "—")];
    add(row, ...cells);
    row.sortKeys = {
      order: rank(status), name: (c.agent_name + "::" + c.test_name).toLowerCase(), where: c.suite + ":" + String(c.line).padStart(8, "0"),
      runs: c.runs ? c.successes / c.runs : 0, threshold: c.success_threshold, rate: c.pass_rate === null || c.pass_rate === undefined ? -1 : c.pass_rate,
      latency: c.median_latency_ms === null || c.median_latency_ms === undefined ? -1 : c.median_latency_ms,
      tokens: (tokens.input || 0) + (tokens.output || 0), cost: c.cost_known === false ? -1 : c.cost || 0,
    };
    return row;
  }

  let sortState = { key: "order", dir: 1 };

  function sortTable(key) {
    sortState = { key: key, dir: sortState.key === key ? -sortState.dir : 1 };
    renderTable();
  }

  function renderTable() {
    const body = document.querySelector("#summary-table tbody");
    const rows = items.map((item, i) => ({ row: item.row, i: i }));
    const { key, dir } = sortState;
    rows.sort((a, b) => {
      const x = a.row.sortKeys[key], y = b.row.sortKeys[key];
      return (x < y ? -1 : x > y ? 1 : 0) * dir || a.i - b.i;
    });
    for (const { row } of rows) body.appendChild(row);
    for (const th of document.querySelectorAll("#summary-table th")) {
      if (th.dataset.key === key) th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    }
  }

  // --- filter --------------------------------------------------------------------------------

  function apply() {
    const failingOnly = $("failing-only").checked;
    const query = $("search").value.trim().toLowerCase();
    let shown = 0;
    for (const item of items) {
      const visible = (!failingOnly || item.status !== "passed") && (!query || item.text.includes(query));
      item.node.hidden = !visible;
      item.row.hidden = !visible;
      if (visible) shown += 1;
    }
    $("shown-count").textContent = shown + " of " + items.length + " cases shown";
    $("no-match").hidden = shown !== 0;
  }

  function readLocation() {
    const params = new URLSearchParams(location.search);
    const hash = new URLSearchParams(location.hash.replace(/^#/, ""));
    const failing = hash.has("failing") || ["1", "true", "yes"].includes(params.get("failing") || "");
    $("failing-only").checked = failing;
    $("search").value = hash.get("q") || params.get("q") || "";
  }

  function writeLocation() {
    const hash = new URLSearchParams();
    if ($("failing-only").checked) hash.set("failing", "");
    if ($("search").value) hash.set("q", $("search").value);
    const text = hash.toString().replace(/^failing=(&|$)/, "failing$1");
    try { history.replaceState(null, "", text ? "#" + text : location.pathname + location.search); } catch (e) { /* file: URLs in some browsers */ }
  }

  function setAll(open) {
    for (const node of document.querySelectorAll("#cases details")) node.open = open;
  }

  const main = $("cases");
  const cases = (report.cases || []).map((c, i) => ({ c: c, i: i }));
  cases.sort((a, b) => rank(caseStatus(a.c)) - rank(caseStatus(b.c)) || a.i - b.i);
  add(main, ...cases.map(({ c }, i) => caseNode(c, i)));
  if (!items.length) add(main, el("div", "empty", "No cases were run."));
  renderTable();
  for (const th of document.querySelectorAll("#summary-table th")) {
    th.tabIndex = 0;
    th.title = "Sort by " + th.textContent;
    th.addEventListener("click", () => sortTable(th.dataset.key));
    th.addEventListener("keydown", (event) => { if (event.key === "Enter" || event.key === " ") { event.preventDefault(); sortTable(th.dataset.key); } });
  }
  readLocation();
  apply();
  $("failing-only").addEventListener("change", () => { writeLocation(); apply(); });
  $("search").addEventListener("input", () => { writeLocation(); apply(); });
  $("expand-all").addEventListener("click", () => setAll(true));
  $("collapse-all").addEventListener("click", () => setAll(false));
  window.addEventListener("hashchange", () => { readLocation(); apply(); });
  document.body.dataset.ready = "true";
})();
