import { check, connect, scenario, silence } from "./WireScenario.js"

export default scenario({
  name: "bad-credential",
  description:
    "A credential Core does not accept is refused at bootstrap with 401 bad_credential; an authentication " +
    "rejection requires operator correction, so the Runtime stops instead of reconnecting.",
  sections: ["Ownership and connection", "Failures, retries and cleanup"],
  replay: {
    runtime: { asserts: "the daemon gets 401 at bootstrap, never dials again and stops with a credential rejection" },
    core: { asserts: "bootstrap with a revoked credential answers 401 bad_credential and no session is registered" }
  },
  steps: [
    connect({ credential: "wrong", expect: { _tag: "Refused", at: "bootstrap", status: 401, error: "bad_credential" } }),
    silence("10 minutes", { note: "no reconnection attempt" }),
    check("runtime", { _tag: "DaemonStopped", reason: "rejected_credential" }),
    check("core", { _tag: "NoSession" })
  ]
})
