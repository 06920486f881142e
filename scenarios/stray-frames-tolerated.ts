import { scriptedCapabilities, heartbeat, supportedOf } from "./Fixtures.js"
import { check, connect, raw, scenario, silence } from "./WireScenario.js"

export default scenario({
  name: "stray-frames-tolerated",
  description:
    "A malformed inbound frame is dropped and logged without its payload; the connection stays open: text that " +
    "is not JSON, an unknown frame type, and a Run frame for a Run nobody subscribed change nothing, and the " +
    "next heartbeat is applied as usual.",
  sections: ["Envelope and identity", "Failures, retries and cleanup"],
  replay: {
    runtime: { skip: "a daemon never sends malformed frames; its own tolerance is pinned by malformed-requests" },
    core: { asserts: "Core keeps the connection and its declaration after the stray frames" }
  },
  steps: [
    connect(),
    heartbeat(),
    raw("runtime", "this is not JSON"),
    raw("runtime", JSON.stringify({ type: "no_such_event", id: "run-x", payload: {} })),
    raw("runtime", JSON.stringify({ type: "delta", id: "run-nobody", payload: { delta: "orphan", sequence: 1 } })),
    silence("1 second", { note: "Core does not close the connection" }),
    heartbeat(),
    check("core", { _tag: "DeclarationKnown", kinds: [{ kind: "scripted", available: true, supported: supportedOf(scriptedCapabilities) }] })
  ]
})
