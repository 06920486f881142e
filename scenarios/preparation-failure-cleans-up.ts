import { heartbeat, prepare, SessionA, status } from "./Fixtures.js"
import { check, connect, scenario, silence } from "./WireScenario.js"

export default scenario({
  name: "preparation-failure-cleans-up",
  description:
    "A confirmed preparation failure keeps its finite category (failed, preparation_failed) and the Runtime " +
    "settles its resources; no Run was created, so no Run frame and no completion follow.",
  sections: ["Preparation and execution order", "Failures, retries and cleanup"],
  replay: {
    runtime: { asserts: "failed with preparation_failed, then silence; the failed Executor's cleanup is confirmed" },
    core: { asserts: "the preparation subscription ends with failed; no Run is observed" }
  },
  steps: [
    connect(),
    heartbeat(),
    prepare("prep-1", SessionA, { scripted: { prepare: "fail" } }),
    status("prep-1", 1, "preparing"),
    status("prep-1", 2, "failed", { error_code: "preparation_failed", granted: false }),
    silence("1 minute", { note: "no Run frames: nothing was started" }),
    check("core", { _tag: "PreparationObserved", request: "prep-1", states: ["preparing", "failed"] }),
    check("runtime", { _tag: "CleanupConfirmed" }),
    check("runtime", { _tag: "NoRuns" })
  ]
})
