import { deltaFrame, plainHeartbeat, promptRequest, script } from "./Fixtures.js"
import { check, connect, replace, runtimeStep, scenario, silence } from "./WireScenario.js"

export default scenario({
  name: "newer-connection-replaces-older",
  description:
    "A newer connection for the same device replaces the previous one: Core closes the older connection and " +
    "evicts its Run routes, whose subscriptions end with an observation error; the new connection inherits none " +
    "of them, so a frame for the old Run on the new connection reaches no old subscriber.",
  sections: ["Ownership and connection"],
  replay: {
    runtime: { asserts: "when Core closes the connection the daemon dials again, declares again and replays nothing" },
    core: { asserts: "the older session closes as replaced; the Run subscription fails with ObservationLost(replaced) after one delta" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest("run-1", script({ delta: "partial" }, { hang: true }), { observeMessages: false }),
    runtimeStep(deltaFrame("run-1", "partial", 1)),
    replace(),
    ...plainHeartbeat(),
    { ...runtimeStep(deltaFrame("run-1", "late", 2)), sides: ["core"], note: "no route on the new connection" },
    silence("1 minute"),
    check("core", { _tag: "SessionClosed", reason: "replaced" }),
    check("core", { _tag: "RunObservationLost", run: "run-1", reason: "replaced", events: ["delta"] }),
    check("core", { _tag: "TurnResolved", run: "run-1", status: "failed", errorCode: "event_stream_incomplete" }),
    check("runtime", { _tag: "NoRuns" })
  ]
})
