/**
 * The console's shell script (browser JavaScript as text; ConsoleRoutes.ts serves it with the timeline and the
 * Files hook as one file): login, the operator API client, hash routing, and the Devices, Sessions and Turns
 * views. Rules: every peer- or operator-provided string reaches the page through `textContent` (the `el`
 * helper's `text`), never `innerHTML`; links are built from `encodeURIComponent`ed ids only; the token lives
 * in `sessionStorage` and travels only in the `Authorization` header.
 */

export const ConsoleScript = String.raw`
var AW = {};
var TOKEN_KEY = "agentwire.operator_token";
var API = "/api/v1/operator";
var MAX_TEXT = 500;

AW.views = {};
AW.leave = [];

AW.token = function () {
  try { return window.sessionStorage.getItem(TOKEN_KEY); } catch (e) { return null; }
};

/** Bounded display text: never more than MAX_TEXT characters of anything. */
AW.clip = function (value, max) {
  var s = value === null || value === undefined ? "" : String(value);
  var n = max || MAX_TEXT;
  return s.length > n ? s.slice(0, n) + "\u2026" : s;
};

/** Creates an element; "text" sets textContent, "on" adds listeners, "class" the class name. */
AW.el = function (tag, attrs, children) {
  var node = document.createElement(tag);
  var a = attrs || {};
  Object.keys(a).forEach(function (k) {
    var v = a[k];
    if (k === "text") node.textContent = AW.clip(v, 100000);
    else if (k === "class") node.className = v;
    else if (k === "on") Object.keys(v).forEach(function (ev) { node.addEventListener(ev, v[ev]); });
    else if (v !== undefined && v !== null && v !== false) node.setAttribute(k, v === true ? "" : String(v));
  });
  (children || []).forEach(function (c) {
    if (c === null || c === undefined) return;
    node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
  });
  return node;
};
var el = AW.el;

AW.badge = function (value) {
  var safe = /^[a-z_]{1,40}$/.test(String(value)) ? String(value) : "other";
  return el("span", { class: "badge " + safe, text: value });
};

AW.time = function (ms) {
  if (typeof ms !== "number") return "";
  return new Date(ms).toISOString().replace("T", " ").slice(0, 19);
};

AW.status = function (text) { document.getElementById("status").textContent = AW.clip(text, 300); };

/** A safe in-console link: "#/" + encoded path segments. */
AW.link = function (text, segments) {
  return el("a", { href: "#/" + segments.map(encodeURIComponent).join("/"), text: text });
};

AW.ApiError = function (status, code, detail) {
  this.status = status;
  this.code = code;
  this.message = AW.clip(code + (detail ? ": " + detail : ""), 300);
};

/** One operator API call; resolves with the parsed JSON body, rejects with an AW.ApiError. */
AW.api = function (method, path, body) {
  var headers = { "Authorization": "Bearer " + AW.token(), "Accept": "application/json" };
  var init = { method: method, headers: headers, cache: "no-store", credentials: "omit", redirect: "error" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  return fetch(API + path, init).then(function (res) {
    return res.text().then(function (text) {
      var parsed = null;
      try { parsed = text ? JSON.parse(text) : null; } catch (e) { parsed = null; }
      if (res.status === 401) {
        AW.logout("The operator token was refused (401).");
        throw new AW.ApiError(401, "unauthorized", "");
      }
      if (!res.ok) {
        throw new AW.ApiError(res.status, parsed && parsed.error ? String(parsed.error) : "http_" + res.status,
          parsed && parsed.detail ? String(parsed.detail) : "");
      }
      return parsed;
    });
  });
};

AW.fail = function (where) {
  return function (error) {
    if (error && error.status === 401) return;
    AW.status(where + ": " + (error && error.message ? error.message : "no answer from the operator API"));
  };
};

AW.showLogin = function (message) {
  document.getElementById("nav").hidden = true;
  document.getElementById("view").hidden = true;
  document.getElementById("login").hidden = false;
  document.getElementById("login-error").textContent = message || "";
  document.getElementById("token").focus();
};

// A paged listing (devices, sessions: docs/operator-api.md "Listings"), every page in turn up to maxPages;
// resolves with { <key>: all items, more: whether pages were left }.
AW.apiAll = function (path, key, maxPages) {
  var items = [];
  var pages = 0;
  var next = function (cursor) {
    return AW.api("GET", path + "?limit=200" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : "")).then(function (page) {
      items = items.concat(page[key]);
      pages++;
      if (page.next_cursor && pages < (maxPages || 25)) return next(page.next_cursor);
      var out = { more: Boolean(page.next_cursor) };
      out[key] = items;
      return out;
    });
  };
  return next(null);
};

AW.logout = function (message) {
  try { window.sessionStorage.removeItem(TOKEN_KEY); } catch (e) { /* private mode */ }
  AW.runLeave();
  AW.showLogin(message);
};

AW.login = function (token) {
  try { window.sessionStorage.setItem(TOKEN_KEY, token); } catch (e) { /* private mode: kept nowhere */ }
  return AW.api("GET", "/devices?limit=1").then(function () {
    document.getElementById("token").value = "";
    AW.route();
  }, function (error) {
    if (error && error.status !== 401) AW.showLogin(error.message);
  });
};

AW.runLeave = function () {
  var all = AW.leave;
  AW.leave = [];
  all.forEach(function (f) { try { f(); } catch (e) { /* ignore */ } });
};

/** Registers a function run when the current view is left (stops polling and streams). */
AW.onLeave = function (f) { AW.leave.push(f); };

/**
 * For a view that renders after an answer arrives: a check that it is still the view shown. A route since (a
 * hash change, a login, a reload's first route) makes it false, so a late answer never adds a second copy of a
 * view into the page.
 */
AW.live = function () {
  var shown = true;
  AW.onLeave(function () { shown = false; });
  return function () { return shown; };
};

/** Polls while the view is shown. */
AW.poll = function (f, ms) {
  var timer = window.setInterval(f, ms);
  AW.onLeave(function () { window.clearInterval(timer); });
};

AW.route = function () {
  AW.runLeave();
  if (!AW.token()) return AW.showLogin("");
  var parts = (window.location.hash || "#/devices").replace(/^#\/?/, "").split("/").map(function (p) {
    try { return decodeURIComponent(p); } catch (e) { return ""; }
  });
  var name = parts[0] || "devices";
  document.getElementById("login").hidden = true;
  document.getElementById("nav").hidden = false;
  var view = document.getElementById("view");
  view.hidden = false;
  view.replaceChildren();
  Array.prototype.forEach.call(document.querySelectorAll("nav a"), function (a) {
    a.classList.toggle("active", a.getAttribute("data-view") === name);
  });
  AW.status("");
  if (name === "turns" && parts[1]) return AW.views.turn(view, parts[1]);
  if (name === "devices" && parts[1] && parts[2] === "files") return AW.views.files(view, parts[1]);
  var render = AW.views[name] || AW.views.devices;
  render(view);
};

// ------------------------------------------------------------------------------------------- devices

/** The capability names a declaration supports. */
AW.supported = function (caps) {
  if (!caps || typeof caps !== "object") return [];
  return Object.keys(caps).filter(function (k) { return caps[k] === true; });
};

AW.deviceRow = function (d) {
  var decl = d.declaration;
  var state = d.revoked ? "revoked" : d.online ? "online" : "offline";
  var kinds = el("div", {}, (decl ? decl.kinds : []).map(function (k) {
    var caps = AW.supported(k.capabilities);
    return el("div", { class: "kind" }, [
      el("strong", { text: k.kind }), " ", AW.badge(k.available ? "available" : "unavailable"),
      k.version ? el("span", { class: "muted", text: " " + k.version }) : null,
      el("div", { class: "caps", text: k.capabilities === null ? "capabilities unknown" : caps.join(", ") })
    ]);
  }));
  var actions = el("td");
  if (AW.files.declared(d)) actions.appendChild(AW.link("Files", ["devices", d.device_id, "files"]));
  return el("tr", { "data-device": /^[\w.:-]{1,128}$/.test(d.device_id) ? d.device_id : null }, [
    el("td", { class: "mono", text: d.device_id }),
    el("td", {}, [AW.badge(state), d.connection_number !== null && d.online
      ? el("div", { class: "muted", text: "connection #" + d.connection_number }) : null]),
    el("td", { text: decl ? (decl.daemon_version || "") + (decl.source === "stored" ? " (last seen)" : "") : "not declared yet" }),
    el("td", {}, [kinds]),
    el("td", { text: decl ? String(decl.active_requests) : "" }),
    actions
  ]);
};

AW.views.devices = function (view) {
  var body = el("tbody");
  view.append(el("h2", { text: "Devices" }), el("table", { id: "devices" }, [
    el("thead", {}, [el("tr", {}, ["Device", "Connection", "Daemon", "Declared kinds", "Active", ""].map(function (h) {
      return el("th", { text: h });
    }))]), body
  ]));
  var load = function () {
    AW.apiAll("/devices", "devices").then(function (answer) {
      body.replaceChildren.apply(body, answer.devices.map(AW.deviceRow));
      if (answer.devices.length === 0) body.appendChild(el("tr", {}, [el("td", { colspan: "6", class: "muted", text: "No devices yet: create a credential and start a daemon." })]));
      AW.status("devices refreshed " + AW.time(Date.now()));
    }, AW.fail("devices"));
  };
  load();
  AW.poll(load, 2000);
};

// ------------------------------------------------------------------------------------------- sessions

AW.textInput = function (text) { return [{ content: [{ type: "input_text", text: text }] }]; };

AW.views.sessions = function (view) {
  var body = el("tbody");
  var kind = el("input", { type: "text", name: "agent_kind", value: "scripted", "aria-label": "agent kind" });
  var device = el("input", { type: "text", name: "device_id", placeholder: "device (optional)", "aria-label": "device" });
  var create = el("form", { class: "inline", id: "create-session" }, [
    el("label", { text: "Agent kind" }), kind, device, el("button", { type: "submit", text: "Create Session" })
  ]);
  create.addEventListener("submit", function (event) {
    event.preventDefault();
    var request = { agent_kind: kind.value.trim() };
    if (device.value.trim() !== "") request.device_id = device.value.trim();
    AW.api("POST", "/sessions", request).then(function (s) {
      AW.status("session " + s.session_id + " created");
      load();
    }, AW.fail("create session"));
  });
  view.append(el("h2", { text: "Sessions" }), create, el("table", { id: "sessions" }, [
    el("thead", {}, [el("tr", {}, ["Session", "Kind", "Device", "Created", "Start a Turn"].map(function (h) {
      return el("th", { text: h });
    }))]), body
  ]));
  var row = function (s) {
    var input = el("input", { type: "text", name: "text", placeholder: "input text", "aria-label": "turn input" });
    var start = el("form", { class: "inline start-turn" }, [input, el("button", { type: "submit", text: "Start Turn" })]);
    start.addEventListener("submit", function (event) {
      event.preventDefault();
      if (input.value === "") return;
      AW.api("POST", "/sessions/" + encodeURIComponent(s.session_id) + "/turns", { input: AW.textInput(input.value) }).then(function (turn) {
        window.location.hash = "#/turns/" + encodeURIComponent(turn.turn_id);
      }, AW.fail("start turn"));
    });
    return el("tr", {}, [
      el("td", { class: "mono", text: s.session_id }),
      el("td", { text: s.agent_kind }),
      el("td", { class: "mono", text: s.device_id || "any" }),
      el("td", { text: AW.time(s.created_at_ms) }),
      el("td", {}, [start])
    ]);
  };
  var load = function () {
    AW.apiAll("/sessions", "sessions").then(function (answer) {
      var sorted = answer.sessions.slice().sort(function (a, b) { return b.created_at_ms - a.created_at_ms; });
      body.replaceChildren.apply(body, sorted.map(row));
    }, AW.fail("sessions"));
  };
  load();
};

// ------------------------------------------------------------------------------------------- turns

AW.turnRow = function (t) {
  return el("tr", {}, [
    el("td", { class: "mono" }, [AW.link(t.turn_id, ["turns", t.turn_id])]),
    el("td", { class: "mono", text: t.session_id }),
    el("td", { class: "mono", text: t.device_id || "" }),
    el("td", {}, [AW.badge(t.status)]),
    el("td", { text: t.outcome && t.outcome.error_code ? t.outcome.error_code : "" }),
    el("td", { text: AW.time(t.created_at_ms) })
  ]);
};

AW.views.turns = function (view) {
  var body = el("tbody");
  var filter = el("select", { name: "status", "aria-label": "status filter" },
    ["", "queued", "running", "completed", "failed", "cancelled"].map(function (s) { return el("option", { value: s, text: s || "any status" }); }));
  var more = el("button", { type: "button", class: "secondary", text: "More", hidden: true });
  var cursor = null;
  var load = function (append) {
    var q = "?limit=50" + (filter.value ? "&status=" + encodeURIComponent(filter.value) : "") +
      (append && cursor ? "&cursor=" + encodeURIComponent(cursor) : "");
    AW.api("GET", "/turns" + q).then(function (page) {
      if (!append) body.replaceChildren();
      page.turns.forEach(function (t) { body.appendChild(AW.turnRow(t)); });
      cursor = page.next_cursor;
      more.hidden = cursor === null;
    }, AW.fail("turns"));
  };
  filter.addEventListener("change", function () { load(false); });
  more.addEventListener("click", function () { load(true); });
  view.append(el("h2", { text: "Turns" }), el("div", { class: "inline" }, [filter]), el("table", { id: "turns" }, [
    el("thead", {}, [el("tr", {}, ["Turn", "Session", "Device", "Status", "Error", "Created"].map(function (h) {
      return el("th", { text: h });
    }))]), body
  ]), more);
  load(false);
};

AW.start = function () {
  document.getElementById("login-form").addEventListener("submit", function (event) {
    event.preventDefault();
    var value = document.getElementById("token").value.trim();
    if (value !== "") AW.login(value);
  });
  document.getElementById("logout").addEventListener("click", function () { AW.logout("Logged out."); });
  window.addEventListener("hashchange", AW.route);
  AW.route();
};
`
