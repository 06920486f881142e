import {
  completeMessage,
  deltaFrame,
  doneFrame,
  heartbeat,
  openMessage,
  prepare,
  SessionA,
  start,
  status,
  statusFrame,
  text
} from "./Fixtures.js"
import { check, connect, interleave, scenario } from "./WireScenario.js"

export default scenario({
  name: "preparation-ready-start-done",
  description:
    "An execution Turn in five steps: execution_prepare reserves an admission (preparing, then ready with the " +
    "Executor id, handle and expiry, no Run input); execution_start transfers it once to the Run (starting, " +
    "started); Run output may race the started status; done closes the Run's stream.",
  sections: ["Preparation and execution order", "What each acknowledgement proves"],
  replay: {
    runtime: { asserts: "revisions 1..4 on one handle, output ordered within the Run, done with the continuity snapshot" },
    core: { asserts: "Delivery sees preparing, ready, starting, started, sends start itself, and the Turn completes after done" }
  },
  steps: [
    connect(),
    heartbeat(),
    prepare("prep-1", SessionA),
    status("prep-1", 1, "preparing"),
    status("prep-1", 2, "ready"),
    start("prep-1", "run-1", text("hello world")),
    status("prep-1", 3, "starting", { run_id: "run-1" }),
    interleave([
      [statusFrame("prep-1", 4, "started", { run_id: "run-1" })],
      [
        openMessage("run-1", 1),
        deltaFrame("run-1", "hello", 1, 1),
        deltaFrame("run-1", " world", 2, 1),
        completeMessage("run-1", 1, "hello world"),
        doneFrame("run-1", "hello world")
      ]
    ]),
    check("core", { _tag: "PreparationObserved", request: "prep-1", states: ["preparing", "ready", "starting", "started"] }),
    check("core", { _tag: "RunCompleted", run: "run-1", events: ["output_message", "delta", "delta", "output_message", "done"] }),
    check("core", { _tag: "TurnResolved", run: "run-1", status: "completed" }),
    check("runtime", { _tag: "NoRuns" })
  ]
})
