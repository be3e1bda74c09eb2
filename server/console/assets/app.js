// Setpoint console: plain JavaScript, no dependencies, no build step.
// It reads the JSON endpoints under /console/api/ (protojson shapes of the
// gRPC API) with the caller's bearer token, when it has one.
"use strict";

const TOKEN_KEY = "setpoint-token";
const state = { session: null, watch: null, page: null, timer: null };

// ---------- small helpers ----------

const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
const num = (v) => Number(v ?? 0);
const $ = (sel, root = document) => root.querySelector(sel);
const keyPath = (k) => `${k.cluster}/${k.namespace}/${k.name}`;
const keyQuery = (k) => `cluster=${encodeURIComponent(k.cluster)}&namespace=${encodeURIComponent(k.namespace)}&name=${encodeURIComponent(k.name)}`;

function authHeaders() {
  const t = sessionStorage.getItem(TOKEN_KEY);
  return t ? { Authorization: "Bearer " + t } : {};
}

class HTTPError extends Error {
  constructor(status, body) { super(body.message || `HTTP ${status}`); this.status = status; this.code = body.code; }
}

async function api(path, opts = {}) {
  const res = await fetch("/console/api/" + path, { ...opts, headers: { ...authHeaders(), ...(opts.headers || {}) } });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new HTTPError(res.status, body);
  return body;
}

function fmtTime(iso, seconds = true) {
  if (!iso) return "—";
  const d = new Date(iso);
  const p = (n) => String(n).padStart(2, "0");
  const hm = `${p(d.getUTCHours())}:${p(d.getUTCMinutes())}`;
  return seconds ? `${hm}:${p(d.getUTCSeconds())}` : hm;
}
function fmtDateTime(iso) {
  if (!iso) return "—";
  return new Date(iso).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}
function ago(iso) {
  if (!iso) return "never";
  const s = Math.max(0, (Date.now() - new Date(iso).getTime()) / 1000);
  if (s < 90) return `${Math.round(s)}s ago`;
  if (s < 5400) return `${Math.round(s / 60)}m ago`;
  if (s < 172800) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}

// Metric vocabulary, as kubectl prints it.
function metricName(m) {
  switch (m.type) {
    case "Resource": return `${m.resource.name} resource`;
    case "ContainerResource": return `${m.containerResource.name} of container ${m.containerResource.container}`;
    case "Pods": return `${m.pods.metric.name} on pods`;
    case "Object": return `${m.object.metric.name} on ${m.object.describedObject.kind}/${m.object.describedObject.name}`;
    case "External": return `${m.external.metric.name} (external)`;
  }
  return m.type || "metric";
}
function metricTarget(m) {
  const src = m.resource || m.containerResource || m.pods || m.object || m.external || {};
  return src.target || {};
}
const isUtil = (m) => metricTarget(m).type === "Utilization";
// Logged values are a percent (utilization) or a milli-value.
function fmtValue(m, v) {
  v = num(v);
  if (m && isUtil(m)) return `${v}%`;
  if (v % 1000 === 0) return String(v / 1000);
  if (Math.abs(v) >= 100000) return (v / 1000).toFixed(1);
  return `${v}m`;
}
function plotValue(m, v) { v = num(v); return m && isUtil(m) ? v : v / 1000; }
function unitOf(m) { return m && isUtil(m) ? "% of request" : metricTarget(m).type === "AverageValue" ? "per pod" : "total"; }

const STEP_WORDS = {
  ScalingDisabled: "scaling is disabled (selectPolicy Disabled)",
  CurrentAboveMax: "the count was above maxReplicas",
  CurrentBelowMin: "the count was below minReplicas",
  Stabilized: "the stabilization window held it",
  Limited: "a scaling policy limited the change",
  MinFromZero: "scaling up from zero starts at minReplicas",
};
const REASON_WORDS = {
  ScaleUpStabilized: "recent recommendations were lower, so the lowest of the scale-up window was used",
  ScaleDownStabilized: "recent recommendations were higher, so the highest of the scale-down window was used",
  ScaleUpLimit: "the scale-up policies allow no larger step in their period",
  ScaleDownLimit: "the scale-down policies allow no larger step in their period",
  TooManyReplicas: "the count is capped at maxReplicas",
  TooFewReplicas: "the count is raised to minReplicas",
  DesiredWithinRange: "the desired count is within range",
  ScalingDisabled: "scaling is disabled",
};
const OUTCOME_WORDS = {
  WithinTolerance: "within tolerance, so it kept the current count",
  Scaled: "proposed",
  Rebalanced: "after filling in missing and unready pods, proposed",
  RebalanceHeld: "after filling in missing and unready pods, it fell within tolerance and kept the current count",
  FromZero: "from zero replicas, proposed",
};

// explain says a logged decision in words.
function explain(d, spec) {
  const x = d.explanation || {};
  const cur = num(x.currentReplicas), want = num(d.desiredReplicas);
  const parts = [];
  parts.push(want === cur ? `Kept ${cur} replicas.` : `Scaled from ${cur} to ${want} replicas${d.rescale ? "" : " (no rescale)"}.`);
  const winner = x.winner ?? 0;
  (x.metrics || []).forEach((m, i) => {
    const ms = (spec.metrics || [])[i];
    const name = ms ? metricName(ms) : `metric ${i + 1}`;
    if (m.outcome === "Failed") { parts.push(`${name} failed${m.error ? ": " + m.error : ""}.`); return; }
    const vals = `${fmtValue(ms, m.current)} against a target of ${fmtValue(ms, m.target)}`;
    const words = OUTCOME_WORDS[m.outcome] || m.outcome;
    const tail = m.outcome === "WithinTolerance" || m.outcome === "RebalanceHeld" ? words : `${words} ${num(m.proposal)}`;
    const pods = [num(m.readyPods) + " ready"];
    if (num(m.unreadyPods)) pods.push(num(m.unreadyPods) + " unready");
    if (num(m.missingPods)) pods.push(num(m.missingPods) + " missing");
    parts.push(`${name} at ${vals} (${pods.join(", ")} pods): ${tail}${i === winner && (x.metrics || []).length > 1 ? " — the largest proposal, used" : ""}.`);
  });
  const steps = x.steps || [];
  if (!steps.length && (x.metrics || []).length) parts.push("Nothing held the proposal back.");
  for (const s of steps) {
    const why = REASON_WORDS[s.reason] || STEP_WORDS[s.kind] || s.reason || s.kind;
    parts.push(num(s.from) === num(s.to) ? `${capital(why)}.` : `${num(s.from)} → ${num(s.to)}: ${why}.`);
  }
  if (d.error) parts.push(`Error: ${d.error}`);
  return parts.join(" ");
}
const capital = (s) => s.charAt(0).toUpperCase() + s.slice(1);
function limitOf(d) {
  const steps = (d.explanation || {}).steps || [];
  return steps.length ? steps[steps.length - 1] : null;
}

function conditionChip(c) {
  if (!c) return `<span class="chip none">—</span>`;
  const good = { AbleToScale: "True", ScalingActive: "True", ScalingLimited: "False", ScaledToZero: "False" }[c.type];
  const cls = c.status === good ? "ok" : c.status === "Unknown" ? "none" : c.type === "ScalingLimited" ? "warn" : "bad";
  const label = c.status !== good ? `${c.type}: ${c.reason}` : c.type === "ScalingLimited" ? "WithinLimits" : c.type;
  return `<span class="chip ${cls}" title="${esc(c.reason)}: ${esc(c.message)}">${esc(label)}</span>`;
}

// ---------- session, login, routing ----------

async function start() {
  window.addEventListener("hashchange", route);
  try {
    state.session = await api("session");
  } catch (e) {
    if (e.status === 401) return showLogin(sessionStorage.getItem(TOKEN_KEY) ? "That token is not known to this server." : "");
    return fail(e);
  }
  const s = state.session;
  const who = $("#who");
  who.innerHTML = s.principal ? `<span>${esc(s.principal)} · ${esc(s.role)}</span>` : `<span>no authentication</span>`;
  if (sessionStorage.getItem(TOKEN_KEY)) {
    const b = document.createElement("button");
    b.textContent = "Sign out";
    b.onclick = () => { sessionStorage.removeItem(TOKEN_KEY); location.hash = "#/"; location.reload(); };
    who.append(b);
  }
  if (s.warning) { const b = $("#banner"); b.textContent = s.warning; b.hidden = false; }
  document.title = "Setpoint console";
  route();
}

function showLogin(msg) {
  $("#crumbs").textContent = "";
  $("#main").innerHTML = `
    <div class="panel login">
      <h1>Sign in</h1>
      <p class="sub">Use the bearer token issued to you (the same one the API takes), or open this page with a client certificate.</p>
      <form id="login">
        <label class="field">Token <input id="token" type="password" autocomplete="current-password" required></label>
        <p class="error">${esc(msg)}</p>
        <button class="primary" type="submit">Sign in</button>
      </form>
    </div>`;
  $("#login").onsubmit = (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("#token").value.trim());
    start();
  };
}

function fail(e) {
  if (e.status === 401) return showLogin("Your session is no longer valid.");
  $("#main").innerHTML = `<div class="panel"><p class="error">${esc(e.message)}</p></div>`;
}

function route() {
  stopWatch();
  if (state.timer) { clearInterval(state.timer); state.timer = null; }
  const h = decodeURIComponent(location.hash.replace(/^#/, ""));
  const m = h.match(/^\/t\/([^/]*)\/([^/]*)\/(.+)$/);
  if (m) return targetPage({ cluster: m[1], namespace: m[2], name: m[3] });
  const f = h.match(/^\/f\/([^/]*)\/(.+)$/);
  if (f) return fleetPage({ namespace: f[1], name: f[2] });
  return listPage();
}

// ---------- live updates: server-sent events over fetch ----------

function stopWatch() {
  if (state.watch) { state.watch.abort(); state.watch = null; }
}

function watch(query, onChange) {
  stopWatch();
  const ctl = new AbortController();
  state.watch = ctl;
  const live = $("#live");
  const set = (on) => { const l = $("#live"); if (l) { l.classList.toggle("off", !on); l.textContent = on ? "Live" : "Reconnecting…"; } };
  (async () => {
    while (!ctl.signal.aborted) {
      try {
        const res = await fetch("/console/api/watch?" + query, { headers: authHeaders(), signal: ctl.signal });
        if (!res.ok) throw new Error("watch: HTTP " + res.status);
        set(true);
        const reader = res.body.getReader();
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
            let event = "message", data = "";
            for (const line of chunk.split("\n")) {
              if (line.startsWith("event: ")) event = line.slice(7);
              else if (line.startsWith("data: ")) data += line.slice(6);
            }
            if (data && event === "message") onChange(JSON.parse(data));
          }
        }
      } catch (e) {
        if (ctl.signal.aborted) return;
      }
      set(false);
      await new Promise((r) => setTimeout(r, 2000));
      if (!ctl.signal.aborted) onChange(null); // resync after a gap
    }
  })();
  return live;
}

// ---------- the target list ----------

async function listPage() {
  const page = { list: true };
  state.page = page;
  $("#crumbs").innerHTML = `Targets`;
  const q = new URLSearchParams(location.hash.split("?")[1] || "");
  const cluster = q.get("cluster") || "", namespace = q.get("namespace") || "", sort = q.get("sort") || "rescale";
  $("#main").innerHTML = `
    <h1>Autoscalers</h1>
    <p class="sub">Every target this identity may read, with its last decision. <span class="live off" id="live">Connecting…</span></p>
    <form class="toolbar" id="filters">
      <label class="field">Cluster <input name="cluster" value="${esc(cluster)}" placeholder="all"></label>
      <label class="field">Namespace <input name="namespace" value="${esc(namespace)}" placeholder="all"></label>
      <label class="field">Sort by
        <select name="sort">
          <option value="rescale"${sort === "rescale" ? " selected" : ""}>most recent rescale</option>
          <option value="name"${sort === "name" ? " selected" : ""}>name</option>
        </select></label>
      <button class="primary" type="submit">Apply</button>
    </form>
    <div class="panel" id="list"><p class="muted">Loading…</p></div>
    <h1 class="spaced">Fleets</h1>
    <p class="sub">One autoscaler over a workload in several clusters: its total, and how it is split among the member clusters.</p>
    <div class="panel" id="fleets"><p class="muted">Loading…</p></div>`;
  $("#filters").onsubmit = (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    const p = new URLSearchParams();
    for (const k of ["cluster", "namespace", "sort"]) if (f.get(k)) p.set(k, f.get(k));
    location.hash = "#/?" + p.toString();
  };
  const load = async () => {
    let body;
    try {
      const p = new URLSearchParams();
      if (cluster) p.set("cluster", cluster);
      if (namespace) p.set("namespace", namespace);
      body = await api("targets?" + p.toString());
    } catch (e) { return fail(e); }
    renderList(body, sort);
  };
  await load();
  // Fleets are not in the change feed: the list reads them again every
  // FLEET_REFRESH_MS.
  if (state.page !== page) return; // the viewer moved on while it loaded
  loadFleets(cluster, namespace);
  state.timer = setInterval(() => { if (state.page === page) loadFleets(cluster, namespace); }, FLEET_REFRESH_MS);
  let timer = null;
  const p = new URLSearchParams();
  if (cluster) p.set("cluster", cluster);
  if (cluster && namespace) p.set("namespace", namespace);
  watch(p.toString(), () => { clearTimeout(timer); timer = setTimeout(load, 300); });
}

function renderList(body, sort) {
  const targets = (body.list && body.list.targets) || [];
  const lastScale = (t) => (t.status && t.status.lastScaleTime ? new Date(t.status.lastScaleTime).getTime() : 0);
  if (sort === "rescale") targets.sort((a, b) => lastScale(b) - lastScale(a) || keyPath(a.key).localeCompare(keyPath(b.key)));
  else targets.sort((a, b) => keyPath(a.key).localeCompare(keyPath(b.key)));
  const limited = targets.filter((t) => ((t.status || {}).conditions || []).some((c) => c.type === "ScalingLimited" && c.status === "True")).length;
  const failing = targets.filter((t) => ((t.status || {}).conditions || []).some((c) => (c.type === "AbleToScale" || c.type === "ScalingActive") && c.status === "False")).length;
  const rows = targets.map((t) => {
    const st = t.status || {}, spec = t.spec || {};
    const cond = (type) => (st.conditions || []).find((c) => c.type === type);
    const metrics = (spec.metrics || []).map((m, i) => {
      const cm = (st.currentMetrics || [])[i];
      const cur = cm ? currentOf(cm) : "<unknown>";
      return `${esc(cur)}/${esc(targetOf(m))}`;
    }).join(", ");
    const ref = spec.scaleTargetRef || {};
    return `<tr data-key="${esc(keyPath(t.key))}">
      <td><a href="#/t/${encodeURIComponent(t.key.cluster)}/${encodeURIComponent(t.key.namespace)}/${encodeURIComponent(t.key.name)}">${esc(keyPath(t.key))}</a></td>
      <td>${esc(ref.kind)}/${esc(ref.name)}</td>
      <td class="num">${num(st.currentReplicas)} → ${num(st.desiredReplicas)}</td>
      <td class="num">${num(spec.minReplicas ?? 1)}–${num(spec.maxReplicas)}</td>
      <td>${metrics || "—"}</td>
      <td title="${esc(fmtDateTime(st.lastScaleTime))}">${esc(ago(st.lastScaleTime))}</td>
      <td>${conditionChip(cond("AbleToScale"))}${conditionChip(cond("ScalingActive"))}${conditionChip(cond("ScalingLimited"))}</td>
    </tr>`;
  }).join("");
  $("#list").innerHTML = `
    <div class="counts"><div><b>${targets.length}</b>targets</div><div><b>${limited}</b>limited</div><div><b>${failing}</b>unable to scale</div></div>
    ${body.truncated ? `<p class="muted">Only the first ${targets.length} targets are shown: filter by cluster or namespace.</p>` : ""}
    <table class="data" id="targets"><thead><tr><th>Target</th><th>Scales</th><th class="num">Replicas</th><th class="num">Min–max</th><th>Metrics (current/target)</th><th>Last rescale</th><th>Conditions</th></tr></thead>
    <tbody>${rows || `<tr><td colspan="7" class="muted">No targets.</td></tr>`}</tbody></table>`;
}

// ---------- fleets ----------

const fleetPath = (k) => `${k.namespace}/${k.name}`;
const fleetHref = (k) => `#/f/${encodeURIComponent(k.namespace)}/${encodeURIComponent(k.name)}`;
const fleetQuery = (k) => `namespace=${encodeURIComponent(k.namespace)}&name=${encodeURIComponent(k.name)}`;

// sharesText is a split's shares in one line, as setpointctl prints them.
function sharesText(split) {
  return ((split || {}).shares || []).map((s) => s.reason === "Excluded"
    ? `${s.member} excluded (${s.exclusion})`
    : `${s.member} ${num(s.replicas)} (${s.reason})`).join(", ");
}

// loadFleets fills the list page's fleet panel: the fleets the caller may
// read, of the namespace, with a member in the cluster, when set. A
// failure shows in the panel alone.
async function loadFleets(cluster, namespace) {
  let body;
  try {
    body = await api("fleets?" + (namespace ? "namespace=" + encodeURIComponent(namespace) : ""));
  } catch (e) {
    if (e.status === 401) return fail(e);
    const el = $("#fleets");
    if (el) el.innerHTML = `<p class="error">${esc(e.message)}</p>`;
    return;
  }
  const el = $("#fleets");
  if (!el) return;
  let fleets = (body.list && body.list.fleets) || [];
  if (cluster) fleets = fleets.filter((f) => ((f.spec || {}).members || []).some((m) => m.cluster === cluster));
  fleets.sort((a, b) => fleetPath(a.key).localeCompare(fleetPath(b.key)));
  const rows = fleets.map((f) => {
    const spec = (f.spec || {}).autoscaler || {}, st = f.status || {};
    const ref = spec.scaleTargetRef || {};
    const members = (f.spec || {}).members || [];
    const pooled = (f.members || []).filter((m) => m.pooled).length;
    return `<tr data-fleet="${esc(fleetPath(f.key))}">
      <td><a href="${fleetHref(f.key)}">${esc(fleetPath(f.key))}</a></td>
      <td>${esc(ref.kind)}/${esc(ref.name)}</td>
      <td class="num">${num(st.currentReplicas)} → ${num(st.desiredReplicas)}</td>
      <td class="num">${num(spec.minReplicas ?? 1)}–${num(spec.maxReplicas)}</td>
      <td class="num">${pooled}/${members.length}</td>
      <td class="shares">${esc(sharesText(f.split)) || `<span class="muted">not split yet</span>`}</td>
      <td title="${esc(fmtDateTime(f.lastSeen))}">${esc(ago(f.lastSeen))}</td>
    </tr>`;
  }).join("");
  el.innerHTML = `${body.truncated ? `<p class="muted">Only the first ${fleets.length} fleets are shown: filter by namespace.</p>` : ""}
    <table class="data" id="fleet-list"><thead><tr><th>Fleet</th><th>Scales</th><th class="num">Total</th><th class="num">Min–max</th><th class="num">Pooled</th><th>Shares</th><th>Last seen</th></tr></thead>
    <tbody>${rows || `<tr><td colspan="7" class="muted">No fleets.</td></tr>`}</tbody></table>`;
}

// FLEET_REFRESH_MS is how often a fleet's page reads the fleet again.
const FLEET_REFRESH_MS = 5000;

// fleetPage shows one fleet: its last decision in words, the split (each
// member's share, reason and sentence), and the members' latest reports,
// why any was left out of the pool. It reads the fleet again every
// FLEET_REFRESH_MS.
async function fleetPage(key) {
  $("#crumbs").innerHTML = `<a href="#/">Targets</a> / fleet ${esc(fleetPath(key))}`;
  $("#main").innerHTML = `<p class="muted">Loading…</p>`;
  const page = { key, fleet: null };
  state.page = page;
  const load = async () => {
    const body = await api("fleets?" + fleetQuery(key));
    const f = ((body.list && body.list.fleets) || [])[0];
    if (!f) throw new HTTPError(404, { message: `No fleet ${fleetPath(key)} that this identity may read.` });
    page.fleet = f;
  };
  try { await load(); } catch (e) { return fail(e); }
  const f = page.fleet;
  const spec = (f.spec || {}).autoscaler || {};
  const ref = spec.scaleTargetRef || {};
  const members = (f.spec || {}).members || [];
  $("#main").innerHTML = `
    <h1>Fleet ${esc(fleetPath(key))}</h1>
    <p class="sub">Scales ${esc(ref.kind)}/${esc(ref.name)} between ${num(spec.minReplicas ?? 1)} and ${num(spec.maxReplicas)} replicas in total over ${members.length} member clusters (${esc(members.map((m) => m.cluster).join(", "))}) · <span id="fleet-seen"></span></p>
    <div class="grid">
      <div>
        <div class="panel"><h2>Split</h2><div id="split"></div></div>
        <div class="panel"><h2>Members</h2><div id="members"></div></div>
      </div>
      <div>
        <div class="panel"><h2>Decision</h2><div id="fleet-decision"></div></div>
        <div class="panel"><h2>Describe</h2><pre class="describe" id="describe"></pre></div>
      </div>
    </div>`;
  renderFleet(page);
  state.timer = setInterval(async () => {
    if (state.page !== page) return;
    try { await load(); } catch (e) { return; }
    if (state.page === page) renderFleet(page);
  }, FLEET_REFRESH_MS);
}

// MEMBER_COLORS color the members in the split's bar, in spec order.
const MEMBER_COLORS = ["#2457c5", "#0f766e", "#d53f8c", "#b7791f", "#6b46c1", "#2f855a", "#c53030", "#2c7a7b"];

// dot is a member's color mark (SVG, as the split's bar).
const dot = (fill) => `<svg class="dot" viewBox="0 0 10 10" width="10" height="10" aria-hidden="true"><circle cx="5" cy="5" r="4.5" fill="${fill}"/></svg>`;

const SHARE_CHIP = { Weighted: "ok", AtMin: "none", AtMax: "warn", Standby: "none", Held: "warn", Returning: "warn", Excluded: "bad" };

function renderFleet(page) {
  const f = page.fleet;
  const fs = f.spec || {};
  const spec = fs.autoscaler || {};
  const members = fs.members || [];
  $("#fleet-seen").textContent = `last seen ${ago(f.lastSeen)}`;
  const terms = (name) => {
    const m = members.find((x) => x.cluster === name);
    if (!m) return "no longer in the spec";
    const t = [`weight ${num(m.weight)}`];
    if (m.minReplicas !== undefined) t.push(`min ${num(m.minReplicas)}`);
    if (m.maxReplicas !== undefined) t.push(`max ${num(m.maxReplicas)}`);
    return t.join(", ");
  };
  const color = (name) => MEMBER_COLORS[Math.max(0, members.findIndex((x) => x.cluster === name)) % MEMBER_COLORS.length];
  const split = f.split;
  if (!split) {
    $("#split").innerHTML = `<p class="muted" id="split-none">The fleet has not split a total among its members yet: each member keeps the replicas it has.</p>`;
  } else {
    const shares = split.shares || [];
    // The bar is SVG: the page's Content-Security-Policy allows no inline
    // styles, and SVG's presentation attributes are not styles.
    const total = Math.max(1, num(split.placed), num(split.total));
    // Positions are percentages of the bar's width.
    let x = 0;
    const segs = shares.filter((s) => num(s.replicas) > 0).map((s) => {
      const w = (100 * num(s.replicas)) / total;
      const seg = `<g class="seg" data-member="${esc(s.member)}"><rect x="${x.toFixed(2)}%" y="0" width="${w.toFixed(2)}%" height="26" fill="${color(s.member)}"><title>${esc(s.member)}: ${num(s.replicas)} (${esc(s.reason)})</title></rect>` +
        (w > 5 ? `<text x="${(x + 0.8).toFixed(2)}%" y="17">${esc(s.member)} ${num(s.replicas)}</text>` : "") + `</g>`;
      x += w;
      return seg;
    }).join("");
    const bar = `<svg class="splitbar" width="100%" height="26" role="img" aria-label="the split">${segs}</svg>`;
    const rows = shares.map((s) => `<tr data-member="${esc(s.member)}" data-replicas="${num(s.replicas)}" data-reason="${esc(s.reason)}">
      <td>${dot(color(s.member))}${esc(s.member)}</td>
      <td class="muted">${esc(terms(s.member))}</td>
      <td class="num"><b>${num(s.replicas)}</b></td>
      <td class="num">${s.reason === "Excluded" ? "—" : num(s.weighted)}</td>
      <td><span class="chip ${SHARE_CHIP[s.reason] || "none"}">${esc(s.reason)}${s.exclusion ? ": " + esc(s.exclusion) : ""}</span></td>
      <td class="explain">${esc(s.message)}</td></tr>`).join("");
    $("#split").innerHTML = `
      <p><b id="split-total">${num(split.total)}</b> replicas split at ${esc(fmtDateTime(split.time))}${num(split.placed) !== num(split.total) ? ` — <span class="error">the members' min and max place ${num(split.placed)}</span>` : ""}.</p>
      ${bar}
      <table class="data" id="shares"><thead><tr><th>Member</th><th>Terms</th><th class="num">Share</th><th class="num">Weighted</th><th>Reason</th><th>Why</th></tr></thead><tbody>${rows}</tbody></table>
      <p class="explain" id="split-message">${esc(split.message)}</p>`;
  }
  const mrows = (f.members || []).map((m) => {
    const pool = m.pooled ? `<span class="chip ok">pooled</span>` : `<span class="chip bad">left out: ${esc(m.exclusion || "not pooled")}</span>`;
    const notes = [m.message];
    if (m.cannotScale) notes.push(`cannot scale: ${m.cannotScale}`);
    if (m.returning) notes.push("returning from exclusion");
    return `<tr data-member="${esc(m.member)}" data-pooled="${m.pooled ? "true" : "false"}" data-exclusion="${esc(m.exclusion || "")}">
      <td>${dot(color(m.member))}${esc(m.member)}</td>
      <td>${pool}</td>
      <td title="${esc(fmtDateTime(m.lastReport))}">${esc(m.lastReport ? ago(m.lastReport) : "never")}</td>
      <td class="num">${num(m.replicas)}</td><td class="num">${num(m.pods)}</td><td class="num">${num(m.share)}</td>
      <td class="explain">${esc(notes.filter(Boolean).join("; "))}</td></tr>`;
  }).join("");
  const out = (f.members || []).filter((m) => !m.pooled);
  $("#members").innerHTML = `
    <p id="left-out">${out.length ? `${out.length} of ${(f.members || []).length} members left out of the last decision's pool: their pods, metrics and replicas were not counted.` : "Every member was pooled in the last decision."}</p>
    <table class="data" id="member-list"><thead><tr><th>Member</th><th>Pool</th><th>Last report</th><th class="num">Replicas</th><th class="num">Pods</th><th class="num">Share</th><th>Note</th></tr></thead>
    <tbody>${mrows || `<tr><td colspan="7" class="muted">No member has reported.</td></tr>`}</tbody></table>`;
  const d = f.lastDecision;
  const conds = ((f.status || {}).conditions || []);
  const cond = (type) => conds.find((c) => c.type === type);
  $("#fleet-decision").innerHTML = d
    ? `<p><b id="fleet-replicas">${num((d.explanation || {}).currentReplicas)} → ${num(d.desiredReplicas)}</b> at ${esc(fmtDateTime(d.decisionTime))}${d.rescale ? ` <span class="chip warn">rescale</span>` : ""}</p>
       <p class="explain" id="fleet-explain">${esc(explain(d, spec))}</p>
       <div>${conditionChip(cond("AbleToScale"))}${conditionChip(cond("ScalingActive"))}${conditionChip(cond("ScalingLimited"))}</div>`
    : `<p class="muted" id="fleet-explain">No decision yet: the fleet decides when a member reports.</p>`;
  // The fleet's rescales its history keeps (the scaling policies' periods).
  const h = f.history || {};
  const events = [...(h.scaleUpEvents || []).map((e) => ({ ...e, up: true })), ...(h.scaleDownEvents || []).map((e) => ({ ...e, up: false }))]
    .sort((x, y) => new Date(y.time) - new Date(x.time));
  if (events.length) {
    $("#fleet-decision").insertAdjacentHTML("beforeend", `<h2 class="spaced">Recent rescales of the total</h2>
      <ul class="diffs" id="fleet-rescales">${events.map((e) => `<li>${esc(fmtDateTime(e.time))}: ${e.up ? "+" : "−"}${num(e.change)}${e.outdated ? ` <span class="muted">(outside every policy period)</span>` : ""}</li>`).join("")}</ul>`);
  }
  $("#describe").textContent = describe({ key: { name: f.key.name, namespace: f.key.namespace }, spec, status: f.status }, `Members:               ${members.map((m) => `${m.cluster} (${terms(m.cluster)})`).join(", ")}`);
}

function currentOf(ms) {
  const src = ms.resource || ms.containerResource || ms.pods || ms.object || ms.external;
  if (!src || !src.current) return "<unknown>";
  const c = src.current;
  if (c.averageUtilization !== undefined) return `${c.averageUtilization}%`;
  return c.averageValue || c.value || "<unknown>";
}
function targetOf(m) {
  const t = metricTarget(m);
  if (t.type === "Utilization") return `${t.averageUtilization ?? 0}%`;
  return t.type === "AverageValue" ? t.averageValue : t.value;
}

// ---------- a target's page ----------

async function targetPage(key) {
  $("#crumbs").innerHTML = `<a href="#/">Targets</a> / ${esc(keyPath(key))}`;
  $("#main").innerHTML = `<p class="muted">Loading…</p>`;
  let body;
  try { body = await api("target?" + keyQuery(key)); } catch (e) { return fail(e); }
  const page = { key, target: body.target, log: [], more: "", since: "", replay: null };
  try { await loadLog(page); } catch (e) { return fail(e); }
  state.page = page;
  const spec = page.target.spec || {};
  const ref = spec.scaleTargetRef || {};
  $("#main").innerHTML = `
    <h1>${esc(keyPath(key))}</h1>
    <p class="sub">Scales ${esc(ref.kind)}/${esc(ref.name)} between ${num(spec.minReplicas ?? 1)} and ${num(spec.maxReplicas)} replicas · last seen ${esc(ago(page.target.lastSeen))} <span class="live off" id="live">Connecting…</span></p>
    <div class="grid">
      <div>
        <div class="panel"><h2>Timeline</h2><div id="legend"></div><div id="chart"></div></div>
        <div class="panel"><h2>Decisions <span class="muted" id="count"></span></h2><div class="scroll" id="decisions"></div></div>
      </div>
      <div>
        <div class="panel whatif"><h2>What if…</h2><div id="whatif"></div></div>
        <div class="panel"><h2>Describe</h2><pre class="describe" id="describe"></pre></div>
      </div>
    </div>`;
  renderTarget(page);
  renderWhatIf(page);
  watch(keyQuery(key), async (ev) => {
    if (state.page !== page) return;
    if (ev === null) { // reconnected: reload what may have been missed
      try { const b = await api("target?" + keyQuery(key)); page.target = b.target; await loadLog(page); } catch (e) { return; }
    } else if (ev.decision) {
      const d = ev.decision;
      if (!page.more) { // the page shows the log up to now: keep it so, within MAX_LOG
        page.log.push({ decisionTime: d.decisionTime, desiredReplicas: d.desiredReplicas, rescale: d.rescale, error: d.error, explanation: d.explanation });
        if (page.log.length > MAX_LOG) page.log.splice(0, page.log.length - MAX_LOG);
      }
      page.target.status = d.status;
      page.target.lastDecision = d;
    } else if (ev.deleted) {
      $("#main").insertAdjacentHTML("afterbegin", `<p class="error">This target was deleted.</p>`);
      return;
    } else {
      return;
    }
    renderTarget(page);
  });
}

// The decision log a target's page shows: the hour before the target's
// last decision, asked for one bounded page (LOG_PAGE decisions) at a time,
// at most MAX_LOG in all.
const LOG_WINDOW_MS = 60 * 60 * 1000, LOG_PAGE = 500, MAX_LOG = 2000;

// loadLog reads the first page of the log the page shows.
async function loadLog(page) {
  const t = page.target;
  const anchor = (t.lastDecision && t.lastDecision.decisionTime) || t.lastSeen;
  page.since = anchor ? new Date(new Date(anchor).getTime() - LOG_WINDOW_MS).toISOString() : "";
  const p = new URLSearchParams(keyQuery(page.key));
  if (page.since) p.set("start_time", page.since);
  p.set("page_size", String(LOG_PAGE));
  const b = await api("decisions?" + p.toString());
  page.log = (b.log && b.log.decisions) || [];
  page.more = (b.log && b.log.nextPageToken) || "";
}

// loadMore appends the log's next page.
async function loadMore(page) {
  const p = new URLSearchParams(keyQuery(page.key));
  if (page.since) p.set("start_time", page.since);
  p.set("page_size", String(LOG_PAGE));
  p.set("page_token", page.more);
  const b = await api("decisions?" + p.toString());
  page.log = page.log.concat((b.log && b.log.decisions) || []).slice(-MAX_LOG);
  page.more = (b.log && b.log.nextPageToken) || "";
  renderTarget(page);
}

function renderTarget(page) {
  $("#count").innerHTML = `(${page.log.length} of the last hour${page.more ? ` · <button class="ghost" type="button" id="more-log">later decisions</button>` : ""})`;
  const more = $("#more-log");
  if (more) more.onclick = () => loadMore(page).catch(fail);
  const run = $("#run-replay");
  if (run) run.textContent = `Replay ${page.log.length} decisions`;
  renderChart(page);
  renderDecisions(page);
  $("#describe").textContent = describe(page.target);
}

// describe prints the target as `kubectl describe hpa` does; a fleet
// gives the line that names its members instead of the cluster's.
function describe(t, where) {
  const spec = t.spec || {}, st = t.status || {};
  const ref = spec.scaleTargetRef || {};
  const lines = [];
  lines.push(`Name:                  ${t.key.name}`);
  lines.push(`Namespace:             ${t.key.namespace}`);
  lines.push(where || `Cluster:               ${t.key.cluster}`);
  lines.push(`Reference:             ${ref.kind}/${ref.name}`);
  lines.push(`Metrics:               ( current / target )`);
  (spec.metrics || []).forEach((m, i) => {
    const cm = (st.currentMetrics || [])[i];
    lines.push(`  ${metricName(m)} ${isUtil(m) ? "on pods (as a percentage of request)" : ""}:`.replace(/ :$/, ":").padEnd(60) + `${cm ? currentOf(cm) : "<unknown>"} / ${targetOf(m)}`);
  });
  lines.push(`Min replicas:          ${spec.minReplicas ?? 1}`);
  lines.push(`Max replicas:          ${spec.maxReplicas}`);
  const b = spec.behavior || {};
  for (const [dir, r] of [["Scale Up", b.scaleUp], ["Scale Down", b.scaleDown]]) {
    if (!r) continue;
    lines.push(`Behavior ${dir}:`);
    lines.push(`  Stabilization Window: ${r.stabilizationWindowSeconds ?? 0} seconds`);
    lines.push(`  Select Policy: ${r.selectPolicy || "Max"}`);
    lines.push(`  Policies:`);
    for (const p of r.policies || []) lines.push(`    - Type: ${p.type}  Value: ${p.value}  Period: ${p.periodSeconds} seconds`);
  }
  lines.push(`Deployment pods:       ${num(st.currentReplicas)} current / ${num(st.desiredReplicas)} desired`);
  lines.push(`Conditions:`);
  const conds = st.conditions || [];
  const w = (k, n) => Math.max(n, ...conds.map((c) => String(c[k] || "").length));
  const wt = w("type", 4), ws = w("status", 6), wr = w("reason", 6);
  lines.push(`  ${"Type".padEnd(wt)}  ${"Status".padEnd(ws)}  ${"Reason".padEnd(wr)}  Message`);
  lines.push(`  ${"----".padEnd(wt)}  ${"------".padEnd(ws)}  ${"------".padEnd(wr)}  -------`);
  for (const c of conds) lines.push(`  ${c.type.padEnd(wt)}  ${c.status.padEnd(ws)}  ${(c.reason || "").padEnd(wr)}  ${c.message || ""}`);
  lines.push(`Events:                <none kept here; see the decision log>`);
  return lines.join("\n");
}

function renderDecisions(page) {
  const spec = page.target.spec || {};
  const metrics = spec.metrics || [];
  const rows = page.log.slice().reverse().map((d, ri) => {
    const x = d.explanation || {};
    const lim = limitOf(d);
    const mcells = metrics.map((m, i) => {
      const e = (x.metrics || [])[i];
      if (!e) return `<td>—</td>`;
      if (e.outcome === "Failed") return `<td class="error">failed</td>`;
      return `<td class="num">${esc(fmtValue(m, e.current))}/${esc(fmtValue(m, e.target))} → ${num(e.proposal)}<br><span class="muted">${num(e.readyPods)}/${num(e.unreadyPods)}/${num(e.missingPods)}</span></td>`;
    }).join("");
    return `<tr class="decision-row${d.rescale ? " rescaled" : ""}">
      <td>${esc(fmtTime(d.decisionTime))}</td>
      <td class="num">${num(x.currentReplicas)} → <b>${num(d.desiredReplicas)}</b>${d.rescale ? ` <span class="chip warn">rescale</span>` : ""}</td>
      ${mcells}
      <td>${lim ? `<span class="chip ${lim.kind === "Stabilized" ? "warn" : "bad"}">${esc(lim.reason || lim.kind)}</span>` : ""}</td>
      <td class="explain">${esc(explain(d, spec))}</td></tr>`;
  }).join("");
  const mh = metrics.map((m) => `<th class="num">${esc(metricName(m))}<br><span class="muted">cur/target → proposal · ready/unready/missing</span></th>`).join("");
  $("#decisions").innerHTML = `<table class="data"><thead><tr><th>Time (UTC)</th><th class="num">Replicas</th>${mh}<th>Limited by</th><th>Explanation</th></tr></thead><tbody>${rows || `<tr><td colspan="9" class="muted">No decisions logged yet.</td></tr>`}</tbody></table>`;
}

// ---------- the timeline chart (hand-written SVG) ----------

function renderChart(page) {
  const log = page.log;
  const spec = page.target.spec || {};
  const el = $("#chart");
  $("#legend").innerHTML = `<div class="legend">
    <span><i class="sw-replicas"></i>replicas</span>
    <span><i class="sw-desired"></i>desired</span>
    <span><i class="sw-marker"></i>rescale</span>
    <span><i class="box sw-stab"></i>stabilization window held it</span>
    <span><i class="box sw-limit"></i>a policy or min/max limited it</span>
    ${page.replay ? `<span><i class="sw-alt"></i>what-if replay</span>` : ""}</div>`;
  if (!log.length) { el.innerHTML = `<p class="muted">No decisions logged yet.</p>`; return; }
  const W = Math.max(520, el.clientWidth || 860), H = 260, M = { l: 44, r: 14, t: 10, b: 26 };
  const times = log.map((d) => new Date(d.decisionTime).getTime());
  let t0 = times[0], t1 = times[times.length - 1];
  if (t1 === t0) { t0 -= 60000; t1 += 60000; }
  const pad = (t1 - t0) * 0.02;
  t0 -= pad; t1 += pad;
  const alt = page.replay ? page.replay.response.steps || [] : [];
  let ymax = Math.max(1, ...log.map((d) => Math.max(num(d.desiredReplicas), num((d.explanation || {}).currentReplicas))), ...alt.map((s) => num(s.decision.desiredReplicas)));
  ymax = Math.ceil((ymax * 1.15) / 4) * 4;
  const X = (t) => M.l + ((t - t0) / (t1 - t0)) * (W - M.l - M.r);
  const Y = (v) => M.t + (1 - v / ymax) * (H - M.t - M.b);
  const parts = [];
  // Shading: from each limited decision to the next one.
  log.forEach((d, i) => {
    const lim = limitOf(d);
    if (!lim || lim.kind === "MinFromZero") return;
    const xa = X(times[i]), xb = i + 1 < log.length ? X(times[i + 1]) : xa + 6;
    const cls = lim.kind === "Stabilized" ? "stabilized" : "limited";
    parts.push(`<rect class="${cls}" x="${xa.toFixed(1)}" y="${M.t}" width="${Math.max(2, xb - xa).toFixed(1)}" height="${H - M.t - M.b}"><title>${esc(fmtTime(d.decisionTime))}: ${esc(lim.reason || lim.kind)} (${num(lim.from)} → ${num(lim.to)})</title></rect>`);
  });
  parts.push(axes(W, H, M, t0, t1, ymax, X, Y, "replicas"));
  // Replicas (step curve of the count each decision started from) and desired.
  const step = (pts) => pts.map((p, i) => (i ? `H${p[0].toFixed(1)}V${p[1].toFixed(1)}` : `M${p[0].toFixed(1)},${p[1].toFixed(1)}`)).join("");
  parts.push(`<path class="replicas" d="${step(log.map((d, i) => [X(times[i]), Y(num((d.explanation || {}).currentReplicas))]))}"/>`);
  parts.push(`<path class="desired" d="${step(log.map((d, i) => [X(times[i]), Y(num(d.desiredReplicas))]))}"/>`);
  if (alt.length) {
    parts.push(`<path class="alt" d="${step(alt.map((s) => [X(new Date(s.time).getTime()), Y(num(s.decision.desiredReplicas))]))}"/>`);
    alt.forEach((s) => parts.push(`<circle class="alt-point" r="2.2" cx="${X(new Date(s.time).getTime()).toFixed(1)}" cy="${Y(num(s.decision.desiredReplicas)).toFixed(1)}" data-time="${esc(s.time)}" data-desired="${num(s.decision.desiredReplicas)}"/>`));
  }
  log.forEach((d, i) => {
    const x = X(times[i]), y = Y(num(d.desiredReplicas));
    parts.push(`<circle class="decision-point" r="2.6" cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" data-time="${esc(d.decisionTime)}" data-desired="${num(d.desiredReplicas)}"><title>${esc(fmtTime(d.decisionTime))}: ${esc(explain(d, spec))}</title></circle>`);
    if (d.rescale) parts.push(`<path class="rescale-marker" data-time="${esc(d.decisionTime)}" d="M${x.toFixed(1)},${(y - 13).toFixed(1)} l-5,-8 h10 z"><title>rescale to ${num(d.desiredReplicas)}</title></path>`);
  });
  let html = `<svg class="chart replicas-chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="replicas over time">${parts.join("")}</svg>`;
  // One small chart per metric: current against target.
  (spec.metrics || []).forEach((m, j) => {
    const pts = log.map((d, i) => { const e = ((d.explanation || {}).metrics || [])[j]; return e && e.outcome !== "Failed" ? [times[i], plotValue(m, e.current), plotValue(m, e.target)] : null; });
    const ok = pts.filter(Boolean);
    if (!ok.length) return;
    const h = 130;
    const vmax = niceCeil(Math.max(...ok.map((p) => Math.max(p[1], p[2]))) * 1.15);
    const Ym = (v) => M.t + (1 - v / vmax) * (h - M.t - M.b);
    const seg = [];
    let pen = false;
    pts.forEach((p) => { if (!p) { pen = false; return; } seg.push(`${pen ? "L" : "M"}${X(p[0]).toFixed(1)},${Ym(p[1]).toFixed(1)}`); pen = true; });
    const tgt = ok.map((p, i) => `${i ? "H" + X(p[0]).toFixed(1) + "V" : "M" + X(p[0]).toFixed(1) + ","}${Ym(p[2]).toFixed(1)}`).join("");
    html += `<div class="legend"><span><i class="sw-metric"></i>${esc(metricName(m))} (${esc(unitOf(m))})</span><span><i class="sw-target"></i>target</span></div>
      <svg class="chart metric-chart" viewBox="0 0 ${W} ${h}" width="${W}" height="${h}">${axes(W, h, M, t0, t1, vmax, X, Ym, "")}<path class="target" fill="none" d="${tgt}"/><path class="metric" d="${seg.join("")}"/></svg>`;
  });
  el.innerHTML = html;
}

// niceCeil rounds v up to 1, 2, 2.5, 5 or 10 times a power of ten.
function niceCeil(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((x) => x >= v);
}

function axes(W, H, M, t0, t1, ymax, X, Y, label) {
  const out = [`<g class="axis">`];
  const ticks = 4;
  for (let i = 0; i <= ticks; i++) {
    const v = (ymax * i) / ticks;
    const y = Y(v);
    out.push(`<line class="gridline" x1="${M.l}" x2="${W - M.r}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}"/>`);
    out.push(`<text x="${M.l - 6}" y="${(y + 4).toFixed(1)}" text-anchor="end">${Number.isInteger(v) ? v : v.toFixed(v < 10 ? 1 : 0)}</text>`);
  }
  const span = t1 - t0;
  const steps = [15e3, 30e3, 60e3, 120e3, 300e3, 600e3, 900e3, 1800e3, 3600e3, 7200e3, 10800e3];
  const stepMs = steps.find((s) => span / s <= 8) || 21600e3;
  for (let t = Math.ceil(t0 / stepMs) * stepMs; t <= t1; t += stepMs) {
    const x = X(t);
    out.push(`<line x1="${x.toFixed(1)}" x2="${x.toFixed(1)}" y1="${H - M.b}" y2="${H - M.b + 4}"/>`);
    out.push(`<text x="${x.toFixed(1)}" y="${H - 8}" text-anchor="middle">${fmtTime(new Date(t).toISOString(), stepMs < 60e3)}</text>`);
  }
  if (label) out.push(`<text x="12" y="${M.t + 8}" transform="rotate(-90 12 ${M.t + 8})" text-anchor="end">${label}</text>`);
  out.push(`</g>`);
  return out.join("");
}

// ---------- what-if replay ----------

function renderWhatIf(page) {
  const spec = page.target.spec || {};
  const b = spec.behavior || {};
  const fields = (spec.metrics || []).map((m, i) => {
    const t = metricTarget(m);
    const v = t.type === "Utilization" ? t.averageUtilization : t.type === "AverageValue" ? t.averageValue : t.value;
    return `<label class="field">${esc(metricName(m))} target (${esc(t.type)}${t.type === "Utilization" ? ", %" : ""}) <input name="metric-${i}" value="${esc(v)}"></label>`;
  }).join("");
  $("#whatif").innerHTML = `
    <p class="muted">Change the behavior or the metric targets and replay the logged timeline through the engine (Simulate). Nothing is stored.</p>
    <form id="replay">
      <div class="row">
        <label class="field">Min replicas <input name="min" type="number" min="0" value="${num(spec.minReplicas ?? 1)}"></label>
        <label class="field">Max replicas <input name="max" type="number" min="1" value="${num(spec.maxReplicas)}"></label>
      </div>
      <div class="row">
        <label class="field">Scale-up window (s) <input name="upWindow" type="number" min="0" max="3600" value="${num((b.scaleUp || {}).stabilizationWindowSeconds)}"></label>
        <label class="field">Scale-down window (s) <input name="downWindow" type="number" min="0" max="3600" value="${num((b.scaleDown || {}).stabilizationWindowSeconds)}"></label>
      </div>
      <div class="row">${fields}</div>
      <fieldset class="ahead">
        <legend>Ahead of the load: add a schedule window, a fallback or a forecast (the spec has ${(spec.schedules || []).length} window${(spec.schedules || []).length === 1 ? "" : "s"}, ${spec.fallback ? "a" : "no"} fallback and ${spec.forecast ? "a" : "no"} forecast)</legend>
        <div class="row">
          <label class="field">Window opens (cron: minute hour day month weekday) <input name="schedStart" placeholder="0 8 * * 1-5"></label>
          <label class="field">Time zone (IANA) <input name="schedZone" value="UTC"></label>
        </div>
        <div class="row">
          <label class="field">Open for (minutes) <input name="schedMinutes" type="number" min="1" max="11520" value="60"></label>
          <label class="field">Floor while open (replicas) <input name="schedMin" type="number" min="0" value="${num(spec.maxReplicas)}"></label>
        </div>
        <div class="row">
          <label class="field">Fallback <select name="fbBehavior">
            <option value="">${spec.fallback ? "as in the spec" : "none"}</option>
            <option value="static">static: propose the replicas below</option>
            <option value="currentReplicas">currentReplicas: stay</option>
            <option value="currentReplicasIfHigher">currentReplicasIfHigher</option>
            <option value="currentReplicasIfLower">currentReplicasIfLower</option>
          </select></label>
          <label class="field">after metrics fail for (s) <input name="fbAfter" type="number" min="0" value="0"></label>
        </div>
        <div class="row">
          <label class="field">Fallback replicas <input name="fbReplicas" type="number" min="0" value="${num(spec.maxReplicas)}"></label>
        </div>
        <div class="row">
          <label class="field">Forecast lead time (s; empty: ${spec.forecast ? "as in the spec" : "no forecast"}) <input name="fcLead" type="number" min="1" max="86399"></label>
          <label class="field">Forecast's max backtest error (%) <input name="fcMaxError" type="number" min="1" max="100" value="15"></label>
        </div>
      </fieldset>
      <button class="primary" type="submit" id="run-replay">Replay ${page.log.length} decisions</button>
      <button class="ghost" type="button" id="clear-replay">Clear</button>
    </form>
    <div id="replay-out"></div>
    <h2 class="spaced">Limits of a replay</h2>
    <ul class="limits">${(state.session.replayLimits || []).map((l) => `<li>${esc(l)}</li>`).join("")}</ul>`;
  $("#clear-replay").onclick = () => { page.replay = null; $("#replay-out").innerHTML = ""; renderChart(page); };
  $("#replay").onsubmit = async (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    const alt = JSON.parse(JSON.stringify(spec));
    alt.minReplicas = Number(f.get("min"));
    alt.maxReplicas = Number(f.get("max"));
    alt.behavior = alt.behavior || {};
    alt.behavior.scaleUp = { ...(alt.behavior.scaleUp || {}), stabilizationWindowSeconds: Number(f.get("upWindow")) };
    alt.behavior.scaleDown = { ...(alt.behavior.scaleDown || {}), stabilizationWindowSeconds: Number(f.get("downWindow")) };
    (alt.metrics || []).forEach((m, i) => {
      const t = metricTarget(m), v = String(f.get("metric-" + i)).trim();
      if (t.type === "Utilization") t.averageUtilization = Number(v);
      else if (t.type === "AverageValue") t.averageValue = v;
      else t.value = v;
    });
    // A schedule window and a fallback join the spec as Simulate takes them
    // (spec.schedules, spec.fallback): the server checks them and names a
    // bad field.
    const start = String(f.get("schedStart") || "").trim();
    if (start) {
      const names = new Set((alt.schedules || []).map((w) => w.name));
      let name = "what-if";
      for (let i = 2; names.has(name); i++) name = `what-if-${i}`;
      alt.schedules = [...(alt.schedules || []), {
        name, start, timeZone: String(f.get("schedZone") || "UTC").trim(),
        duration: `${Math.round(Number(f.get("schedMinutes")) * 60)}s`, minReplicas: Number(f.get("schedMin")),
      }];
    }
    const fb = String(f.get("fbBehavior") || "");
    if (fb) alt.fallback = { behavior: fb, failureDuration: `${Math.round(Number(f.get("fbAfter")))}s`, replicas: Number(f.get("fbReplicas")) };
    // A forecast joins as spec.forecast: the replay keeps each metric's
    // history from the first replayed decision on, so it stays silent
    // until the replayed span holds two periods (the steps' notes say so).
    const lead = String(f.get("fcLead") || "").trim();
    if (lead) alt.forecast = { leadTime: `${Math.round(Number(lead))}s`, maxError: Number(f.get("fcMaxError")) / 100 };
    const btn = $("#run-replay");
    btn.disabled = true;
    try {
      page.replay = await api("replay", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(replayBody(page, alt)) });
      renderChart(page);
      renderDiffs(page);
    } catch (e) {
      if (e.status === 401) return fail(e);
      $("#replay-out").innerHTML = `<p class="error" id="replay-error">${esc(e.message)}</p>`;
    } finally {
      btn.disabled = false;
    }
  };
}

// replayBody asks to replay the decisions the page shows with spec.
function replayBody(page, spec) {
  const body = { target: page.key, spec };
  if (page.log.length) {
    body.startTime = page.log[0].decisionTime;
    body.endTime = new Date(new Date(page.log[page.log.length - 1].decisionTime).getTime() + 1).toISOString();
  }
  return body;
}

// renderDiffs says what the replay would have changed — when it first
// reached the logged peak, the replica-minutes it adds or saves — and
// lists the stretches where it decided differently.
function renderDiffs(page) {
  const steps = page.replay.response.steps || [];
  const real = new Map(page.log.map((d) => [new Date(d.decisionTime).getTime(), num(d.desiredReplicas)]));
  const runs = [];
  for (const s of steps) {
    const t = new Date(s.time).getTime(), a = num(s.decision.desiredReplicas), r = real.get(t);
    if (r === undefined || r === a) continue;
    const last = runs[runs.length - 1];
    if (last && last.alt === a && last.real === r && last.next === t) { last.to = s.time; }
    else runs.push({ from: s.time, to: s.time, alt: a, real: r });
    const idx = steps.indexOf(s);
    runs[runs.length - 1].next = idx + 1 < steps.length ? new Date(steps[idx + 1].time).getTime() : -1;
  }
  const total = steps.filter((s) => real.get(new Date(s.time).getTime()) !== num(s.decision.desiredReplicas)).length;
  const items = runs.slice(0, 40).map((r) =>
    `<li>${esc(fmtTime(r.from))}${r.to !== r.from ? "–" + esc(fmtTime(r.to)) : ""}: <b>${r.alt}</b> replicas instead of ${r.real} (${r.alt > r.real ? "+" : ""}${r.alt - r.real})</li>`).join("");
  const changed = total ? whatChanged(page.log, steps) : "";
  $("#replay-out").innerHTML = `<h2 class="spaced">Differences</h2>
    <p id="replay-summary">${total ? `${total} of ${steps.length} decisions differ.` : `The replay decides as the target did at every one of ${steps.length} decisions.`}</p>
    ${changed ? `<p id="replay-changed">${esc(changed)}</p>` : ""}
    ${forecastSaid(steps)}
    <ul class="diffs">${items}</ul>${runs.length > 40 ? `<p class="muted">… and ${runs.length - 40} more stretches.</p>` : ""}`;
}

// whatChanged sums up a replay against the log in words: when the replay
// first reached the highest count the log reached (earlier, later, never),
// and the replica-minutes it adds or saves (each decision's count held
// until the next decision).
function whatChanged(log, steps) {
  const at = (iso) => new Date(iso).getTime();
  const peak = Math.max(...log.map((d) => num(d.desiredReplicas)));
  const logged = log.find((d) => num(d.desiredReplicas) >= peak);
  const replayed = steps.find((s) => num(s.decision.desiredReplicas) >= peak);
  const words = [];
  if (!replayed) words.push(`never reached ${peak} replicas (the log did at ${fmtTime(logged.decisionTime)})`);
  else {
    const d = at(logged.decisionTime) - at(replayed.time);
    words.push(d === 0 ? `reached ${peak} replicas at the same time` : `reached ${peak} replicas ${span(Math.abs(d))} ${d > 0 ? "earlier" : "later"}`);
  }
  const real = new Map(log.map((d) => [at(d.decisionTime), num(d.desiredReplicas)]));
  let extra = 0;
  steps.forEach((s, i) => {
    const r = real.get(at(s.time));
    if (r === undefined || i + 1 >= steps.length) return;
    extra += (num(s.decision.desiredReplicas) - r) * (at(steps[i + 1].time) - at(s.time)) / 60000;
  });
  const rm = Math.round(extra * 10) / 10;
  words.push(rm === 0 ? "the same replica-minutes" : `${rm > 0 ? "+" : ""}${rm} replica-minutes`);
  return "The replay " + words.join("; ") + ".";
}

// forecastSaid says what a replayed forecast did: how many decisions it
// raised (a ForecastAhead step), and, when it was silent, at how many
// decisions and why the last one was (the step's notes); "" when the
// replay had no forecast.
function forecastSaid(steps) {
  const raised = steps.filter((s) => ((s.decision.explanation || {}).steps || []).some((x) => x.reason === "ForecastAhead")).length;
  const silent = steps.filter((s) => (s.notes || []).length);
  if (!raised && !silent.length) return "";
  const words = [`The forecast raised ${raised} of ${steps.length} decisions`];
  if (silent.length) words.push(`it proposed nothing at ${silent.length}; at the last of them: ${silent[silent.length - 1].notes.join("; ")}`);
  return `<p id="replay-forecast">${esc(words.join("; ") + ".")}</p>`;
}

// span says a duration in ms in minutes and seconds.
function span(ms) {
  const s = Math.round(ms / 1000), m = Math.floor(s / 60);
  return m ? (s % 60 ? `${m} min ${s % 60} s` : `${m} min`) : `${s} s`;
}

start();
