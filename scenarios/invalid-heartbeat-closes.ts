import { scriptedCapabilities, heartbeat } from "./Fixtures.js"
import { check, closed, connect, raw, scenario } from "./WireScenario.js"

const { usage: _omitted, ...incomplete } = scriptedCapabilities

export default scenario({
  name: "invalid-heartbeat-closes",
  description:
    "A heartbeat whose capability declaration is incomplete (a field omitted) is invalid: Core clears the " +
    "connection's declaration and closes its transport. That establishes no execution outcome.",
  sections: ["Capability declarations"],
  replay: {
    runtime: { skip: "a daemon never sends an incomplete declaration: its encoder refuses it (unit-tested in src/proto)" },
    core: { asserts: "Core closes the connection after the invalid heartbeat and reports invalid_heartbeat" }
  },
  steps: [
    connect(),
    heartbeat(),
    raw(
      "runtime",
      JSON.stringify({
        type: "heartbeat",
        payload: {
          ts: 1_760_000_015,
          active_requests: 0,
          supported_agent_kinds: [{ kind: "scripted", available: true, capabilities: incomplete }]
        }
      }),
      { note: "the declaration omits `usage`" }
    ),
    closed(),
    check("core", { _tag: "SessionClosed", reason: "invalid_heartbeat" })
  ]
})
