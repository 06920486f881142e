/**
 * The console's Files hook (browser JavaScript as text, in the same function as ConsoleScript.ts). A device's
 * "Files" link appears only when one of its declared kinds supports a workspace capability
 * (`AW.files.capabilities`); the view at `#/devices/{id}/files` is a placeholder until the operator Files API
 * (`GET/PUT /api/v1/operator/…/files`, docs/operator-api.md) exists.
 *
 * HOOK for the Files API: replace `AW.views.files` below (list a directory with `AW.api("GET", …)`, read a file,
 * write one with `AW.api("PUT", …)`); keep rendering through `AW.el` (textContent only) and register any
 * polling or stream with `AW.onLeave` so it stops when the view is left.
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

AW.views.files = function (view, deviceId) {
  view.append(el("h2", {}, ["Files on ", el("span", { class: "mono", text: deviceId })]));
  AW.api("GET", "/devices/" + encodeURIComponent(deviceId)).then(function (device) {
    var caps = [];
    (device.declaration ? device.declaration.kinds : []).forEach(function (k) {
      AW.files.capabilities.forEach(function (c) { if (k.capabilities && k.capabilities[c] === true && caps.indexOf(c) < 0) caps.push(c); });
    });
    view.append(el("div", { class: "placeholder", id: "files-placeholder" }, [
      el("p", { text: AW.files.declared(device)
        ? "The device declares " + caps.join(", ") + ". Browsing its workspace needs the operator Files API, which this Core does not serve yet."
        : "This device declares no workspace capability: there are no files to show." })
    ]));
  }, AW.fail("files"));
};
`
