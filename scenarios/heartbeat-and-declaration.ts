import { heartbeat, narrowedCapabilities, supportedOf } from "./Fixtures.js"
import { advance, check, connect, scenario, silence } from "./WireScenario.js"

const disabled = ["permissions", "function_result_images", "web_search_control"] as const
const capabilities = narrowedCapabilities(disabled)

export default scenario({
  name: "heartbeat-and-declaration",
  description:
    "The Runtime sends a heartbeat at once after the upgrade and then at the interval bootstrap returned; each " +
    "heartbeat declares every kind with its availability and the complete capability declaration (all 30 fields, " +
    "false included). Before the first heartbeat Core's view of the capabilities is unknown, not empty.",
  sections: ["Ownership and connection", "Capability declarations"],
  replay: {
    runtime: {
      asserts: "the narrowed declaration is sent in full at once and again exactly at 15 s, not a millisecond earlier"
    },
    core: { asserts: "the declaration is unknown before the first heartbeat and exactly the declared one after it" }
  },
  setup: { heartbeatSeconds: 15, disabledCapabilities: disabled },
  steps: [
    connect(),
    check("core", { _tag: "DeclarationUnknown" }),
    heartbeat({ capabilities }),
    check("core", {
      _tag: "DeclarationKnown",
      kinds: [{ kind: "scripted", available: true, supported: supportedOf(capabilities) }]
    }),
    silence("14999 millis", { heartbeats: "forbidden" }),
    advance("1 millis"),
    heartbeat({ capabilities })
  ]
})
