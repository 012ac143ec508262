// The gitlease board: polls /api/board twice a second (304 while nothing changed) and
// draws the claims table and the timeline. Records can be forged: every text from a record
// reaches the page through textContent only, never as markup.
"use strict";
(function () {
  const POLL_MS = 500;
  const SOON_MS = 60000;
  const WINDOW_MS = 6 * 3600 * 1000;
  const SVG = "http://www.w3.org/2000/svg";
  let doc = null;
  let etag = null;
  let offset = 0; // server clock minus this browser's clock, in ms
  let lastTimeline = 0;

  const $ = (id) => document.getElementById(id);
  const serverNow = () => Date.now() + offset;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function svg(tag, attrs, parent) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (parent) parent.appendChild(e);
    return e;
  }

  function duration(ms) {
    let s = Math.max(0, Math.floor(ms / 1000));
    const d = Math.floor(s / 86400); s -= d * 86400;
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    if (d) return `${d}d ${h}h`;
    if (h) return `${h}h ${m}m`;
    if (m) return `${m}m ${s}s`;
    return `${s}s`;
  }

  // When a claim's expiry falls on the server's clock: its expires_in was measured when
  // the document was built (now_ms), on the clock that decides expiry.
  function deadline(c) {
    if (c.expires_in === null || c.expires_in === undefined) return null;
    return doc.now_ms + c.expires_in * 1000;
  }

  function timeText(c) {
    const due = deadline(c);
    if (c.state === "released") return "released " + (c.released_at || "");
    if (c.state === "invalid") return c.problem || "invalid record";
    if (due === null) return "";
    const left = due - serverNow();
    if (c.state === "active") return left > 0 ? "expires in " + duration(left) : "expiring now";
    return "expired " + duration(-left) + " ago";
  }

  // A claim's scopes (its record's paths, where it names them), whatever shape they come in.
  function pathsText(c) {
    if (Array.isArray(c.paths)) return c.paths.map(String).join(", ");
    return c.paths === undefined || c.paths === null ? "" : String(c.paths);
  }

  function matches(c, info, words) {
    if (!words.length) return true;
    const hay = [c.resource, c.owner, c.state, c.note, c.mode, c.checkpoint, c.claim_id,
      pathsText(c), info.worktree].join(" ").toLowerCase();
    return words.every((w) => hay.includes(w));
  }

  function shown() {
    const words = $("filter").value.toLowerCase().split(/\s+/).filter(Boolean);
    const released = $("show-released").checked;
    const rank = { active: 0, expired: 1, invalid: 2, released: 3, free: 4 };
    return doc.claims
      .filter((c) => (released || c.state !== "released") && matches(c, doc.extra[c.ref] || {}, words))
      .sort((a, b) => (rank[a.state] ?? 9) - (rank[b.state] ?? 9) ||
        a.resource.localeCompare(b.resource, undefined, { numeric: true }));
  }

  function renderSummary() {
    const s = doc.summary;
    let soon = 0;
    for (const c of doc.claims) {
      const due = deadline(c);
      if (c.state === "active" && due !== null && due - serverNow() <= SOON_MS) soon++;
    }
    const box = $("summary");
    box.replaceChildren();
    for (const [label, n, id] of [["active", s.active, "sum-active"],
      ["expiring soon", soon, "sum-soon"], ["expired, not yet taken", s.expired, "sum-expired"],
      ["released", s.released, "sum-released"], ["invalid", s.invalid, "sum-invalid"]]) {
      const card = el("div", "card");
      card.id = id;
      card.appendChild(el("b", null, n));
      card.appendChild(el("span", null, label));
      box.appendChild(card);
    }
  }

  function renderRows(list) {
    const body = $("rows");
    const rows = [];
    for (const c of list) {
      const info = doc.extra[c.ref] || {};
      const tr = el("tr", "state-" + c.state);
      tr.dataset.resource = c.resource;
      tr.appendChild(el("td", "resource", c.resource));
      tr.appendChild(el("td", "owner", c.owner || ""));
      tr.appendChild(el("td", "state", c.state));
      const t = el("td", "time", timeText(c));
      t.dataset.ref = c.ref;
      tr.appendChild(t);
      tr.appendChild(el("td", "mode", c.mode || ""));
      tr.appendChild(el("td", "paths", pathsText(c)));
      tr.appendChild(el("td", "worktree", info.worktree || ""));
      const k = info.keeper;
      const kt = el("td", "keeper" + (k && !k.alive ? " dead" : ""),
        k ? "pid " + k.pid + (k.alive ? " (running)" : " (dead)") : "");
      tr.appendChild(kt);
      tr.appendChild(el("td", "waiters", info.waiters ? info.waiters : ""));
      tr.appendChild(el("td", "checkpoint", c.checkpoint || ""));
      tr.appendChild(el("td", "note", c.note || ""));
      rows.push(tr);
    }
    body.replaceChildren(...rows);
    $("empty").hidden = list.length > 0;
  }

  function tick() {
    if (!doc) return;
    const byRef = new Map(doc.claims.map((c) => [c.ref, c]));
    for (const td of document.querySelectorAll("td.time")) {
      const c = byRef.get(td.dataset.ref);
      if (!c) continue;
      const text = timeText(c);
      if (td.textContent !== text) td.textContent = text;
      const due = deadline(c);
      td.parentNode.classList.toggle("soon",
        c.state === "active" && due !== null && due - serverNow() <= SOON_MS);
    }
    renderSummary();
    if (serverNow() - lastTimeline > 5000) renderTimeline(shown());
  }

  // A record's time (RFC 3339 text) in ms, or null (a forged record may hold anything).
  function ms(text) {
    const t = typeof text === "string" ? Date.parse(text) : NaN;
    return Number.isFinite(t) ? t : null;
  }

  function colour(id) {
    let h = 0;
    for (const ch of String(id)) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
    return `hsl(${h % 360} 65% 55%)`;
  }

  function eventsOf(c) {
    const line = doc.timelines[c.ref] || { events: [] };
    return line.events.map((e) => ({ ...e, at_ms: ms(e.at), expires_ms: ms(e.expires_at) }));
  }

  function renderTimeline(list) {
    lastTimeline = serverNow();
    const box = $("timeline");
    const now = serverNow();
    const rows = list.map((c) => [c, eventsOf(c)]).filter(([, events]) => events.length);
    let start = now - 60000;
    for (const [, events] of rows) {
      for (const e of events) {
        if (e.at_ms !== null && e.at_ms < start) start = e.at_ms;
      }
    }
    const label = 180, width = 1000, rowH = 22, top = 24;
    start = Math.max(start, now - WINDOW_MS); // recent history: the last hours at most
    const span = Math.max(1, now - start);
    const x = (t) => label + ((Math.min(Math.max(t, start), now) - start) / span) * (width - label - 10);
    const height = top + rows.length * rowH + 8;
    const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "timeline of each resource" });
    svg("text", { x: label, y: 14, class: "axis" }, root).textContent = "-" + duration(now - start);
    const nowText = svg("text", { x: width - 10, y: 14, class: "axis", "text-anchor": "end" }, root);
    nowText.textContent = "now";
    svg("line", { x1: x(now), x2: x(now), y1: 18, y2: height, class: "now" }, root);
    rows.forEach(([c, events], i) => {
      const y = top + i * rowH;
      const g = svg("g", { class: "row" }, root);
      g.dataset.resource = c.resource;
      const name = svg("text", { x: 0, y: y + 14 }, g);
      name.textContent = c.resource.length > 26 ? c.resource.slice(0, 25) + "…" : c.resource;
      svg("title", {}, name).textContent = c.resource;
      svg("line", { x1: label, x2: width - 10, y1: y + rowH - 2, y2: y + rowH - 2, class: "grid" }, g);
      events.forEach((e, j) => {
        if (e.at_ms === null) return;
        const next = j + 1 < events.length ? events[j + 1].at_ms : now;
        const end = next === null ? now : next;
        const tip = `${e.kind} rev ${e.revision} by ${e.owner}` +
          (e.checkpoint ? ` checkpoint ${e.checkpoint}` : "");
        if (e.kind === "released") {
          const m = svg("rect", { x: x(e.at_ms) - 4, y: y + 5, width: 8, height: 8, class: "release" }, g);
          svg("title", {}, m).textContent = tip;
          return;
        }
        const held = e.expires_ms === null ? end : Math.min(e.expires_ms, end);
        const seg = svg("rect", { x: x(e.at_ms), y: y + 3, width: Math.max(1, x(held) - x(e.at_ms)),
          height: 12, rx: 2, fill: colour(e.claim_id), class: "seg held" }, g);
        svg("title", {}, seg).textContent = tip;
        if (e.expires_ms !== null && e.expires_ms < end) {
          const ex = svg("rect", { x: x(e.expires_ms), y: y + 3, width: Math.max(1, x(end) - x(e.expires_ms)),
            height: 12, class: "seg expired" }, g);
          svg("title", {}, ex).textContent = `expired (claim ${e.claim_id} by ${e.owner})`;
        }
        if (e.kind === "renewed") {
          const m = svg("line", { x1: x(e.at_ms), x2: x(e.at_ms), y1: y + 1, y2: y + 17, class: "renew" }, g);
          svg("title", {}, m).textContent = tip;
        } else if (e.kind === "taken over") {
          const px = x(e.at_ms);
          const m = svg("polygon", { points: `${px - 5},${y + 17} ${px + 5},${y + 17} ${px},${y + 8}`, class: "takeover" }, g);
          svg("title", {}, m).textContent = tip;
        }
      });
    });
    box.replaceChildren(root);
  }

  function render() {
    $("store").textContent = doc.remote ? `${doc.store} (mirror of ${doc.remote})` : doc.store;
    const list = shown();
    renderRows(list);
    renderSummary();
    renderTimeline(list);
    const status = $("status");
    status.className = "status" + (doc.fetch_error ? " bad" : "");
    status.textContent = doc.fetch_error ? "remote unreachable: " + doc.fetch_error : "live";
  }

  async function poll() {
    try {
      const headers = etag ? { "If-None-Match": etag } : {};
      const r = await fetch("/api/board", { headers, cache: "no-store" });
      const now = Number(r.headers.get("X-Board-Now"));
      if (now) offset = now - Date.now();
      if (r.status === 200) {
        doc = await r.json();
        etag = r.headers.get("ETag");
        render();
      } else if (r.status !== 304) {
        const status = $("status");
        status.className = "status bad";
        status.textContent = "the store cannot be read (HTTP " + r.status + ")";
      }
    } catch (err) {
      const status = $("status");
      status.className = "status bad";
      status.textContent = "the board's server is not answering";
    }
    setTimeout(poll, POLL_MS);
  }

  for (const kind of ["input", "change", "search"]) {
    $("filter").addEventListener(kind, () => doc && render());
  }
  $("show-released").addEventListener("change", () => doc && render());
  setInterval(tick, 250);
  poll();
})();
