import { deltaFrame, plainHeartbeat, promptRequest, script } from "./Fixtures.js"
import { check, connect, disconnect, reconnect, runtimeStep, scenario, silence } from "./WireScenario.js"

export default scenario({
  name: "connection-loss-no-invented-terminal",
  description:
    "Transport and execution outcomes are separate: a dropped connection closes Core's Run subscription with an " +
    "explicit observation error and fabricates no error or done; the effect is unknown. The Runtime settles the " +
    "Run it owned and sends nothing for it on the next connection.",
  sections: ["Failures, retries and cleanup"],
  replay: {
    runtime: { asserts: "after the drop the daemon reconnects, declares again and sends nothing for the old Run; cleanup is confirmed" },
    core: { asserts: "the Run subscription fails with ObservationLost(disconnected) after the one delta, without error or done" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest("run-1", script({ delta: "partial" }, { hang: true }), { observeMessages: false }),
    runtimeStep(deltaFrame("run-1", "partial", 1)),
    disconnect(),
    check("core", { _tag: "RunObservationLost", run: "run-1", reason: "disconnected", events: ["delta"] }),
    check("core", { _tag: "TurnResolved", run: "run-1", status: "failed", errorCode: "event_stream_incomplete" }, "unknown, not an execution failure of the Harness"),
    reconnect(),
    ...plainHeartbeat(),
    silence("1 minute", { note: "no terminal frame is invented for run-1 and nothing is replayed" }),
    check("runtime", { _tag: "NoRuns" }),
    check("runtime", { _tag: "CleanupConfirmed" })
  ]
})
