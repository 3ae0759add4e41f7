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

async function api(path, params, signal) {
  const u = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params || {})) if (v !== "" && v !== undefined && v !== null) u.searchParams.set(k, v);
  const r = await fetch(u, { headers: headers(), signal });
  const body = await r.json().catch(() => ({}));
  if (r.status === 401) banner("The API wants a token: enter it above.");
  if (!r.ok) throw new Error(body.error || r.status + " " + r.statusText);
  return body;
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
        throw new Error(body.error || r.statusText);
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
function ready(st) {
  const c = ((st || {}).conditions || []).find((c) => c.type === "Ready");
  return c ? c.status : "-";
}
function pill(v) { return el("span", { class: "pill " + v, text: v }); }
function shortJSON(v) {
  if (v === undefined) return "";
  const s = JSON.stringify(v);
  return s.length > 120 ? s.slice(0, 117) + "…" : s;
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
    el("td", {}, pill(ready(st))),
    el("td", { class: "gen", text: (m.generation || "0") }),
    el("td", { class: "rv", text: m.resourceVersion || "" }),
    el("td", { class: "spec", text: shortJSON(o.spec) }));
}
const objectHead = () => el("thead", {}, el("tr", {}, ["NAMESPACE", "KIND", "NAME", "GOAL", "PHASE", "READY", "GEN", "RV", "SPEC"].map((h) => el("th", { text: h }))));

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
  const empty = el("p", { class: "muted", id: "empty", text: "No objects." });
  main.append(el("h1", {}, "Objects ", status), filterBar("#/", f, signal), el("table", { id: "objects-table" }, objectHead(), body), empty);
  const rows = new Map();
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
    empty.hidden = rows.size > 0;
  }, (up, rv, err) => {
    status.textContent = up ? `live · resourceVersion ${rv || "-"}` : `reconnecting: ${err ? err.message : ""}`;
    status.className = up ? "live" : "live down";
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
      return r;
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

function pretty(v) { return v ? JSON.stringify(v, null, 2) : ""; }

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
  // Keep changes with two lines of context.
  const keep = out.map((_, idx) => out.slice(Math.max(0, idx - 2), idx + 3).some((o) => o[0] !== " "));
  return out.filter((_, idx) => keep[idx]);
}

function diffView(before, after) {
  const lines = lineDiff(pretty(before), pretty(after));
  if (!lines.length) return el("div", { class: "muted", text: "no change to metadata, spec or status" });
  return el("pre", { class: "diff" }, lines.map(([op, l]) => el("span", { class: op === "+" ? "add" : op === "-" ? "del" : "ctx", text: op + " " + l })));
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
  svg.append(el("defs", { svg: true }, el("marker", { svg: true, id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" },
    el("path", { svg: true, d: "M 0 0 L 10 5 L 0 10 z", fill: "#8a93a8" }))));
  const node = (x, y, k, label, cls) => {
    const t = el("text", { svg: true, x, y: y + 4, "text-anchor": "middle", class: cls, text: label });
    return k ? el("a", { svg: true, href: objectHref(k) }, t) : t;
  };
  svg.append(el("rect", { svg: true, x: w / 2 - 150, y: cy - 14, width: 300, height: 28, rx: 6, fill: "#eef3ff", stroke: "#2456c7" }));
  svg.append(node(w / 2, cy, null, keyString(self), "self"));
  deps.forEach((d, i) => {
    const y = 15 + i * rowH + rowH / 2;
    svg.append(el("line", { svg: true, x1: w / 2 - 150, y1: cy, x2: 310, y2: y, stroke: "#8a93a8", "marker-end": "url(#arrow)" }));
    svg.append(node(160, y, d.key, `${keyString(d.key)} · ${d.ready}`, "dep"));
  });
  dependents.forEach((k, i) => {
    const y = 15 + i * rowH + rowH / 2;
    svg.append(el("line", { svg: true, x1: w - 310, y1: y, x2: w / 2 + 150, y2: cy, stroke: "#8a93a8", "marker-end": "url(#arrow)" }));
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
        el("h2", { text: "Spec" }), el("pre", { id: "spec", text: pretty(o.spec) || "—" })),
      el("div", {},
        el("h2", { text: "Status" }),
        kvGrid([["goal", st.goal], ["phase", st.phase || "-"], ["message", st.message || "—"], ["observed generation", st.observedGeneration || "0"], ["next run", st.nextRunTime || "—"]]),
        el("h2", { text: "Conditions" }),
        (st.conditions || []).length ? el("table", {}, el("thead", {}, el("tr", {}, ["TYPE", "STATUS", "REASON", "MESSAGE", "SINCE"].map((x) => el("th", { text: x })))),
          el("tbody", {}, st.conditions.map((c) => el("tr", {}, el("td", { text: c.type }), el("td", {}, pill(c.status)), el("td", { text: c.reason || "" }), el("td", { text: c.message || "" }), el("td", { text: c.lastTransitionTime || "" })))))
          : el("p", { class: "muted", text: "none" }))),
    el("h2", { text: "Dependencies" }), graph(self, d.dependencies, d.dependents));
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

function kvGrid(pairs) {
  return el("div", { class: "kv" }, pairs.flatMap(([a, b]) => [el("div", { text: a }), el("div", { text: b === undefined || b === null || b === "" ? "—" : String(b) })]));
}

async function statePage(main, params, signal) {
  const f = filtersFrom(params);
  const head = await api("/v1/objects", { kind: "", namespace: "" }, signal).then((r) => Number(r.resourceVersion)).catch(() => 0);
  let at = Number(params.get("at") || head);
  const slider = el("input", { type: "range", id: "slider", min: head > 0 ? 1 : 0, max: head, value: at, step: 1 });
  const label = el("span", { id: "at-label" });
  const time = el("input", { type: "datetime-local", id: "at-time", step: 1 });
  const body = el("tbody", { id: "state" });
  const note = el("p", { class: "muted", id: "state-note" });
  main.append(el("h1", { text: "Time travel" }),
    el("p", { class: "muted", text: "The state as it was right after any event of the log: move the slider, or pick a time." }),
    filterBar("#/state", f, signal, () => [["at", slider.value]]),
    el("div", { class: "slider" }, el("span", { text: "sequence" }), slider, label, time),
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
    } catch (e) {
      if (mine === seq) note.textContent = e.message;
    }
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
    p.unheld.length ? el("p", { class: "muted", text: "Held by no instance right now: " + p.unheld.join(", ") }) : null);
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
    if (!pageAbort.signal.aborted) main.append(el("p", { class: "error", text: e.message }));
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
