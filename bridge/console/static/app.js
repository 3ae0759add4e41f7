// jetplane's web console: plain JavaScript, no build step. Everything it
// shows comes from the HTTP API, with the token the user gives (kept in
// this browser's local storage), so it sees what the API lets that token
// see. Pages: objects (live through the watch API), one object (spec,
// status, dependsOn graph, history with a diff per event), time travel
// (the state as of any log sequence), clusters, partitions.
"use strict";

const TOKEN_KEY = "jetplane.token";
let pageAbort = null; // ends the current page's watches and requests

// el builds DOM nodes; strings become text, never HTML.
function el(tag, attrs, ...children) {
  const ns = ["svg", "line", "rect", "text", "g", "a", "path", "marker", "defs"].includes(tag) && attrs && attrs.svg;
  const n = ns ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "svg" || v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
    else if (k === "text") n.textContent = v;
    else n.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    n.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return n;
}

function headers() {
  const t = localStorage.getItem(TOKEN_KEY);
  return t ? { Authorization: "Bearer " + t } : {};
}

function banner(msg) {
  const b = document.getElementById("banner");
  b.textContent = msg || "";
  b.hidden = !msg;
}

// NEED_TOKEN is what the console says without a (valid) token. The
// server's own 401 text is written for command lines (--token); the
// console has its box instead.
const NEED_TOKEN = "This console needs an API token: paste one in the box at the top right. Whoever runs this jetplane server can give you one.";

// apiError is an error of the API with its HTTP status; the console's
// own wording replaces the server's for a missing token.
function apiError(status, body, statusText) {
  const e = new Error(status === 401 ? NEED_TOKEN : (body.error || status + " " + statusText));
  e.status = status;
  // A token confined to namespaces, asked about every namespace, gets
  // its namespaces to pick from.
  const m = status === 403 && /is confined to namespaces ([^;]+);/.exec(body.error || "");
  if (m) e.namespaces = m[1].split(",").map((x) => x.trim()).filter(Boolean);
  if (status === 401) banner(NEED_TOKEN);
  return e;
}

async function api(path, params, signal) {
  const u = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params || {})) if (v !== "" && v !== undefined && v !== null) u.searchParams.set(k, v);
  const r = await fetch(u, { headers: headers(), signal });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw apiError(r.status, body, r.statusText);
  return body;
}

// namespacePicker offers a confined token's namespaces: picking one shows
// the page for it.
function namespacePicker(e, route, params) {
  const pick = (ns) => {
    const p = new URLSearchParams(params);
    p.set("namespace", ns);
    location.hash = route + "?" + p;
  };
  return el("div", { id: "ns-picker", class: "picker" },
    el("p", { text: `This token sees only ${e.namespaces.length === 1 ? "namespace" : "namespaces"} ${e.namespaces.join(", ")}: pick one.` }),
    el("div", {}, e.namespaces.map((ns) => el("button", { type: "button", "data-ns": ns, onclick: () => pick(ns), text: ns }))));
}

// watch reads the server-sent events of /v1/watch through fetch (so the
// token goes in a header), resuming from the last id after a break.
async function watch(params, onEvent, onState, signal) {
  let from = params.resourceVersion || "";
  while (!signal.aborted) {
    try {
      const u = new URL("/v1/watch", location.origin);
      for (const [k, v] of Object.entries(params)) if (v && k !== "resourceVersion") u.searchParams.set(k, v);
      if (from) u.searchParams.set("resourceVersion", from);
      const r = await fetch(u, { headers: headers(), signal });
      if (!r.ok) {
        const body = await r.json().catch(() => ({}));
        const e = apiError(r.status, body, r.statusText);
        if (r.status === 401 || r.status === 403) {
          // Retrying cannot help: a token, or another namespace, can.
          onState(false, from, e);
          return;
        }
        throw e;
      }
      onState(true, from);
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const chunk = buf.slice(0, i);
          buf = buf.slice(i + 2);
          for (const line of chunk.split("\n")) {
            if (line.startsWith("data: ")) {
              const ev = JSON.parse(line.slice(6));
              from = ev.resourceVersion;
              onEvent(ev);
              onState(true, from);
            }
          }
        }
      }
    } catch (e) {
      if (signal.aborted) return;
      onState(false, from, e);
    }
    await new Promise((res) => setTimeout(res, 1000));
  }
}

function keyOf(o) {
  const kind = o.kind + (o.apiVersion && o.apiVersion.includes("/") ? "." + o.apiVersion.slice(0, o.apiVersion.lastIndexOf("/")) : "");
  return { kind, namespace: (o.metadata || {}).namespace || "", name: (o.metadata || {}).name };
}
function keyString(k) { return k.namespace ? `${k.kind}/${k.namespace}/${k.name}` : `${k.kind}/${k.name}`; }
function objectHref(k) {
  const p = new URLSearchParams({ kind: k.kind, name: k.name });
  if (k.namespace) p.set("namespace", k.namespace);
  return "#/object?" + p;
}
// NOT_READY_PHASES are phases in which nothing is ready, whatever a
// Ready condition left over says (a pod waiting for its scheduler is
// Pending).
const NOT_READY_PHASES = new Set(["Pending", "Waiting", "Registered", "ImagePull", "ImagePullBackoff", "Starting", "Failed", "Error", "Finalizing", "Terminated", "CrashLoopBackoff", "NotReady"]);
function ready(st) {
  st = st || {};
  const c = (st.conditions || []).find((c) => c.type === "Ready");
  if (!c) return "-";
  return c.status === "True" && NOT_READY_PHASES.has(st.phase) ? "False" : c.status;
}
// age is how long ago an RFC 3339 time was, as kubectl prints it.
function age(t) {
  const ms = Date.now() - Date.parse(t);
  if (!t || isNaN(ms)) return "-";
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return s + "s";
  if (s < 7200) return Math.floor(s / 60) + "m";
  if (s < 172800) return Math.floor(s / 3600) + "h";
  return Math.floor(s / 86400) + "d";
}

// toYAML writes a JSON value as YAML, the way manifests are written.
function yamlScalar(v) {
  if (v === null || v === undefined) return "null";
  if (typeof v !== "string") return String(v);
  if (v === "" || /^[\s\-?:,\[\]{}#&*!|>'"%@`]|[\s:]$|: | #|\n/.test(v) || /^(true|false|null|yes|no|on|off|y|n|~|[-+]?(\d[\d_]*)?\.?\d+([eE][-+]?\d+)?|0x[0-9a-fA-F]+)$/i.test(v)) return JSON.stringify(v);
  return v;
}
function yamlLines(v, ind) {
  const block = (x) => x !== null && typeof x === "object" && Object.keys(x).length > 0;
  const out = [];
  if (Array.isArray(v)) {
    for (const x of v) {
      if (block(x) && !Array.isArray(x)) {
        const sub = yamlLines(x, ind + "  ");
        out.push(ind + "- " + sub[0].slice(ind.length + 2), ...sub.slice(1));
      } else if (block(x)) out.push(ind + "-", ...yamlLines(x, ind + "  "));
      else out.push(ind + "- " + (Array.isArray(x) ? "[]" : x !== null && typeof x === "object" ? "{}" : yamlScalar(x)));
    }
    return out;
  }
  for (const [k, x] of Object.entries(v)) {
    if (x === undefined) continue; // as JSON leaves it out
    if (block(x)) out.push(ind + yamlScalar(k) + ":", ...yamlLines(x, Array.isArray(x) ? ind : ind + "  "));
    else out.push(ind + yamlScalar(k) + ": " + (Array.isArray(x) ? "[]" : x !== null && typeof x === "object" ? "{}" : yamlScalar(x)));
  }
  return out;
}
function toYAML(v) {
  if (v === undefined || v === null) return "";
  if (typeof v !== "object") return yamlScalar(v);
  return yamlLines(v, "").join("\n");
}

// changedPaths are the paths of the fields that differ between a and b.
function changedPaths(a, b, path, out) {
  out = out || [];
  const obj = (x) => x !== null && typeof x === "object" && !Array.isArray(x);
  if (obj(a) && obj(b)) {
    for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) changedPaths(a[k], b[k], path ? path + "." + k : k, out);
  } else if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    a.forEach((x, i) => changedPaths(x, b[i], `${path}[${i}]`, out));
  } else if (JSON.stringify(a) !== JSON.stringify(b)) out.push(path);
  return out;
}

// folded shows a long text's first lines and the rest behind a toggle.
function folded(lines, keep, make) {
  if (lines.length <= keep + 5) return lines.map(make);
  return [...lines.slice(0, keep).map(make),
    el("details", { class: "fold" }, el("summary", { text: `${lines.length - keep} more lines` }), lines.slice(keep).map(make))];
}
function pill(v) { return el("span", { class: "pill " + v, text: v }); }
function shortJSON(v) {
  if (v === undefined) return "";
  const s = JSON.stringify(v);
  return s.length > 80 ? s.slice(0, 77) + "…" : s;
}

// objectRow is one object as the tables show it.
function objectRow(o) {
  const k = keyOf(o), m = o.metadata || {}, st = o.status || {};
  return el("tr", { "data-key": keyString(k) },
    el("td", { text: k.namespace || "-" }),
    el("td", { text: k.kind }),
    el("td", {}, el("a", { href: objectHref(k), class: "obj-link", text: k.name })),
    el("td", { text: st.goal || "-" }),
    el("td", { text: st.phase || "-" }),
    el("td", { class: "ready" }, pill(ready(st))),
    el("td", { class: "gen", text: (m.generation || "0") }),
    el("td", { class: "rv", text: m.resourceVersion || "" }),
    el("td", { class: "age", title: m.creationTime || "", text: age(m.creationTime) }),
    el("td", { class: "message", title: st.message || "", text: st.message || "" }),
    el("td", { class: "spec", text: shortJSON(o.spec) }));
}
const objectHead = () => el("thead", {}, el("tr", {}, ["NAMESPACE", "KIND", "NAME", "GOAL", "PHASE", "READY", "GEN", "RV", "AGE", "MESSAGE", "SPEC"].map((h) => el("th", { text: h }))));

async function kindOptions(select, chosen, signal) {
  select.append(el("option", { value: "", text: "all kinds" }));
  try {
    const r = await api("/v1/kinds", {}, signal);
    for (const k of r.kinds) {
      if (!k.seen && !k.objects) continue;
      select.append(el("option", { value: k.name, text: `${k.name} (${k.objects})`, selected: k.name === chosen ? "selected" : false }));
    }
  } catch (e) { /* the list stays short */ }
}

function filtersFrom(params) {
  return { kind: params.get("kind") || "", namespace: params.get("namespace") || "", labelSelector: params.get("labelSelector") || "" };
}

function filterBar(route, f, signal, extra) {
  const kind = el("select", { name: "kind" });
  kindOptions(kind, f.kind, signal);
  const ns = el("input", { name: "namespace", value: f.namespace, placeholder: "every namespace" });
  const sel = el("input", { name: "labelSelector", value: f.labelSelector, placeholder: "app=web,tier!=cache" });
  const form = el("form", { class: "filters", onsubmit: (e) => {
    e.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of [["kind", kind.value], ["namespace", ns.value], ["labelSelector", sel.value], ...(extra ? extra() : [])]) if (v) p.set(k, v);
    location.hash = route + (p.toString() ? "?" + p : "");
  } },
  el("label", {}, "Kind", kind), el("label", {}, "Namespace", ns), el("label", {}, "Labels", sel), el("button", { type: "submit", text: "Filter" }));
  return form;
}

// --- pages ---------------------------------------------------------------

async function objectsPage(main, params, signal) {
  const f = filtersFrom(params);
  const status = el("span", { class: "live", id: "live", text: "connecting…" });
  const body = el("tbody", { id: "objects" });
  const empty = el("p", { class: "muted", id: "empty", text: "No objects.", hidden: true });
  const problem = el("div", { id: "problem" });
  const table = el("table", { id: "objects-table" }, objectHead(), body);
  main.append(el("h1", {}, "Objects ", status), filterBar("#/", f, signal), problem, table, empty);
  const rows = new Map();
  let listed = false;
  watch(f, (ev) => {
    const key = keyString(ev.key);
    const old = rows.get(key);
    if (ev.type === "DELETED") {
      if (old) { old.remove(); rows.delete(key); }
    } else {
      const row = objectRow(ev.object);
      row.classList.add("flash");
      if (old) old.replaceWith(row);
      else {
        const after = [...rows.keys()].sort().find((k) => k > key);
        body.insertBefore(row, after ? rows.get(after) : null);
      }
      rows.set(key, row);
    }
    empty.hidden = !listed || rows.size > 0;
  }, (up, rv, err) => {
    if (up) {
      // The watch starts with the current objects; "No objects." only
      // once it has had a moment to send them.
      problem.replaceChildren();
      table.hidden = false;
      if (!listed) setTimeout(() => { listed = true; empty.hidden = rows.size > 0; }, 300);
    }
    status.textContent = up ? `live · resourceVersion ${rv || "-"}` : err && err.status === 401 ? "needs a token" : `reconnecting: ${err ? err.message : ""}`;
    status.className = up ? "live" : "live down";
    if (!up && err && (err.status === 401 || err.status === 403)) {
      status.textContent = err.status === 401 ? "needs a token" : "not allowed";
      empty.hidden = true;
      table.hidden = true;
      // Without a token the banner says what to do; the page repeats
      // nothing.
      problem.replaceChildren(err.namespaces ? namespacePicker(err, "#/", params) : err.status === 401 ? "" : el("p", { class: "error", text: err.message }));
    }
  }, signal);
}

// replay folds a key's events into the state after each (what the
// timeline diffs): metadata people write, spec, status.
function replay(events) {
  const cur = new Map(), out = [];
  for (const ev of events) {
    const k = keyString(ev.key);
    const prev = cur.get(k) || null;
    let next = prev ? { ...prev } : {};
    const o = ev.object || {};
    const meta = (m) => {
      const r = {};
      for (const f of ["labels", "annotations", "dependsOn", "group"]) if (m && m[f] !== undefined) r[f] = m[f];
      return Object.keys(r).length ? r : undefined;
    };
    switch (ev.type) {
      case "EVENT_TYPE_APPLIED": next = { metadata: meta(o.metadata), spec: o.spec, status: { ...(prev && prev.status), goal: "exists" } }; break;
      case "EVENT_TYPE_OBSERVED": next = { metadata: meta(o.metadata), spec: o.spec, status: o.status }; break;
      case "EVENT_TYPE_BOUND": next.spec = o.spec; break;
      case "EVENT_TYPE_STATUS_CHANGED": { const s = { ...(o.status || {}) }; delete s.nextRunTime; next.status = { goal: (prev && prev.status && prev.status.goal) || "exists", ...s }; break; }
      case "EVENT_TYPE_DELETE_REQUESTED": next.status = { ...(prev && prev.status), goal: "deleted" }; break;
      case "EVENT_TYPE_FINALIZED": next = null; break;
    }
    out.push({ before: prev, after: next });
    cur.set(k, next);
  }
  return out;
}

function pretty(v) { return v ? toYAML(v) : ""; }

// lineDiff is a longest-common-subsequence diff of two texts' lines.
function lineDiff(a, b) {
  const x = a ? a.split("\n") : [], y = b ? b.split("\n") : [];
  const n = x.length, m = y.length;
  const t = Array.from({ length: n + 1 }, () => new Int32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) t[i][j] = x[i] === y[j] ? t[i + 1][j + 1] + 1 : Math.max(t[i + 1][j], t[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push([" ", x[i]]); i++; j++; }
    else if (t[i + 1][j] >= t[i][j + 1]) out.push(["-", x[i++]]);
    else out.push(["+", y[j++]]);
  }
  while (i < n) out.push(["-", x[i++]]);
  while (j < m) out.push(["+", y[j++]]);
  // Keep changes with two lines of context; a gap is one "⋯" line.
  const keep = out.map((_, idx) => out.slice(Math.max(0, idx - 2), idx + 3).some((o) => o[0] !== " "));
  const shown = [];
  out.forEach((o, idx) => {
    if (keep[idx]) shown.push(o);
    else if (shown.length && shown[shown.length - 1][0] !== "⋯") shown.push(["⋯", ""]);
  });
  if (shown.length && shown[shown.length - 1][0] === "⋯") shown.pop();
  return shown;
}

// diffView is an event's change: the fields it changed, their diff in
// YAML (long ones folded), and the whole state after it behind a toggle.
function diffView(before, after) {
  const lines = lineDiff(pretty(before), pretty(after));
  if (!lines.length) return el("div", { class: "muted", text: "no change to metadata, spec or status" });
  const paths = changedPaths(before || {}, after || {}, "");
  const line = ([op, l]) => el("span", { class: op === "+" ? "add" : op === "-" ? "del" : op === "⋯" ? "gap" : "ctx", text: op === "⋯" ? "⋯" : op + " " + l });
  return el("div", { class: "change" },
    el("div", { class: "ev-changed", text: (before ? "changed: " : "set: ") + (paths.length > 8 ? paths.slice(0, 8).join(", ") + ` and ${paths.length - 8} more` : paths.join(", ")) }),
    el("pre", { class: "diff" }, folded(lines, 24, line)),
    after ? el("details", { class: "ev-state" }, el("summary", { text: "whole state after this event" }), el("pre", { text: pretty(after) })) : null);
}

function typeName(t) {
  return (t || "").replace("EVENT_TYPE_", "").toLowerCase().split("_").map((w) => w[0].toUpperCase() + w.slice(1)).join("");
}

// graph draws the object, what it depends on (left) and what depends on
// it (right), each a link to its own page.
function graph(self, deps, dependents) {
  const rowH = 30, w = 900, rows = Math.max(deps.length, dependents.length, 1), h = rows * rowH + 30;
  const cy = h / 2;
  const svg = el("svg", { svg: true, class: "graph", viewBox: `0 0 ${w} ${h}`, height: h, id: "graph" });
  svg.append(el("defs", { svg: true }, el("marker", { svg: true, id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse" },
    el("path", { svg: true, d: "M 0 0 L 10 5 L 0 10 z", fill: "#2456c7" }))));
  const node = (x, y, k, label, cls) => {
    const t = el("text", { svg: true, x, y: y + 4, "text-anchor": "middle", class: cls, text: label });
    return k ? el("a", { svg: true, href: objectHref(k) }, t) : t;
  };
  svg.append(el("rect", { svg: true, x: w / 2 - 150, y: cy - 14, width: 300, height: 28, rx: 6, fill: "#eef3ff", stroke: "#2456c7" }));
  svg.append(node(w / 2, cy, null, keyString(self), "self"));
  deps.forEach((d, i) => {
    const y = 15 + i * rowH + rowH / 2;
    svg.append(el("line", { svg: true, class: "edge", x1: w / 2 - 150, y1: cy, x2: 310, y2: y, stroke: "#2456c7", "stroke-width": 2, "marker-end": "url(#arrow)" }));
    svg.append(node(160, y, d.key, `${keyString(d.key)} · ${d.ready}`, "dep"));
  });
  dependents.forEach((k, i) => {
    const y = 15 + i * rowH + rowH / 2;
    svg.append(el("line", { svg: true, class: "edge", x1: w - 310, y1: y, x2: w / 2 + 150, y2: cy, stroke: "#2456c7", "stroke-width": 2, "marker-end": "url(#arrow)" }));
    svg.append(node(w - 160, y, k, keyString(k), "dependent"));
  });
  return svg;
}

async function objectPage(main, params, signal) {
  const k = { kind: params.get("kind"), namespace: params.get("namespace") || "", name: params.get("name") };
  main.append(el("h1", { text: keyString(k) }));
  let d, h;
  try {
    [d, h] = await Promise.all([api("/v1/describe", k, signal), api("/v1/history", k, signal)]);
  } catch (e) {
    // A deleted object has history still.
    main.append(el("p", { class: "error", text: e.message }));
    try { h = await api("/v1/history", k, signal); } catch (e2) { return; }
  }
  if (d) {
    const o = d.object, m = o.metadata || {}, st = o.status || {};
    const self = keyOf(o);
    main.append(el("div", { class: "grid" },
      el("div", {},
        el("h2", { text: "Metadata" }),
        kvGrid([
          ["uid", m.uid], ["generation", m.generation], ["resourceVersion", m.resourceVersion],
          ["labels", Object.entries(m.labels || {}).map(([a, b]) => a + "=" + b).join(", ") || "—"],
          ["group", m.group || "—"], ["created", m.creationTime], ["reconciled by", d.reconciler || "no reconciler: stored only"]]),
        el("h2", { text: "Spec" }), el("pre", { id: "spec" }, folded((pretty(o.spec) || "—").split("\n"), 40, (l) => l + "\n"))),
      el("div", {},
        el("h2", { text: "Status" }),
        kvGrid([["goal", st.goal], ["phase", st.phase || "-"], ["message", st.message || "—"], ["observed generation", st.observedGeneration || "0"], ["next run", st.nextRunTime || "—"]]),
        el("h2", { text: "Conditions" }),
        (st.conditions || []).length ? el("table", {}, el("thead", {}, el("tr", {}, ["TYPE", "STATUS", "REASON", "MESSAGE", "SINCE"].map((x) => el("th", { text: x })))),
          el("tbody", {}, st.conditions.map((c) => el("tr", {}, el("td", { text: c.type }), el("td", {}, pill(c.status)), el("td", { text: c.reason || "" }), el("td", { text: c.message || "" }), el("td", { text: c.lastTransitionTime || "" })))))
          : el("p", { class: "muted", text: "none" }),
        st.details ? [el("h2", { text: "Status details" }), el("pre", { id: "status-details" }, folded(pretty(st.details).split("\n"), 30, (l) => l + "\n"))] : null)),
    el("h2", { text: "Dependencies" }), graph(self, d.dependencies, d.dependents));
    if (k.kind === "Pod") main.append(podLogs(k, signal));
    if (WORKLOAD_KINDS.has(k.kind)) main.append(await workloadPods(self, signal));
  }
  if (!h) return;
  const evs = h.events;
  const steps = replay(evs);
  const seqOf = new Map(evs.map((e) => [e.id, e.sequence]));
  main.append(el("h2", { text: `History (${evs.length} events)` }),
    el("ol", { class: "timeline", id: "timeline" }, evs.map((ev, i) => {
      const cause = ev.cause ? (seqOf.has(ev.cause) ? el("a", { href: "#ev-" + seqOf.get(ev.cause), onclick: (e) => { e.preventDefault(); document.getElementById("ev-" + seqOf.get(ev.cause)).scrollIntoView(); document.getElementById("ev-" + seqOf.get(ev.cause)).classList.add("flash"); }, text: "caused by #" + seqOf.get(ev.cause) }) : el("span", { class: "muted", text: "caused by " + ev.cause })) : null;
      const asOf = new URLSearchParams({ at: ev.sequence, kind: k.kind });
      if (k.namespace) asOf.set("namespace", k.namespace);
      return el("li", { id: "ev-" + ev.sequence, class: "event" },
        el("div", { class: "ev-head" }, el("b", { text: "#" + ev.sequence }), el("span", { class: "ev-type", text: typeName(ev.type) }),
          el("span", { class: "muted", text: ev.time }), el("span", { class: "actor", text: "by " + ev.actor }), cause,
          el("a", { href: "#/state?" + asOf, text: "state as of this event" })),
        diffView(steps[i].before, steps[i].after));
    })));
}

// WORKLOAD_KINDS own pods, directly or through ReplicaSets or Jobs.
const WORKLOAD_KINDS = new Set(["Deployment.apps", "ReplicaSet.apps", "DaemonSet.apps", "StatefulSet.apps", "Job.batch", "CronJob.batch"]);
const OWNER = "gate.jetplane.dev/owner";

// workloadPods lists the pods a workload owns: those whose owner
// annotation names it, or names an object it owns (a Deployment's
// ReplicaSets, a CronJob's Jobs).
async function workloadPods(k, signal) {
  const section = el("section", { id: "workload-pods" });
  try {
    const ref = (o) => (o.metadata && o.metadata.annotations || {})[OWNER];
    const owners = new Set([keyString(k)]);
    for (const kind of ["ReplicaSet.apps", "Job.batch"]) {
      const mid = await api("/v1/objects", { kind, namespace: k.namespace }, signal);
      for (const o of mid.items || []) if (owners.has(ref(o))) owners.add(keyString(keyOf(o)));
    }
    const pods = ((await api("/v1/objects", { kind: "Pod", namespace: k.namespace }, signal)).items || [])
      .filter((p) => owners.has(ref(p)))
      .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    section.append(el("h2", { text: `Pods (${pods.length})` }),
      pods.length ? el("table", { id: "pods-table" }, objectHead(), el("tbody", {}, pods.map(objectRow))) : el("p", { class: "muted", text: "none" }));
  } catch (e) {
    section.append(el("h2", { text: "Pods" }), el("p", { class: "error", text: e.message }));
  }
  return section;
}

// podLogs shows the last lines of a pod's output, as jetplane logs does,
// with a button to read them again.
function podLogs(k, signal) {
  const pre = el("pre", { id: "logs", class: "logs", text: "loading…" });
  const load = async () => {
    const u = new URL("/v1/logs", location.origin);
    u.searchParams.set("namespace", k.namespace);
    u.searchParams.set("pod", k.name);
    u.searchParams.set("tail", "500");
    try {
      const r = await fetch(u, { headers: headers(), signal });
      const text = await r.text();
      if (!r.ok) {
        let msg = text;
        try { msg = JSON.parse(text).error || text; } catch (e) { /* plain text */ }
        pre.textContent = "";
        pre.append(el("span", { class: "error", text: msg }));
        return;
      }
      pre.textContent = text || "(no output yet)";
    } catch (e) {
      if (!signal.aborted) pre.textContent = e.message;
    }
  };
  load();
  return el("section", { id: "pod-logs" },
    el("h2", {}, "Logs ", el("button", { id: "logs-refresh", onclick: load, text: "refresh" })), pre);
}

function kvGrid(pairs) {
  return el("div", { class: "kv" }, pairs.flatMap(([a, b]) => [el("div", { text: a }), el("div", { text: b === undefined || b === null || b === "" ? "—" : String(b) })]));
}

async function statePage(main, params, signal) {
  const f = filtersFrom(params);
  // The head of the log; a token confined to namespaces asks within one.
  const head = await api("/v1/objects", { kind: "", namespace: f.namespace, limit: 1 }, signal).then((r) => Number(r.resourceVersion)).catch(() => 0);
  let at = Number(params.get("at") || head);
  const slider = el("input", { type: "range", id: "slider", min: head > 0 ? 1 : 0, max: head, value: at, step: 1 });
  const label = el("span", { id: "at-label" });
  const which = el("p", { id: "at-event", class: "at-event" });
  const time = el("input", { type: "datetime-local", id: "at-time", step: 1 });
  const body = el("tbody", { id: "state" });
  const note = el("p", { class: "muted", id: "state-note" });
  main.append(el("h1", { text: "Time travel" }),
    el("p", { class: "muted", text: "The state as it was right after any event of the log: move the slider, or pick a time." }),
    filterBar("#/state", f, signal, () => [["at", slider.value]]),
    el("div", { class: "slider" }, el("span", { text: "sequence" }), slider, label, time), which,
    el("table", {}, objectHead(), body), note);
  let seq = 0;
  const load = async (atParam) => {
    const mine = ++seq;
    try {
      const r = await api("/v1/state", { at: atParam, ...f }, signal);
      if (mine !== seq) return;
      body.replaceChildren(...r.items.map(objectRow));
      label.textContent = `#${r.resourceVersion} of ${head}`;
      note.textContent = r.items.length ? "" : "No objects at that point.";
      main.dataset.at = r.resourceVersion;
      describeEvent(Number(r.resourceVersion), r.items, () => mine === seq);
    } catch (e) {
      if (mine !== seq) return;
      if (e.namespaces) note.replaceChildren(namespacePicker(e, "#/state", params));
      else note.textContent = e.message;
    }
  };
  // describeEvent says which event the sequence is: the object it wrote
  // is the one whose resourceVersion it is.
  const describeEvent = async (at, items, current) => {
    const o = items.map((raw) => raw).find((x) => Number((x.metadata || {}).resourceVersion) === at);
    if (!o) {
      which.textContent = `Event #${at} changed no object shown here (one it deleted, or one outside the filter).`;
      return;
    }
    const k = keyOf(o);
    let ev = null;
    try {
      const h = await api("/v1/history", k, signal);
      ev = h.events.find((e) => Number(e.sequence) === at);
    } catch (e) { /* the object is named without its event */ }
    if (!current()) return;
    which.replaceChildren(`Event #${at}: `, el("b", { text: ev ? typeName(ev.type) : "a change" }), " of ",
      el("a", { href: objectHref(k), text: keyString(k) }), ev ? ` by ${ev.actor} at ${ev.time}` : "");
  };
  let timer = null;
  slider.addEventListener("input", () => {
    label.textContent = `#${slider.value} of ${head}`;
    clearTimeout(timer);
    timer = setTimeout(() => load(slider.value), 120);
  });
  time.addEventListener("change", () => { if (time.value) load(new Date(time.value).toISOString()); });
  await load(at);
}

async function clustersPage(main, params, signal) {
  main.append(el("h1", { text: "Kubernetes clusters" }));
  const r = await api("/v1/clusters", {}, signal);
  if (!r.clusters.length) { main.append(el("p", { class: "muted", text: "This server watches no Kubernetes cluster (jetplane serve --clusters FILE)." })); return; }
  main.append(el("table", {}, el("thead", {}, el("tr", {}, ["CLUSTER", "STATE", "RESOURCES", "OBJECTS", "LAST EVENT", "APPENDED", "RELISTS", "LAST ERROR"].map((x) => el("th", { text: x })))),
    el("tbody", {}, r.clusters.map((c) => el("tr", {}, el("td", { text: c.name }), el("td", {}, pill(c.state)),
      el("td", { text: c.resources.map((x) => x.resource + (x.synced ? "" : " (syncing)")).join(", ") }), el("td", { text: c.objects }),
      el("td", { text: c.lastEventTime || "—" }), el("td", { text: c.appended }), el("td", { text: c.relists }), el("td", { class: "error", text: c.lastError || "" }))))));
}

async function partitionsPage(main, params, signal) {
  main.append(el("h1", { text: "Reconciler partitions" }));
  const [p, v] = await Promise.all([api("/v1/partitions", {}, signal), api("/v1/version", {}, signal)]);
  main.append(el("p", { class: "muted", text: `${p.partitions} partitions · ${v.replicas} replica(s) · durability: ${v.durability} · server ${v.version}` }),
    el("table", { id: "partitions" }, el("thead", {}, el("tr", {}, ["INSTANCE", "PARTITIONS", "HELD"].map((x) => el("th", { text: x })))),
      el("tbody", {}, p.instances.map((i) => el("tr", {}, el("td", { text: i.instance }), el("td", { text: i.partitions.length }), el("td", { text: i.partitions.join(", ") }))))),
    ...(p.unheld.length ? [el("p", { class: "muted", text: "Held by no instance right now: " + p.unheld.join(", ") })] : []));
}

const pages = { "": objectsPage, object: objectPage, state: statePage, clusters: clustersPage, partitions: partitionsPage };

async function render() {
  if (pageAbort) pageAbort.abort();
  pageAbort = new AbortController();
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  const page = pages[path] || objectsPage;
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.dataset.nav === (path || "objects"));
  const main = document.getElementById("main");
  main.replaceChildren();
  main.dataset.page = path || "objects";
  try {
    await page(main, new URLSearchParams(query || ""), pageAbort.signal);
  } catch (e) {
    if (pageAbort.signal.aborted) return;
    if (e.namespaces) main.append(namespacePicker(e, "#/" + path, new URLSearchParams(query || "")));
    else main.append(el("p", { class: e.status === 401 ? "muted" : "error", text: e.message }));
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const input = document.getElementById("token");
  input.value = localStorage.getItem(TOKEN_KEY) || "";
  document.getElementById("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    if (input.value) localStorage.setItem(TOKEN_KEY, input.value);
    else localStorage.removeItem(TOKEN_KEY);
    banner("");
    render();
  });
  window.addEventListener("hashchange", render);
  render();
});
