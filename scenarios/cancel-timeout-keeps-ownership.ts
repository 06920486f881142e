import { deltaFrame, doneFrame, plainHeartbeat, promptRequest, script } from "./Fixtures.js"
import { advance, any, bind, check, connect, core, optional, runtime, runtimeStep, scenario, settle, silence } from "./WireScenario.js"

const cancelDelivery = bind("cancel.delivery_id", "cancel-1")

export default scenario({
  name: "cancel-timeout-keeps-ownership",
  description:
    "Resource ownership after a waiter's timeout: when native cancellation does not settle within the receipt " +
    "wait (10 s), the Runtime answers cancel_timeout (applied false) and keeps owning the Run; the timeout " +
    "releases, closes and replays nothing. When the Turn later settles on its own, its done still arrives.",
  sections: ["Failures, retries and cleanup", "What each acknowledgement proves"],
  replay: {
    runtime: { asserts: "cancel_timeout exactly at 10 s, the Run still owned afterwards, then done once it settles" },
    core: { asserts: "the cancellation stays unconfirmed after cancel_timeout, and the later done never turns the Turn into completed" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest(
      "run-1",
      script({ cancel_ignored: true }, { delta: "working" }, { wait: "finish" }),
      { observeMessages: false }
    ),
    runtimeStep(deltaFrame("run-1", "working", 1)),
    core({ type: "prompt_cancel", id: "run-1", payload: { delivery_id: cancelDelivery } }),
    silence("9999 millis"),
    advance("1 millis"),
    runtime({
      type: "interaction_decision_ack",
      id: "run-1",
      payload: { delivery_id: cancelDelivery, applied: false, error_code: "cancel_timeout", error: optional(any()) }
    }),
    check("runtime", { _tag: "RunOwned", run: "run-1" }),
    check("core", { _tag: "CancelOutcome", run: "run-1", outcome: "unconfirmed" }, "cancel_timeout is not a confirmation"),
    settle("finish"),
    runtimeStep(doneFrame("run-1", "working")),
    check("core", { _tag: "TurnResolved", run: "run-1", status: "failed", errorCode: "cancel_unconfirmed" }, "the later done overrides nothing"),
    check("runtime", { _tag: "NoRuns" })
  ]
})
