/**
 * The console's Files hook (browser JavaScript as text, in the same function as ConsoleScript.ts). A device's
 * "Files" link appears only when one of its declared kinds supports a workspace capability
 * (`AW.files.capabilities`). The view at `#/devices/{id}/files` browses the workspace of the device's Sessions
 * with a `self_hosted` Environment through the operator Files API (docs/operator-api.md "Files"): list a
 * directory, read a file (text, or its size when binary), write a text file, download the export as a tar.
 * Rendering goes through `AW.el` (textContent only); paths and ids reach URLs only through `encodeURIComponent`.
 */

export const ConsoleFilesScript = String.raw`
AW.files = {
  /** A kind declaring any of these (and available) gets the Files view. */
  capabilities: ["workspace_read_preparation", "workspace_authoring", "workspace_output_export"],
  declared: function (device) {
    var decl = device && device.declaration;
    if (!decl || !Array.isArray(decl.kinds)) return false;
    return decl.kinds.some(function (k) {
      return k.available && k.capabilities && AW.files.capabilities.some(function (c) { return k.capabilities[c] === true; });
    });
  }
};

/** UTF-8 text ⇄ standard base64 (the Files API's inline data). A non-UTF-8 file shows as binary. */
AW.files.encode = function (text) { return btoa(unescape(encodeURIComponent(text))); };
AW.files.decode = function (data) {
  try { return decodeURIComponent(escape(atob(data))); } catch (e) { return null; }
};

AW.views.files = function (view, deviceId) {
  view.append(el("h2", {}, ["Files on ", el("span", { class: "mono", text: deviceId })]));
  var live = AW.live();
  Promise.all([AW.api("GET", "/devices/" + encodeURIComponent(deviceId)), AW.apiAll("/sessions", "sessions")]).then(function (answers) {
    if (!live()) return;
    var device = answers[0];
    var caps = [];
    (device.declaration ? device.declaration.kinds : []).forEach(function (k) {
      AW.files.capabilities.forEach(function (c) { if (k.capabilities && k.capabilities[c] === true && caps.indexOf(c) < 0) caps.push(c); });
    });
    if (!AW.files.declared(device)) {
      view.append(el("div", { class: "placeholder", id: "files-placeholder" }, [
        el("p", { text: "This device declares no workspace capability: there are no files to show." })
      ]));
      return;
    }
    var sessions = (answers[1].sessions || []).filter(function (s) {
      return s.device_id === deviceId && s.environment && s.environment.type === "self_hosted";
    });
    if (sessions.length === 0) {
      view.append(el("div", { class: "placeholder", id: "files-placeholder" }, [
        el("p", { text: "The device declares " + caps.join(", ") + ". Create a Session with a self_hosted Environment on it " +
          "(POST /sessions with environment {type: self_hosted, id, workspace_directory} and this device_id) to browse its workspace." })
      ]));
      return;
    }
    var state = { session: sessions[0].session_id, path: "" };
    var picker = el("select", { id: "files-session" }, sessions.map(function (s) {
      return el("option", { value: s.session_id, text: s.session_id + " (" + s.environment.workspace_directory + ")" });
    }));
    var listing = el("div", { id: "files-listing" }, []);
    var content = el("pre", { id: "files-content", class: "mono" }, []);
    var status = el("p", { id: "files-status" }, []);
    var base = function () { return "/sessions/" + encodeURIComponent(state.session) + "/files"; };
    var show = function (text) { status.textContent = text; };
    var list = function (path) {
      state.path = path;
      listing.textContent = "";
      AW.api("GET", base() + "?path=" + encodeURIComponent(path)).then(function (page) {
        listing.append(el("p", { class: "mono", text: "/" + path }));
        var rows = [];
        if (path !== "") rows.push({ name: "..", kind: "directory", up: true });
        page.entries.forEach(function (e) { rows.push(e); });
        rows.forEach(function (e) {
          var target = e.up ? path.split("/").slice(0, -1).join("/") : (path === "" ? e.name : path + "/" + e.name);
          var a = el("a", { href: "#", class: "mono", text: e.name + (e.kind === "directory" ? "/" : "") });
          a.addEventListener("click", function (ev) {
            ev.preventDefault();
            if (e.kind === "directory") list(target); else if (e.kind === "file") read(target);
          });
          listing.append(el("div", {}, [a, el("span", { text: e.kind === "file" ? "  " + e.size_bytes + " bytes" : "  " + e.kind })]));
        });
        if (page.truncated) listing.append(el("p", { text: "(more entries exist)" }));
      }, function (error) { show("list failed: " + error.message); });
    };
    var read = function (path) {
      AW.api("GET", base() + "/content?path=" + encodeURIComponent(path)).then(function (file) {
        var text = AW.files.decode(file.data);
        document.getElementById("files-path").value = path;
        content.textContent = text === null ? "(binary, " + file.size_bytes + " bytes)" : text;
        show(path + ": " + file.size_bytes + " bytes" + (file.truncated ? " (truncated)" : ""));
      }, function (error) { show("read failed: " + error.message); });
    };
    var pathInput = el("input", { id: "files-path", placeholder: "path/in/workspace.txt" }, []);
    var textInput = el("textarea", { id: "files-text", rows: "6" }, []);
    var save = el("button", { id: "files-save", text: "Write file" }, []);
    save.addEventListener("click", function () {
      var path = pathInput.value.trim();
      AW.api("PUT", base() + "/content", { path: path, data: AW.files.encode(textInput.value) }).then(function (w) {
        show("wrote " + w.size_bytes + " bytes to " + path + " (sha256 " + w.sha256 + ")");
        list(state.path);
      }, function (error) { show("write failed: " + error.message); });
    });
    var exportButton = el("button", { id: "files-export", text: "Download tar" }, []);
    exportButton.addEventListener("click", function () {
      fetch(API + base() + "/export", { headers: { "Authorization": "Bearer " + AW.token() }, cache: "no-store", credentials: "omit" })
        .then(function (res) {
          if (!res.ok) throw new Error("HTTP " + res.status);
          return res.blob();
        }).then(function (blob) {
          var url = URL.createObjectURL(blob);
          var a = el("a", { href: url, download: "workspace.tar" }, []);
          document.body.append(a);
          a.click();
          a.remove();
          window.setTimeout(function () { URL.revokeObjectURL(url); }, 10000);
          show("exported " + blob.size + " bytes");
        }, function (error) { show("export failed: " + error.message); });
    });
    picker.addEventListener("change", function () { state.session = picker.value; list(""); });
    view.append(el("div", {}, [el("label", { text: "Session " }), picker, exportButton]), status, listing,
      el("div", {}, [pathInput, save]), textInput, content);
    list("");
  }, AW.fail("files"));
};
`
