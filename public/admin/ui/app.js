// The memory inspector: plain DOM, no build step. Every request goes to the Worker's
// Access-gated admin routes; the token (when given) is sent as Cf-Access-Jwt-Assertion.
"use strict";

const state = { token: sessionStorage.getItem("inspector-token") || "", tenant: "",
  cursors: { runs: null, facts: null, events: null } };
const $ = (sel) => document.querySelector(sel);

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "style") el.style.cssText = v; // CSSOM: allowed by the CSP (no inline style)
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// Like el.replaceChildren, but null / false children (a view's optional parts) are skipped.
function fill(el, ...children) {
  el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

const when = (ms) => (ms ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) : "—");
const num = (x, d = 3) => Number(x).toFixed(d);

function setStatus(text, isError) {
  const el = $("#status");
  el.textContent = text;
  el.className = isError ? "error" : "";
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (state.token) headers["Cf-Access-Jwt-Assertion"] = state.token;
  // Every change is JSON: with only the Access cookie, the Worker refuses other types (CSRF).
  if (body !== undefined || method !== "GET") headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) {
    const err = data.error || { code: "http_" + res.status, message: res.statusText };
    const e = new Error(`${err.code}: ${err.message}`);
    e.code = err.code;
    e.status = res.status;
    throw e;
  }
  return data;
}

function guard(fn) {
  return async (...args) => {
    try { await fn(...args); } catch (e) {
      const hint = e.status === 401 ? " — paste a token above (see “How do I get a token locally?”)" : "";
      setStatus(e.message + hint, true);
    }
  };
}

const tenantPath = (rest) => `/admin/tenants/${encodeURIComponent(state.tenant)}${rest}`;
const qs = (obj) => {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(obj)) if (v !== "" && v !== null && v !== undefined) p.set(k, v);
  const s = p.toString();
  return s ? "?" + s : "";
};

// ---------------------------------------------------------------- tenants and tabs

// The tenants this operator may operate: a platform admin's are every tenant with data, a
// tenant-scoped operator's are its grants (scope "granted").
const loadTenants = guard(async () => {
  const data = await api("GET", "/admin/tenants");
  const sel = $("#tenant");
  const keep = state.tenant;
  const granted = data.scope === "granted";
  const none = granted ? "(no tenant granted to you)" : "(no tenants yet)";
  sel.replaceChildren(h("option", { value: "" }, data.tenants.length ? "(choose a tenant)" : none),
    ...data.tenants.map((t) => h("option", { value: t, selected: t === keep }, t)));
  setStatus(`${data.tenants.length} tenant(s)${granted ? " granted to you" : ""}`);
  if (keep && data.tenants.includes(keep)) sel.value = keep;
  else if (data.tenants.length === 1) { sel.value = data.tenants[0]; selectTenant(data.tenants[0]); }
});

function currentView() {
  const tab = document.querySelector('.tabs [aria-selected="true"]');
  return tab ? tab.dataset.view : "runs";
}

function showView(name) {
  for (const tab of document.querySelectorAll(".tabs [role=tab]")) {
    const on = tab.dataset.view === name;
    tab.setAttribute("aria-selected", String(on));
    tab.tabIndex = on ? 0 : -1;
  }
  for (const view of document.querySelectorAll(".view")) view.hidden = view.id !== "view-" + name;
  setStatus("");
  if (state.tenant) refresh(name);
}

function refresh(name) {
  if (!state.tenant) return;
  if (name === "runs") loadRuns(false);
  else if (name === "facts") loadFacts(false);
  else if (name === "events") loadEvents(false);
  else if (name === "brief") loadBrief();
  else if (name === "portability") loadPortability();
}

function selectTenant(t) {
  state.tenant = t;
  for (const id of ["#run-detail", "#fact-detail", "#recall-results", "#erase-report", "#exports",
    "#webhooks", "#deliveries"]) $(id).replaceChildren();
  refresh(currentView());
}

// ---------------------------------------------------------------- runs

const loadRuns = guard(async (more) => {
  const data = await api("GET", `/admin/agents/${encodeURIComponent(state.tenant)}/runs` +
    qs({ limit: 20, cursor: more ? state.cursors.runs : "" }));
  state.cursors.runs = data.next_cursor;
  $("#runs-more").hidden = !data.next_cursor;
  const items = data.runs.map((run) => h("li", { "data-run-id": run.run_id },
    h("button", { class: "open", type: "button", onclick: () => openRun(run.run_id) },
      h("span", { class: "badge " + run.status }, run.status),
      h("strong", {}, run.agent_type), " · ", (run.input && run.input.text) || "",
      h("div", { class: "meta" }, `${when(run.started_at)} · ${run.steps} step(s) · `,
        `${((run.input && run.input.context_episode_ids) || []).length} recalled episode(s) · run ${run.run_id}`))));
  if (more) $("#runs-list").append(...items);
  else $("#runs-list").replaceChildren(...(items.length ? items : [h("li", {}, "No runs yet.")]));
  setStatus(`${state.tenant}: runs loaded`);
});

const openRun = guard(async (runId) => {
  const data = await api("GET", `/admin/agents/${encodeURIComponent(state.tenant)}/runs/${runId}`);
  const run = data.run;
  const recalled = (run.input && run.input.context_episode_ids) || [];
  const episodes = new Map();
  if (recalled.length) {
    const found = await api("GET", tenantPath("/episodes") + qs({ ids: recalled.join(",") }));
    for (const ep of found.episodes) episodes.set(ep.episode_id, ep);
  }
  const steps = data.run_log.map((entry) => {
    const d = entry.detail || {};
    let text = entry.kind;
    if (entry.kind === "turn_start") text = `turn ${d.turn_count} starts: “${d.input}”`;
    else if (entry.kind === "memory_read") text = `read ${d.tier} (${d.op})` +
      (d.episode_ids ? `: ${d.episode_ids.length} episode(s)` : "") + (d.workflow_id ? `: ${d.workflow_id}` : "");
    else if (entry.kind === "memory_write") text = `write ${d.tier} (${d.op}${d.key ? " " + d.key : ""})`;
    else if (entry.kind === "llm_call") text = `LLM step ${d.llm_step}` +
      (d.tool_calls && d.tool_calls.length ? ` → calls ${d.tool_calls.join(", ")}` : " → answers");
    else if (entry.kind === "tool_call") text = `tool ${d.tool} ${d.ok ? "ok" : "failed"}: ${d.arguments || ""}`;
    else if (entry.kind === "turn_end") text = `turn ends: ${d.status}, ${d.steps} step(s), ${d.tool_calls} tool call(s)`;
    return h("li", { class: entry.kind }, h("span", { class: "meta" }, `step ${entry.step} · `), text);
  });
  fill($("#run-detail"),
    h("h3", {}, `Run ${run.run_id}`),
    h("p", {}, h("span", { class: "badge " + run.status }, run.status),
      `${run.agent_type} / ${run.instance_id} · started ${when(run.started_at)} · finished ${when(run.finished_at)}`),
    h("p", {}, h("strong", {}, "Input: "), (run.input && run.input.text) || ""),
    h("p", {}, h("strong", {}, "Output: "), (run.output && run.output.text) || run.error || ""),
    h("h3", {}, "Steps"), h("ol", { class: "timeline steps" }, steps),
    h("h3", {}, `Recalled episodes (${recalled.length})`),
    recalled.length ? h("ul", { class: "recalled" }, recalled.map((id) => {
      const ep = episodes.get(id);
      if (!ep) return h("li", { "data-episode-id": id }, h("span", { class: "mono" }, id), " (no longer stored)");
      return h("li", { "data-episode-id": id }, h("span", { class: "badge" }, ep.kind),
        ep.subject ? `[${ep.subject}] ` : "", ep.content, " ",
        h("button", { type: "button", onclick: () => openRun(ep.run_id) }, "open its run"));
    })) : h("p", { class: "meta" }, "none"),
    h("h3", {}, "Episodes written"),
    h("ul", {}, data.episodes.map((e) => h("li", {}, h("span", { class: "badge" }, e.kind),
      e.subject ? `[${e.subject}] ` : "", e.content))));
  $("#run-detail").focus();
});

// ---------------------------------------------------------------- facts

function factLine(view) {
  const f = view.fact;
  return [h("span", { class: "badge " + view.status }, view.status), f.content,
    h("div", { class: "meta" }, `${f.subject} · ${f.predicate} · ${f.object || "—"} · ` +
      `confidence ${num(f.confidence, 2)} · ${f.agent_type} · ${when(f.created_at)}`)];
}

const loadFacts = guard(async (more) => {
  const form = new FormData($("#facts-filter"));
  const data = await api("GET", tenantPath("/facts") + qs({ ...Object.fromEntries(form), limit: 20,
    cursor: more ? state.cursors.facts : "" }));
  state.cursors.facts = data.next_cursor;
  $("#facts-more").hidden = !data.next_cursor;
  const items = data.facts.map((view) => h("li", { "data-fact-id": view.fact.fact_id },
    h("button", { class: "open", type: "button", onclick: () => openFact(view.fact.fact_id) }, factLine(view))));
  if (more) $("#facts-list").append(...items);
  else $("#facts-list").replaceChildren(...(items.length ? items : [h("li", {}, "No facts match.")]));
  setStatus(`${state.tenant}: facts loaded`);
});

const openFact = guard(async (factId) => {
  const d = await api("GET", tenantPath(`/facts/${factId}`));
  const f = d.fact.fact;
  const timeline = d.timeline.map((v) => {
    const mine = v.fact.fact_id === f.fact_id;
    return h("li", { class: mine ? "current" : "" },
      h("div", { class: "meta" }, `${when(v.fact.valid_from)} → ${v.fact.valid_to ? when(v.fact.valid_to) : "now"}`),
      h("span", { class: "badge " + v.status }, v.status), v.fact.content,
      mine ? h("strong", {}, " (this fact)")
        : [" ", h("button", { type: "button", onclick: () => openFact(v.fact.fact_id) }, "open")]);
  });
  const successor = d.replaced_by[0];
  fill($("#fact-detail"),
    h("h3", {}, "Fact ", h("span", { class: "mono" }, f.fact_id)),
    h("p", {}, factLine(d.fact)),
    successor ? h("p", { class: "successor" }, h("strong", {}, "Replaced by: "), successor.fact.content,
      h("span", { class: "meta" }, ` (${successor.fact.fact_id})`)) : null,
    d.replaced.length ? h("p", { class: "replaced" }, h("strong", {}, "Replaced: "),
      d.replaced.map((v) => v.fact.content).join(" · ")) : null,
    h("h3", {}, "What was believed when"), h("ol", { class: "timeline chain" }, timeline),
    h("h3", {}, `Links (${d.links.length})`),
    h("ul", {}, d.links.map((l) => h("li", {}, `${l.direction} ${num(l.score, 2)}: ${l.content || l.fact_id}`))),
    h("h3", {}, `Provenance (${d.provenance.length})`),
    h("ul", {}, d.provenance.map((p) => h("li", {}, `${p.relation} ${p.source_kind} `,
      h("span", { class: "mono" }, p.source_id), p.run_id ? ` (run ${p.run_id})` : "", p.content ? `: ${p.content}` : ""))),
    h("h3", {}, `Supersessions and merges (${d.supersessions.length})`),
    f.status === "superseded" ? h("button", { type: "button", class: "undo",
      onclick: () => undoSupersession(f.fact_id) }, "Undo: make this fact live again") : null,
    h("ul", { class: "supersessions" }, d.supersessions.map((e) => h("li", {}, `${when(e.created_at)} `,
      supersessionLine(e.payload)))),
    h("h3", {}, `Written (${d.written.length}) and retrieved (${d.retrieved.length})`),
    h("ul", { class: "history" }, [...d.written, ...d.retrieved].sort((a, b) => b.created_at - a.created_at)
      .map((e) => h("li", {}, `${when(e.created_at)} ${e.kind}`,
        e.payload.query ? ` for “${e.payload.query}”` : "", e.run_id ? ` in run ${e.run_id}` : ""))));
  $("#fact-detail").focus();
});

// A supersession event names both facts and what decided; an undo or replay, who.
function supersessionLine(p) {
  if (p.op === "supersession_undone" || p.op === "supersession_replayed") {
    return `${p.op === "supersession_undone" ? "undone" : "replayed"} by ${p.by}: ${p.fact_id} / ${p.superseded_by}`;
  }
  const why = p.decision || {};
  return `${why.op || "superseded"} ${p.supersedes} → ${p.key}: ${why.decision || ""} ` +
    `(${why.reason || "?"}, ${why.adjudicator || "?"})`;
}

const undoSupersession = guard(async (factId) => {
  await api("POST", tenantPath(`/facts/${factId}/restore`), {});
  setStatus(`${state.tenant}: supersession of ${factId} undone`);
  await openFact(factId);
});

// ---------------------------------------------------------------- why this recall

const PARTS = ["relevance", "recency", "confidence", "density"];

const explain = guard(async () => {
  const form = new FormData($("#recall-form"));
  const data = await api("POST", tenantPath("/recall/explain"),
    { query: form.get("query"), limit: Number(form.get("limit") || 10) });
  const items = data.results.map((r) => h("li", { "data-fact-id": r.fact_id },
    h("div", {}, h("strong", {}, `#${r.rank} `), r.content, h("span", { class: "meta" }, ` score ${num(r.score, 4)}`)),
    h("div", { class: "bars", role: "img", "aria-label": PARTS.map((p) => `${p} ${num(r.parts[p].weighted, 4)}`).join(", ") },
      PARTS.map((p) => h("div", { class: "bar " + p, "data-part": p, "data-weighted": r.parts[p].weighted,
        title: `${p}: ${num(r.parts[p].value)} × weight ${num(r.parts[p].weight)} = ${num(r.parts[p].weighted, 4)}`,
        style: `width:${(r.parts[p].weighted * 100).toFixed(3)}%` }))),
    h("table", { class: "parts-table" }, h("tr", {}, h("th", {}, "part"), h("th", {}, "value"), h("th", {}, "weight"), h("th", {}, "weighted")),
      PARTS.map((p) => h("tr", { "data-part": p }, h("td", {}, p), h("td", {}, num(r.parts[p].value)),
        h("td", {}, num(r.parts[p].weight)), h("td", {}, num(r.parts[p].weighted, 4))))),
    h("table", { class: "channels" }, h("tr", {}, h("th", {}, "channel"), h("th", {}, "rank"), h("th", {}, "raw score")),
      Object.entries(r.channels).map(([name, c]) => h("tr", { "data-channel": name }, h("td", {}, name),
        h("td", {}, c.rank || "feature"), h("td", {}, num(c.raw, 6)))))));
  $("#recall-results").replaceChildren(...(items.length ? items : [h("li", {}, "Nothing would be recalled.")]));
  setStatus(`${data.results.length} result(s); candidates ${Object.entries(data.candidates).map(([k, v]) => `${k} ${v}`).join(", ")}`);
});

// ---------------------------------------------------------------- events

const toMs = (v) => (v ? String(new Date(v).getTime()) : "");

const loadEvents = guard(async (more) => {
  const form = Object.fromEntries(new FormData($("#events-filter")));
  const data = await api("GET", tenantPath("/events") + qs({ kind: form.kind, tier: form.tier,
    run_id: form.run_id, since: toMs(form.since), until: toMs(form.until), limit: 50,
    cursor: more ? state.cursors.events : "" }));
  state.cursors.events = data.next_cursor;
  $("#events-more").hidden = !data.next_cursor;
  const items = data.events.map((e) => {
    const p = e.payload;
    const what = e.kind === "memory_retrieved"
      ? `${p.query_redacted ? "(query removed: an erase ran while it was recorded)" : "“" + p.query + "”"} → ${(p.results || []).length} result(s)`
      : `${p.source || ""} ${p.subject ? "[" + p.subject + "] " : ""}${p.key || ""}`;
    return h("li", { "data-kind": e.kind }, h("span", { class: "meta" }, when(e.created_at) + " "),
      h("span", { class: "badge" }, e.kind), h("span", { class: "badge" }, e.tier), what,
      e.run_id ? h("span", { class: "meta" }, ` run ${e.run_id}`) : null);
  });
  if (more) $("#events-list").append(...items);
  else $("#events-list").replaceChildren(...(items.length ? items : [h("li", {}, "No events match.")]));
  setStatus(`${state.tenant}: events loaded`);
});

// ---------------------------------------------------------------- brief

function gauge(label, value, warn, limit) {
  return h("div", { class: "gauge" }, h("label", {}, `${label}: ${value.toLocaleString("en")} of ${limit.toLocaleString("en")}`,
    h("meter", { min: 0, max: limit, low: warn, high: warn, optimum: 0, value })),
    h("div", { class: "scale" }, h("span", {}, "0"), h("span", {}, `warn ${warn.toLocaleString("en")}`),
      h("span", {}, `limit ${limit.toLocaleString("en")}`)));
}

const loadBrief = guard(async () => {
  const data = await api("GET", tenantPath("/lifecycle"));
  const b = data.brief;
  fill($("#brief"),
    h("p", {}, h("span", { class: "badge " + (b.level === "ok" ? "active" : "failed") }, b.level),
      `retention ${b.retention_days} days · ${b.episodes_past_retention} episode(s) past retention`),
    gauge("Episodes", b.episodes, b.episode_warn_at, b.episode_limit),
    h("table", { class: "report" }, [["runs", b.runs], ["active facts", b.facts_active],
      ["pending facts", b.facts_pending_vector], ["superseded facts", b.facts_superseded],
      ["links", b.links], ["archives", b.archives], ["archived rows", b.archived_rows]]
      .map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", {}, v)))));
  setStatus(`${state.tenant}: brief loaded`);
});

// ---------------------------------------------------------------- erase

function eraseReady() {
  const form = $("#erase-form");
  const subject = form.elements.subject.value.trim();
  $("#erase-button").disabled = !(subject && subject === form.elements.confirm.value.trim() && state.tenant);
}

const erase = guard(async () => {
  const form = $("#erase-form");
  const subject = form.elements.subject.value.trim();
  if (subject !== form.elements.confirm.value.trim()) return;
  const r = await api("DELETE", tenantPath(`/subjects/${encodeURIComponent(subject)}`));
  const rows = ["working_keys", "episodes", "runs", "facts", "vectors", "links", "provenance",
    "events", "events_scrubbed", "archives_rewritten", "archives_deleted"];
  fill($("#erase-report"),
    h("h3", {}, `Erased “${r.subject}” from ${r.tenant_id}`),
    h("table", { class: "report" }, rows.map((k) => h("tr", { "data-key": k }, h("td", {}, k.replace(/_/g, " ")), h("td", {}, r[k])))),
    h("p", {}, r.complete ? "Complete in every tier." : "Incomplete: repeat the erase."));
  form.reset();
  eraseReady();
  setStatus(`erased ${subject}`);
});

// ---------------------------------------------------------------- exports and the feed

const row = (cells, attrs) => h("tr", attrs || {}, cells.map((c) => h("td", {}, c)));

const loadPortability = guard(async () => {
  const [exports, hooks] = await Promise.all([api("GET", tenantPath("/exports")),
    api("GET", tenantPath("/webhooks"))]);
  fill($("#exports"), row(["export", "status", "progress", "parts", "started", "expires"]),
    exports.exports.map((j) => row([j.job_id, j.status,
      h("progress", { max: Math.max(j.progress.estimate, 1), value: j.progress.records },
        `${j.progress.records} of ${j.progress.estimate}`),
      j.progress.part, when(j.started_at), when(j.expires_at)], { "data-status": j.status })));
  fill($("#webhooks"), row(["endpoint", "url", "status", ""]),
    hooks.endpoints.map((e) => row([e.endpoint_id, e.url, e.status,
      h("button", { type: "button", onclick: () => pauseEndpoint(e) },
        e.status === "active" ? "Pause" : "Resume")])));
  fill($("#deliveries"), row(["change", "type", "status", "attempts", "HTTP", "error", "when"]),
    hooks.deliveries.map((d) => row([d.message_id, d.type, d.status, d.attempts,
      d.http_status ?? "—", d.error ?? "", when(d.updated_at)], { "data-status": d.status })));
  setStatus(`${state.tenant}: ${exports.exports.length} export(s), ${hooks.endpoints.length} endpoint(s)`);
});

const pauseEndpoint = guard(async (e) => {
  await api("PATCH", tenantPath(`/webhooks/${e.endpoint_id}`),
    { status: e.status === "active" ? "paused" : "active" });
  loadPortability();
});

const startExport = guard(async () => {
  await api("POST", tenantPath("/exports"), {});
  loadPortability();
});

// ---------------------------------------------------------------- wiring

function wire() {
  $("#token").value = state.token;
  $("#access-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.token = $("#token").value.trim();
    sessionStorage.setItem("inspector-token", state.token);
    loadTenants();
  });
  $("#reload-tenants").addEventListener("click", () => loadTenants());
  $("#tenant").addEventListener("change", (ev) => selectTenant(ev.target.value));
  const tabs = [...document.querySelectorAll(".tabs [role=tab]")];
  tabs.forEach((tab, i) => {
    tab.addEventListener("click", () => showView(tab.dataset.view));
    tab.addEventListener("keydown", (ev) => {
      const step = ev.key === "ArrowRight" ? 1 : ev.key === "ArrowLeft" ? -1 : 0;
      if (!step) return;
      const next = tabs[(i + step + tabs.length) % tabs.length];
      next.focus();
      showView(next.dataset.view);
    });
  });
  $("#runs-more").addEventListener("click", () => loadRuns(true));
  $("#facts-more").addEventListener("click", () => loadFacts(true));
  $("#events-more").addEventListener("click", () => loadEvents(true));
  $("#facts-filter").addEventListener("submit", (ev) => { ev.preventDefault(); loadFacts(false); });
  $("#events-filter").addEventListener("submit", (ev) => { ev.preventDefault(); loadEvents(false); });
  $("#recall-form").addEventListener("submit", (ev) => { ev.preventDefault(); explain(); });
  $("#erase-form").addEventListener("input", eraseReady);
  $("#erase-form").addEventListener("submit", (ev) => { ev.preventDefault(); erase(); });
  $("#export-start").addEventListener("click", startExport);
  showView("runs");
  loadTenants();
}

wire();
