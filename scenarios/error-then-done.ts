import { deltaFrame, doneFrame, plainHeartbeat, promptRequest, script } from "./Fixtures.js"
import { check, connect, raw, runtime, runtimeStep, scenario } from "./WireScenario.js"

export default scenario({
  name: "error-then-done",
  description:
    "An execution error is not terminal: the Runtime follows it with done, which closes the stream, and the " +
    "preceding errors remain part of the outcome. An error frame may carry a neutral engine-failure code and, " +
    "only with connection_failed, an HTTP status; a malformed code is dropped by Core, never fatal.",
  sections: ["Preparation and execution order", "Native failure classification"],
  replay: {
    runtime: { asserts: "the error frame with code and http_status, then done with the partial content" },
    core: { asserts: "both errors (one with a malformed code, kept unclassified) reach the subscriber, which ends after done" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest(
      "run-1",
      script({ delta: "partial" }, { error: { message: "upstream connection reset", code: "connection_failed", http_status: 502 } }),
      { observeMessages: false }
    ),
    runtimeStep(deltaFrame("run-1", "partial", 1)),
    runtime({
      type: "error",
      id: "run-1",
      payload: { error: "upstream connection reset", code: "connection_failed", http_status: 502 }
    }),
    raw(
      "runtime",
      JSON.stringify({ type: "error", id: "run-1", payload: { error: "second failure", code: "not_a_code", http_status: 502 } }),
      { note: "Core keeps the frame and drops the unknown code and the status it cannot keep" }
    ),
    runtimeStep(doneFrame("run-1", "partial")),
    check("core", { _tag: "RunCompleted", run: "run-1", events: ["delta", "error", "error", "done"] }),
    check("core", { _tag: "TurnResolved", run: "run-1", status: "failed", errorCode: "engine_failed" }, "an engine failure, not an unknown"),
    check("runtime", { _tag: "NoRuns" })
  ]
})
