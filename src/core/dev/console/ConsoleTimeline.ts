/**
 * The console's Turn view (browser JavaScript as text, after ConsoleScript.ts in the same function): the Turn's
 * head, the steer / cancel controls, pending interactions with their answer forms, and the live timeline of
 * frames and delivery facts read from `GET /turns/{id}/events` with `fetch` streaming (so the token stays in
 * the `Authorization` header; an `EventSource` cannot send one). A dropped stream resumes with `?after=<seq>`.
 * Timeline rows show a bounded one-line summary of each event (never a whole payload), through textContent.
 */

export const ConsoleTimelineScript = String.raw`
var MAX_EVENT_BUFFER = 8 * 1024 * 1024;

/** Reads an SSE stream over fetch; calls onEvent({event, id, data}) per event; resolves when the stream ends. */
AW.streamEvents = function (path, signal, onEvent) {
  var init = { headers: { "Authorization": "Bearer " + AW.token(), "Accept": "text/event-stream" }, signal: signal, cache: "no-store", credentials: "omit" };
  return fetch(API + path, init).then(function (res) {
    if (res.status === 401) { AW.logout("The operator token was refused (401)."); return; }
    if (!res.ok || !res.body) throw new AW.ApiError(res.status, "events_unavailable", "HTTP " + res.status);
    var reader = res.body.getReader();
    var decoder = new TextDecoder();
    var buffer = "";
    var pump = function () {
      return reader.read().then(function (chunk) {
        if (chunk.done) return;
        buffer += decoder.decode(chunk.value, { stream: true });
        var index;
        while ((index = buffer.indexOf("\n\n")) >= 0) {
          var block = buffer.slice(0, index);
          buffer = buffer.slice(index + 2);
          var event = { event: "message", id: null, data: [] };
          block.split("\n").forEach(function (line) {
            if (line.indexOf("event:") === 0) event.event = line.slice(6).trim();
            else if (line.indexOf("id:") === 0) event.id = line.slice(3).trim();
            else if (line.indexOf("data:") === 0) event.data.push(line.slice(5).replace(/^ /, ""));
          });
          if (event.data.length > 0) onEvent({ event: event.event, id: event.id, data: event.data.join("\n") });
        }
        if (buffer.length > MAX_EVENT_BUFFER) throw new AW.ApiError(0, "event_too_large", "");
        return pump();
      });
    };
    return pump();
  });
};

AW.parse = function (text) { try { return JSON.parse(text); } catch (e) { return null; } };

AW.short = function (value) { return AW.clip(JSON.stringify(value), 200); };

/** The text of a MessageInput-like content list (output_message / done content). */
AW.contentText = function (content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map(function (part) { return part && typeof part.text === "string" ? part.text : ""; }).join("");
};

/** Kind and one-line summary of a Run frame. */
AW.frameSummary = function (frame) {
  var p = frame && frame.payload && typeof frame.payload === "object" ? frame.payload : {};
  var type = frame && typeof frame.type === "string" ? frame.type : "frame";
  switch (type) {
    case "delta": return [type, p.delta];
    case "thinking": return [type, p.delta !== undefined ? p.delta : p.text];
    case "output_message": return [type, AW.contentText(p.content)];
    case "tool_call": return [type, (p.name || "") + (p.stage ? " (" + p.stage + ")" : "")];
    case "usage": return [type, AW.short(p.usage !== undefined ? p.usage : p)];
    case "error": return [type, (p.code ? p.code + ": " : "") + (p.message || "")];
    case "done": return [type, typeof p.content === "string" ? p.content : AW.contentText(p.content)];
    case "permission_request": return [type, (p.tool || "") + " \u2014 " + (p.title || "")];
    case "permission_cancel": return [type, p.request_id];
    case "prompt_for_user_choice": return [type, (Array.isArray(p.questions) ? p.questions.length : 0) + " question(s)"];
    case "function_call": return [type, p.name];
    default: return [type, AW.short(p)];
  }
};

/** Kind and one-line summary of a delivery fact. */
AW.factSummary = function (fact) {
  if (!fact || typeof fact !== "object") return ["fact", ""];
  var name = typeof fact.fact === "string" ? fact.fact : "fact";
  var rest = {};
  Object.keys(fact).forEach(function (k) { if (k !== "fact") rest[k] = fact[k]; });
  if (name === "preparation_status" && fact.status) return [name, String(fact.status.state || "")];
  if (typeof fact.type === "string" && Object.keys(rest).length === 1) return [name, fact.type];
  return [name, AW.short(rest)];
};

AW.timelineRow = function (seq, event, kind, summary, bytes) {
  var safeKind = /^[a-z_]{1,40}$/.test(String(kind)) ? kind : null;
  return el("li", { class: event, "data-kind": safeKind }, [
    el("span", { class: "seq", text: seq === null ? "" : seq }),
    el("span", { class: "event", text: event }),
    el("span", { class: "kind mono", text: AW.clip(kind, 40) }),
    el("span", { class: "text", text: AW.clip(summary) + (bytes > MAX_TEXT ? "  (" + bytes + " bytes)" : "") })
  ]);
};

AW.views.turn = function (view, turnId) {
  var path = "/turns/" + encodeURIComponent(turnId);
  var abort = new AbortController();
  var finished = false;
  var lastSeq = 0;
  AW.onLeave(function () { abort.abort(); });

  var head = el("dl", { class: "turn-head", id: "turn-head" });
  var result = el("span", { id: "action-result", role: "status" });
  var steerText = el("input", { type: "text", name: "steer", placeholder: "steer text", "aria-label": "steer text" });
  var steerButton = el("button", { type: "submit", id: "steer", text: "Steer" });
  var steer = el("form", { class: "inline", id: "steer-form" }, [steerText, steerButton]);
  var cancel = el("button", { type: "button", id: "cancel", class: "danger", text: "Cancel Turn" });
  var interactions = el("div", { id: "interactions" });
  var timeline = el("ol", { id: "timeline" });
  var controls = el("div", { class: "controls" }, [steer, el("div", { class: "inline" }, [cancel, result]), interactions]);
  view.append(el("h2", {}, ["Turn ", el("span", { class: "mono", text: turnId })]), head, controls,
    el("h3", { text: "Timeline" }), timeline);

  var show = function (label, answer) {
    var parts = [label, answer.status || answer.outcome || ""];
    if (answer.position !== undefined) parts.push("position " + answer.position);
    if (answer.error_code) parts.push(answer.error_code);
    if (answer.reason) parts.push(answer.reason);
    result.textContent = AW.clip(parts.join(" "), 200);
  };

  var renderHead = function (t) {
    var rows = [["status", AW.badge(t.status)], ["session", t.session_id], ["run", t.run_id], ["device", t.device_id || ""],
      ["attempt", String(t.attempt)], ["input cursor", String(t.input_cursor)], ["created", AW.time(t.created_at_ms)]];
    if (t.outcome) {
      rows.push(["outcome", AW.badge(t.outcome.status)]);
      if (t.outcome.error_code) rows.push(["error code", t.outcome.error_code]);
      if (t.outcome.observation) rows.push(["observation", t.outcome.observation]);
      if (typeof t.outcome.content === "string") rows.push(["content", t.outcome.content]);
    }
    head.replaceChildren();
    rows.forEach(function (r) {
      head.append(el("dt", { text: r[0] }), typeof r[1] === "string" ? el("dd", { text: r[1], "data-field": r[0].replace(/ /g, "_") }) : el("dd", { "data-field": r[0] }, [r[1]]));
    });
    var done = finished || t.status === "completed" || t.status === "failed" || t.status === "cancelled";
    steerButton.disabled = done;
    cancel.disabled = done;
  };

  var answer = function (what, sub, body) {
    return AW.api("POST", path + "/" + what + "/" + encodeURIComponent(sub), body).then(function (a) {
      show("answer", a);
      refresh();
    }, AW.fail("answer"));
  };

  var interactionForm = function (i) {
    var req = i.request && typeof i.request === "object" ? i.request : {};
    var box = el("div", { class: "interaction", "data-interaction-kind": i.kind });
    if (i.kind === "permission") {
      box.append(el("span", { text: "Permission: " + AW.clip(req.tool, 80) + " \u2014 " + AW.clip(req.title, 200) + " " }),
        el("button", { type: "button", class: "approve", text: "Approve", on: { click: function () { answer("permissions", i.interaction_id, { approved: true }); } } }),
        " ",
        el("button", { type: "button", class: "secondary deny", text: "Deny", on: { click: function () { answer("permissions", i.interaction_id, { approved: false }); } } }));
    } else if (i.kind === "user_choice") {
      var questions = Array.isArray(req.questions) ? req.questions.slice(0, 20) : [];
      var inputs = questions.map(function (q) {
        return { id: String(q.id), input: el("input", { type: "text", "aria-label": AW.clip(q.question || q.id, 80), placeholder: AW.clip(q.question || q.id, 80) }) };
      });
      var form = el("form", { class: "inline" }, [el("span", { text: "Question(s):" })].concat(inputs.map(function (x) { return x.input; }))
        .concat([el("button", { type: "submit", text: "Answer" })]));
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        answer("questions", i.interaction_id, { question_answers: inputs.map(function (x) { return { question_id: x.id, answers: [x.input.value] }; }) });
      });
      box.append(form, el("button", { type: "button", class: "secondary", text: "Dismiss", on: { click: function () { answer("questions", i.interaction_id, { cancelled: true }); } } }));
    } else if (i.kind === "function_call") {
      var output = el("input", { type: "text", "aria-label": "function output", placeholder: "function output" });
      var f = el("form", { class: "inline" }, [el("span", { text: "Function " + AW.clip(req.name, 80) + ":" }), output, el("button", { type: "submit", text: "Return" })]);
      f.addEventListener("submit", function (event) {
        event.preventDefault();
        answer("functions", i.interaction_id, { output: output.value });
      });
      box.append(f);
    }
    return box;
  };

  // Answers to GETs on separate connections can arrive out of order: only the newest refresh may render, so a
  // snapshot read while the Turn ran never overwrites the outcome (nor re-enables Steer after it).
  var refreshes = 0;
  var refresh = function () {
    var mine = ++refreshes;
    return AW.api("GET", path).then(function (t) {
      if (mine !== refreshes) return;
      renderHead(t);
      var pending = (t.interactions || []).filter(function (i) { return i.status === "pending"; });
      interactions.replaceChildren.apply(interactions, pending.map(interactionForm));
    }, AW.fail("turn"));
  };

  steer.addEventListener("submit", function (event) {
    event.preventDefault();
    if (steerText.value === "") return;
    steerButton.disabled = true;
    AW.api("POST", path + "/steer", { input: AW.textInput(steerText.value) }).then(function (a) {
      show("steer", a);
      steerText.value = "";
      steerButton.disabled = finished;
    }, function (e) { steerButton.disabled = finished; AW.fail("steer")(e); });
  });
  cancel.addEventListener("click", function () {
    cancel.disabled = true;
    AW.api("POST", path + "/cancel", {}).then(function (a) { show("cancel", a); }, function (e) { cancel.disabled = finished; AW.fail("cancel")(e); });
  });

  var onEvent = function (e) {
    if (e.id !== null && /^\d+$/.test(e.id)) lastSeq = Math.max(lastSeq, Number(e.id));
    var body = AW.parse(e.data);
    var bytes = e.data.length;
    if (e.event === "frame") {
      var f = AW.frameSummary(body);
      timeline.appendChild(AW.timelineRow(e.id, "frame", f[0], f[1], bytes));
      if (f[0] === "permission_request" || f[0] === "prompt_for_user_choice" || f[0] === "function_call" || f[0] === "permission_cancel") refresh();
    } else if (e.event === "fact") {
      var s = AW.factSummary(body);
      timeline.appendChild(AW.timelineRow(e.id, "fact", s[0], s[1], bytes));
      // An attempt's first fact is stored in the transaction that begins it (queued -> running): show that.
      if (s[0] === "dispatching" && body && body.type === "execution_prepare") refresh();
    } else if (e.event === "outcome") {
      finished = true;
      var status = body && body.outcome ? body.outcome.status : body ? body.status : "";
      timeline.appendChild(AW.timelineRow(null, "outcome", status, body && body.outcome && body.outcome.error_code ? body.outcome.error_code : "", bytes));
      if (body) renderHead(body);
      refresh();
    } else if (e.event === "input" || e.event === "interaction") {
      timeline.appendChild(AW.timelineRow(null, e.event, body && body.status ? body.status : body && body.outcome ? body.outcome : "", AW.short(body), bytes));
      refresh();
    }
  };

  var follow = function (attempt) {
    AW.streamEvents(path + "/events" + (lastSeq > 0 ? "?after=" + lastSeq : ""), abort.signal, onEvent).then(function () {
      if (!finished && !abort.signal.aborted && attempt < 30) window.setTimeout(function () { follow(attempt + 1); }, 1000);
    }, function (error) {
      if (abort.signal.aborted) return;
      AW.fail("timeline")(error);
      if (!finished && attempt < 30) window.setTimeout(function () { follow(attempt + 1); }, 1000);
    });
  };
  refresh().then(function () { follow(0); });
};
`
