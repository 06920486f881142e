import { plainHeartbeat, promptRequest, script } from "./Fixtures.js"
import { advance, bind, check, connect, core, scenario, silence } from "./WireScenario.js"

export default scenario({
  name: "cancel-unconfirmed",
  description:
    "Core records cancel_unconfirmed when no cancellation confirmation arrives within 15 seconds of sending " +
    "prompt_cancel. A lost receipt neither establishes success nor authorizes another execution.",
  sections: ["Active input receipts", "Failures, retries and cleanup"],
  replay: {
    runtime: { skip: "Core's timer; the Runtime's own cancellation budget is pinned by cancel-timeout-keeps-ownership" },
    core: { asserts: "the cancellation is pending 1 ms before 15 s and unconfirmed at 15 s" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest("run-1", script({ hang: true }), { observeMessages: false }),
    core({ type: "prompt_cancel", id: "run-1", payload: { delivery_id: bind("cancel.delivery_id", "cancel-1") } }),
    silence("14999 millis"),
    check("core", { _tag: "CancelOutcome", run: "run-1", outcome: "pending" }),
    advance("1 millis"),
    check("core", { _tag: "CancelOutcome", run: "run-1", outcome: "unconfirmed" }),
    check("core", { _tag: "TurnResolved", run: "run-1", status: "failed", errorCode: "cancel_unconfirmed" })
  ]
})
