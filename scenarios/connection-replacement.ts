import { scriptedCapabilities, heartbeat, supportedOf } from "./Fixtures.js"
import { check, connect, replace, scenario, silence } from "./WireScenario.js"

export default scenario({
  name: "connection-replacement",
  description:
    "A newer connection for the same device replaces the previous one: Core closes the older connection (its " +
    "observers end as replaced) and the newer connection is the device's session, declared afresh by its own " +
    "heartbeat; a transient close never stops the Runtime.",
  sections: ["Ownership and connection"],
  replay: {
    runtime: { asserts: "after Core closes the connection the daemon dials again after its backoff, declares again and keeps running" },
    core: { asserts: "Core closes the older connection as replaced and serves the newer one" }
  },
  steps: [
    connect(),
    heartbeat(),
    replace(),
    heartbeat(),
    silence("1 second"),
    check("core", { _tag: "SessionClosed", reason: "replaced" }),
    check("core", { _tag: "DeclarationKnown", kinds: [{ kind: "scripted", available: true, supported: supportedOf(scriptedCapabilities) }] }),
    check("runtime", { _tag: "DaemonRunning" })
  ]
})
