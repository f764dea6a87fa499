// console.js - the operator console's page: sign-in, sandboxes, live
// denials, access requests.  Everything a sandbox chose (host names,
// paths, reasons) is put on the page as text (textContent), never as
// markup.  No framework, no build step.
"use strict";

const ROWS_MAX = 500; // denials kept (what Allow… and the access page read)
// Rows of the live table.  Each draw lays out the whole table again (the
// new rows go on top), so its cost grows with the rows shown, not with
// the denials kept: a screenful and more, not all 500.
const ROWS_SHOWN = 100;
const state = { session: null, denials: [], seq: 0, stream: null, queue: [], drawing: false };
// What the tests read: how many denials were drawn and how long drawing took.
window.consoleStats = { drawn: 0, frames: 0, drawMs: 0, maxFrameMs: 0 };

const $ = (id) => document.getElementById(id);

function notice(text, bad) {
  const n = $("notice");
  n.textContent = text || "";
  n.className = bad ? "bad" : "";
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && state.session) headers["X-CSRF-Token"] = state.session.csrf;
  const res = await fetch(path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await res.json(); } catch (e) { data = null; }
  if (!res.ok) {
    const err = new Error((data && data.error) || res.status + " " + res.statusText);
    err.status = res.status;
    err.data = data;
    throw err;
  }
  return data;
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function button(text, onclick, cls) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = text;
  if (cls) b.className = cls;
  b.addEventListener("click", onclick);
  return b;
}

// A <select>'s options: the sandboxes' names, keeping the one chosen.
function sandboxChoices(sel, sandboxes) {
  const was = sel.value;
  sel.replaceChildren();
  for (const s of sandboxes) {
    const o = document.createElement("option");
    o.value = s.name;
    o.textContent = s.name;
    sel.appendChild(o);
  }
  if (was) sel.value = was;
}

// The formats of when(), made once: toLocaleTimeString() makes a new
// formatter on every call, which a flood of denials would pay per row.
const TIME = new Intl.DateTimeFormat(undefined, { timeStyle: "medium" });
const DATE_TIME = new Intl.DateTimeFormat(undefined, {
  year: "numeric", month: "numeric", day: "numeric", hour: "numeric", minute: "2-digit", second: "2-digit",
});

function when(v) {
  if (v === null || v === undefined || v === "") return "";
  const d = typeof v === "number" ? new Date(v > 1e12 ? v : v * 1000) : new Date(v);
  if (isNaN(d)) return String(v);
  // Today's times as times; others with their date.
  const midnight = new Date().setHours(0, 0, 0, 0);
  const t = d.getTime();
  return t >= midnight && t < midnight + 864e5 ? TIME.format(d) : DATE_TIME.format(d);
}

// ---------------------------------------------------------------- sign-in

function showLogin() {
  state.session = null;
  $("nav").hidden = true;
  $("who").hidden = true;
  for (const p of document.querySelectorAll(".page")) p.hidden = true;
  $("login").hidden = false;
}

async function login(ev) {
  ev.preventDefault();
  const body = { username: $("username").value, password: $("password").value, realm: $("realm").value };
  if (!$("otp-label").hidden && $("otp").value) body.otp = $("otp").value;
  try {
    state.session = await api("POST", "/api/login", body);
    $("password").value = "";
    $("otp").value = "";
    $("otp-label").hidden = true;
    notice("");
    start();
  } catch (e) {
    if (e.data && e.data.need_otp) {
      $("otp-label").hidden = false;
      $("otp").focus();
      notice("Proxmox VE asks for your TOTP code.");
    } else {
      notice("Sign-in refused: " + e.message, true);
    }
  }
}

async function logout() {
  try { await api("POST", "/api/logout", {}); } catch (e) { /* signed out anyway */ }
  if (state.stream) state.stream.close();
  state.stream = null;
  showLogin();
}

// ---------------------------------------------------------------- sandboxes

// A sandbox's size: the size line its cores and memory match, and the
// figures themselves.
function sizeText(s) {
  const figures = s.cores + " cores, " + (s.memory_mib >= 1024 && s.memory_mib % 1024 === 0
    ? s.memory_mib / 1024 + " GiB" : s.memory_mib + " MiB");
  return s.size ? s.size + " (" + figures + ")" : figures;
}

// What each egressd holds for a sandbox, one line each: in step with its
// description, bound but out of step (another policy or expiry), not
// bound, or not answering.
function egressCell(tr, list) {
  const td = cell(tr, "", "egressd");
  for (const e of list) {
    const div = document.createElement("div");
    let text, ok = false;
    if (e.error) text = e.egressd + ": no answer (" + e.error + ")";
    else if (!e.bound) text = e.egressd + ": not bound";
    else if (!e.in_step) text = e.egressd + ": out of step (" + e.policy + ", expires " + when(e.expires) + ")";
    else { text = e.egressd + ": bound"; ok = true; }
    div.textContent = text;
    div.className = ok ? "allow" : "deny";
    td.appendChild(div);
  }
}

async function loadSandboxes() {
  const tbody = $("sandboxes-table").tBodies[0];
  try {
    const [list, sources] = await Promise.all([api("GET", "/api/sandboxes"), api("GET", "/api/sources")]);
    tbody.replaceChildren();
    for (const s of list.sandboxes) {
      const tr = document.createElement("tr");
      tr.dataset.name = s.name;
      cell(tr, s.name, "name");
      cell(tr, s.owner);
      cell(tr, sizeText(s), "size");
      cell(tr, s.address);
      cell(tr, s.policy);
      cell(tr, (s.secrets || []).join(", "));
      cell(tr, when(s.created));
      cell(tr, when(s.expires), "expires");
      cell(tr, (s.grants || []).map((g) => g.host + " until " + when(g.until)).join("; "));
      egressCell(tr, s.egressd || []);
      const td = cell(tr, "");
      td.appendChild(button("+1h", () => extend(s.name, "1h")));
      td.appendChild(button("+4h", () => extend(s.name, "4h")));
      td.appendChild(button("Destroy…", () => askDestroy(s.name), "danger"));
      tbody.appendChild(tr);
    }
    $("sandboxes-empty").hidden = list.sandboxes.length > 0;
    sandboxChoices($("explain-name"), list.sandboxes);
    $("sources").textContent = sources.egressd
      .map((e) => e.egressd + (e.connected ? " (live" : " (not connected" + (e.error ? ": " + e.error : "")) +
        (e.lost ? ", " + e.lost + " denials it could not send" : "") + ")")
      .join(", ");
  } catch (e) {
    if (e.status === 401) return showLogin();
    notice("Sandboxes: " + e.message, true);
  }
}

async function extend(name, duration) {
  try {
    const r = await api("POST", "/api/sandboxes/extend", { name, duration });
    notice(name + " now expires " + when(r.expires));
    loadSandboxes();
  } catch (e) { notice("Extend " + name + ": " + e.message, true); }
}

function askDestroy(name) {
  $("destroy-name").textContent = name;
  $("destroy-confirm").value = "";
  $("destroy-dialog").dataset.name = name;
  $("destroy-dialog").showModal();
}

async function destroy(ev) {
  ev.preventDefault();
  const name = $("destroy-dialog").dataset.name;
  const confirm = $("destroy-confirm").value;
  $("destroy-dialog").close();
  try {
    await api("POST", "/api/sandboxes/destroy", { name, confirm });
    notice(name + " destroyed");
  } catch (e) { notice("Destroy " + name + ": " + e.message, true); }
  loadSandboxes();
}

// What each egressd answers: the decision egressd itself would make.
async function explain(ev) {
  ev.preventDefault();
  const ul = $("explain-result");
  ul.replaceChildren();
  const q = new URLSearchParams({ name: $("explain-name").value, host: $("explain-host").value, port: $("explain-port").value });
  try {
    const r = await api("GET", "/api/explain?" + q.toString());
    for (const e of r.egressd) {
      const li = document.createElement("li");
      li.className = e.decision === "allow" ? "allow" : "deny";
      li.textContent = e.error
        ? e.egressd + ": " + e.error
        : e.egressd + ": " + e.decision + (e.reason ? " (" + e.reason + ")" : "") + (e.rule ? ", rule " + e.rule : "");
      ul.appendChild(li);
    }
  } catch (e) { notice("Would it pass: " + e.message, true); }
}

// ---------------------------------------------------------------- denials

function hostPort(d) {
  if (!d.host) return d.sni || "";
  return d.port && d.port !== 443 && d.port !== 80 ? d.host + ":" + d.port : d.host;
}

function denialRow(d) {
  const tr = document.createElement("tr");
  tr.dataset.cseq = d.cseq;
  cell(tr, when(d.ts));
  cell(tr, d.name || d.sandbox, "name");
  cell(tr, hostPort(d), "host");
  cell(tr, d.method);
  cell(tr, d.path, "path");
  cell(tr, d.reason, "reason");
  cell(tr, d.hint, "hint");
  const td = cell(tr, "");
  if (d.name && d.host) td.appendChild(button("Allow…", () => askGrant(d)));
  return tr;
}

// Draw what the stream brought, once per frame: a burst of a thousand
// denials a second costs one layout per frame; the table shows the newest
// ROWS_SHOWN, and only those of a batch are made into rows.
function draw() {
  const t0 = performance.now();
  const batch = state.queue.splice(0, state.queue.length);
  const frag = document.createDocumentFragment();
  for (let i = batch.length - 1; i >= 0 && i >= batch.length - ROWS_SHOWN; i--) frag.appendChild(denialRow(batch[i]));
  const tbody = $("denials-table").tBodies[0];
  const keep = ROWS_SHOWN - Math.min(batch.length, ROWS_SHOWN);
  while (tbody.rows.length > keep) tbody.deleteRow(-1);
  tbody.insertBefore(frag, tbody.firstChild);
  state.denials = state.denials.concat(batch).slice(-ROWS_MAX); // oldest first, the newest kept
  const ms = performance.now() - t0;
  const s = window.consoleStats;
  s.drawn += batch.length;
  s.frames++;
  s.drawMs += ms;
  s.maxFrameMs = Math.max(s.maxFrameMs, ms);
  state.drawing = false;
  if ($("denials").hidden && batch.length > 0) {
    const b = $("denials-badge");
    b.hidden = false;
    b.textContent = String((parseInt(b.textContent, 10) || 0) + batch.length);
  }
  if (!$("access").hidden) drawAccessDenials(); // (else drawn when the page is shown)
}

function receive(list) {
  for (const d of list) {
    state.queue.push(d);
    if (d.cseq > state.seq) state.seq = d.cseq;
  }
  if (state.queue.length > ROWS_MAX) state.queue.splice(0, state.queue.length - ROWS_MAX);
  if (!state.drawing) {
    state.drawing = true;
    requestAnimationFrame(draw);
  }
}

async function startDenials() {
  try {
    const r = await api("GET", "/api/denials");
    state.seq = r.seq;
    receive(r.denials);
  } catch (e) {
    if (e.status === 401) return showLogin();
  }
  if (state.stream) state.stream.close();
  const es = new EventSource("/api/denials/stream?after=" + state.seq);
  state.stream = es;
  es.addEventListener("denials", (ev) => receive(JSON.parse(ev.data)));
  es.addEventListener("lost", (ev) => notice(JSON.parse(ev.data).lost + " denials came too fast to show"));
  es.addEventListener("open", () => { $("stream-state").textContent = "Live."; });
  es.addEventListener("error", () => { $("stream-state").textContent = "Reconnecting…"; });
}

// ---------------------------------------------------------------- grants

// The one dialog that allows a host for a while: from a denial (a new
// request, approved at once) or for a pending request (its approval).
function openAllow(mode, name, host, id, dur) {
  const dlg = $("grant-dialog");
  dlg.dataset.mode = mode;
  dlg.dataset.name = name;
  dlg.dataset.host = host;
  dlg.dataset.id = id || "";
  $("grant-title").textContent = mode === "approve" ? "Approve a request" : "Allow a host";
  $("grant-ok").textContent = mode === "approve" ? "Approve" : "Allow";
  $("grant-sandbox").textContent = name;
  $("grant-host").textContent = host;
  $("grant-max").textContent = state.session && state.session.access_max ? state.session.access_max : "";
  const choices = ["15m", "1h", "8h"];
  $("grant-duration").value = choices.includes(dur) ? dur : dur ? "custom" : "1h";
  $("grant-custom").value = choices.includes(dur) ? "" : dur || "";
  $("grant-custom-label").hidden = $("grant-duration").value !== "custom";
  showChanges();
  dlg.showModal();
}

function askGrant(d) {
  openAllow("grant", d.name, d.port ? d.host + ":" + d.port : d.host, null, "1h");
}

// A pending request's duration as the dialog's choice ("1h", or "90m").
function durationOf(seconds) {
  if (!seconds) return "1h";
  if (seconds % 3600 === 0) return seconds / 3600 + "h";
  if (seconds % 60 === 0) return seconds / 60 + "m";
  return seconds + "s";
}

function askApprove(q) {
  openAllow("approve", q.name, q.host, q.id, durationOf(q.seconds));
}

function chosenDuration() {
  return $("grant-duration").value === "custom" ? $("grant-custom").value.trim() : $("grant-duration").value;
}

// What the grant changes, computed by the console before anything is
// applied: the allow line it adds, and which of the sandbox's recent
// denials (from every egressd) it would let through.
async function showChanges() {
  const dlg = $("grant-dialog");
  const name = dlg.dataset.name, host = dlg.dataset.host;
  const ul = $("grant-changes");
  ul.replaceChildren();
  const dur = chosenDuration();
  const line = (text, cls) => {
    const li = document.createElement("li");
    li.textContent = text;
    if (cls) li.className = cls;
    ul.appendChild(li);
  };
  if (!dur) return line("choose how long");
  try {
    const q = new URLSearchParams({ name, host, duration: dur });
    const p = await api("GET", "/api/grant/preview?" + q.toString());
    if (dlg.dataset.host !== host || chosenDuration() !== dur) return; // asked again meanwhile
    line("adds the allow line " + p.rule + " to " + name + "; it lapses by itself");
    line(p.would_pass.length + " of " + name + "'s " + p.recent + " recent denials would now pass");
    for (const d of p.would_pass.slice(0, 5)) line("  " + when(d.ts) + " " + (d.method || "") + " " + hostPort(d) + (d.path || ""));
    if (!p.you_may_approve) line("you may not approve this host (access-owner-approves): the request will wait for an administrator", "deny");
  } catch (e) { line("cannot tell: " + e.message, "deny"); }
}

async function allow(ev) {
  ev.preventDefault();
  const dlg = $("grant-dialog");
  const duration = chosenDuration();
  const { mode, name, host, id } = dlg.dataset;
  dlg.close();
  try {
    if (mode === "approve") {
      const r = await api("POST", "/api/access/approve", { id, duration });
      notice("Request " + id + " approved: " + host + " for " + name + " until " + when(r.until));
    } else {
      const r = await api("POST", "/api/grant", { name, host, duration });
      notice(host + " allowed for " + name + " until " + when(r.until));
    }
  } catch (e) { notice((mode === "approve" ? "Approve " : "Allow ") + host + ": " + e.message, true); }
  loadAccess();
}

// ---------------------------------------------------------------- access

function drawAccessDenials() {
  const tbody = $("access-denials").tBodies[0];
  tbody.replaceChildren();
  for (const d of state.denials.slice(-20).reverse()) {
    const tr = document.createElement("tr");
    cell(tr, when(d.ts));
    cell(tr, d.name || d.sandbox);
    cell(tr, hostPort(d), "host");
    cell(tr, d.reason);
    const td = cell(tr, "");
    if (d.name && d.host) td.appendChild(button("Allow…", () => askGrant(d)));
    tbody.appendChild(tr);
  }
}

async function loadAccess() {
  const tbody = $("access-table").tBodies[0];
  try {
    const r = await api("GET", "/api/access");
    tbody.replaceChildren();
    const pending = r.requests.filter((q) => q.status === "pending");
    for (const q of pending) {
      const tr = document.createElement("tr");
      tr.dataset.id = q.id;
      cell(tr, when(q.requested));
      cell(tr, q.name, "name");
      cell(tr, q.host, "host");
      cell(tr, Math.round(q.seconds / 60) + " min");
      cell(tr, q.why);
      cell(tr, q.status);
      const td = cell(tr, "");
      td.appendChild(button("Approve…", () => askApprove(q)));
      td.appendChild(button("Deny", () => decide("deny", q.id), "danger"));
      tbody.appendChild(tr);
    }
    $("access-empty").hidden = pending.length > 0;
    drawAccessDenials();
  } catch (e) {
    if (e.status === 401) return showLogin();
    notice("Access requests: " + e.message, true);
  }
}

async function decide(what, id) {
  try {
    await api("POST", "/api/access/" + what, { id });
    notice("Request " + id + " " + what + "ed");
  } catch (e) { notice(what + " " + id + ": " + e.message, true); }
  loadAccess();
}

// ---------------------------------------------------------------- traffic

const SVG = "http://www.w3.org/2000/svg";

function sum(a) { return (a || []).reduce((x, y) => x + y, 0); }

function bytes(n) {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + u[i];
}

// A bar per step: allowed (green) under denied (red), scaled to the
// busiest step; drawn as SVG elements, never as markup.
function chart(allowed, denied) {
  const w = 180, h = 36, n = Math.max(allowed.length, 1);
  const max = Math.max(1, ...allowed.map((a, i) => a + (denied[i] || 0)));
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("width", w);
  svg.setAttribute("height", h);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", sum(allowed) + " allowed, " + sum(denied) + " denied in the last hour");
  const bw = w / Math.max(n, 60);
  allowed.forEach((a, i) => {
    const d = denied[i] || 0;
    for (const [v, base, cls] of [[a, 0, "bar-allow"], [d, a, "bar-deny"]]) {
      if (!v) continue;
      const r = document.createElementNS(SVG, "rect");
      r.setAttribute("x", (w - n * bw) + i * bw);
      r.setAttribute("width", Math.max(bw - 0.5, 0.5));
      r.setAttribute("y", h - ((base + v) / max) * h);
      r.setAttribute("height", (v / max) * h);
      r.setAttribute("class", cls);
      svg.appendChild(r);
    }
  });
  return svg;
}

// The traffic page: its sandboxes' names are asked for when the page is
// shown (withList), not on each 10 s refresh, which asks only for the
// numbers (a list reads every sandbox's description in Proxmox and asks
// every egressd).
async function loadTraffic(withList) {
  try {
    const [t, list] = await Promise.all([api("GET", "/api/traffic"),
      withList || !state.trafficList ? api("GET", "/api/sandboxes") : state.trafficList]);
    state.trafficList = list;
    // (a sandbox made since the page was shown goes by its VMID until then)
    const names = new Map(list.sandboxes.map((s) => [String(s.vmid), s.name]));
    $("traffic-step").textContent = String(t.step);
    const tbody = $("traffic-table").tBodies[0];
    tbody.replaceChildren();
    for (const s of t.sandboxes) {
      const tr = document.createElement("tr");
      tr.dataset.sandbox = s.sandbox;
      cell(tr, names.get(s.sandbox) || s.sandbox, "name");
      cell(tr, s.active);
      cell(tr, sum(s.allowed), "allowed");
      cell(tr, sum(s.denied), "denied");
      cell(tr, bytes(sum(s.bytes_up)) + " / " + bytes(sum(s.bytes_down)));
      cell(tr, "").appendChild(chart(s.allowed, s.denied));
      const top = (list) => (list || []).map((h) => h.host + " ×" + h.count).join(", ");
      cell(tr, t.top_allowed ? top(t.top_allowed[s.sandbox]) : "(console-access-log is not set)", "host");
      cell(tr, top(t.top_denied[s.sandbox]), "host");
      tbody.appendChild(tr);
    }
    $("traffic-empty").hidden = t.sandboxes.length > 0;
    if (withList) sandboxChoices($("log-name"), list.sandboxes);
  } catch (e) {
    if (e.status === 401) return showLogin();
    notice("Traffic: " + e.message, true);
  }
}

async function loadLog(ev) {
  if (ev) ev.preventDefault();
  const q = new URLSearchParams({ name: $("log-name").value, host: $("log-host").value,
    decision: $("log-decision").value, reason: $("log-reason").value });
  const tbody = $("log-table").tBodies[0];
  try {
    const r = await api("GET", "/api/log?" + q.toString());
    tbody.replaceChildren();
    for (const l of r.lines) {
      const tr = document.createElement("tr");
      cell(tr, when(l.ts));
      cell(tr, l.mode);
      cell(tr, l.method);
      cell(tr, hostPort(l), "host");
      cell(tr, l.path, "path");
      cell(tr, l.decision, l.decision === "allow" ? "allow" : "deny");
      cell(tr, l.reason);
      cell(tr, l.status);
      cell(tr, bytes(l.bytes_up || 0) + " / " + bytes(l.bytes_down || 0));
      tbody.appendChild(tr);
    }
    $("log-note").textContent = r.lines.length + " of the last " + r.scanned + " lines";
  } catch (e) { notice("Access log: " + e.message, true); }
}

// ---------------------------------------------------------------- pages

function route() {
  if (!state.session) return;
  const page = (location.hash || "#sandboxes").slice(1);
  for (const p of document.querySelectorAll(".page")) p.hidden = p.id !== page;
  for (const a of document.querySelectorAll("nav a")) a.setAttribute("aria-current", a.id === "nav-" + page ? "page" : "false");
  if (page === "sandboxes") loadSandboxes();
  if (page === "access") loadAccess();
  if (page === "traffic") loadTraffic(true);
  if (page === "denials") {
    $("denials-badge").hidden = true;
    $("denials-badge").textContent = "";
  }
}

function start() {
  $("login").hidden = true;
  $("nav").hidden = false;
  $("who").hidden = false;
  $("who-name").textContent = state.session.user + (state.session.admin ? " (admin)" : "");
  startDenials();
  route();
}

document.addEventListener("DOMContentLoaded", async () => {
  $("login-form").addEventListener("submit", login);
  $("explain-form").addEventListener("submit", explain);
  $("log-form").addEventListener("submit", loadLog);
  $("logout").addEventListener("click", logout);
  $("grant-form").addEventListener("submit", allow);
  $("grant-cancel").addEventListener("click", () => $("grant-dialog").close());
  const refreshChanges = () => {
    $("grant-custom-label").hidden = $("grant-duration").value !== "custom";
    showChanges();
  };
  $("grant-duration").addEventListener("change", refreshChanges);
  $("grant-custom").addEventListener("change", refreshChanges);
  $("destroy-form").addEventListener("submit", destroy);
  $("destroy-cancel").addEventListener("click", () => $("destroy-dialog").close());
  window.addEventListener("hashchange", route);
  setInterval(() => { if (state.session && !$("traffic").hidden) loadTraffic(false); }, 10000);
  try {
    state.session = await api("GET", "/api/session");
    start();
  } catch (e) {
    showLogin();
  }
});
