import { check, connect, scenario, silence } from "./WireScenario.js"

export default scenario({
  name: "incompatible-version",
  description:
    "Core accepts only an exact wire version: a mismatch is answered 426 incompatible_version at the upgrade, " +
    "before any dispatch, and the Runtime treats it as permanent and stops reconnecting.",
  sections: ["Ownership and connection"],
  replay: {
    runtime: {
      asserts: "the daemon dials with 0.10.0, gets 426 at the upgrade, never dials again and stops with incompatible_version"
    },
    core: { asserts: "a Runtime dialling with 0.9.0 gets 426 incompatible_version and no session is registered" }
  },
  steps: [
    connect({ peerVersion: "0.9.0", expect: { _tag: "Refused", at: "upgrade", status: 426, error: "incompatible_version" } }),
    silence("10 minutes", { note: "no reconnection attempt, however long we wait" }),
    check("runtime", { _tag: "DaemonStopped", reason: "incompatible_version" }),
    check("core", { _tag: "NoSession" })
  ]
})
