import { plainHeartbeat, promptRequest, script } from "./Fixtures.js"
import { advance, bind, check, connect, core, runtime, scenario, silence } from "./WireScenario.js"

const first = bind("perm-a.delivery_id.1", "d-1")
const second = bind("perm-a.delivery_id.2", "d-2")

export default scenario({
  name: "decision-waiter-timeout",
  description:
    "Core waits 15 seconds for a decision receipt; without it the outcome is unknown (never failed, never " +
    "applied), the interaction stays retryable and the waiter's timeout releases nothing. A receipt that arrives " +
    "after its waiter gave up correlates with nothing; a retry with a new delivery id is applied.",
  sections: ["What each acknowledgement proves", "Failures, retries and cleanup"],
  replay: {
    runtime: { skip: "Core's waiter; the Runtime's ownership after a timeout is pinned by cancel-timeout-keeps-ownership" },
    core: { asserts: "pending 1 ms before 15 s, unknown at 15 s, the late receipt ignored, the retry applied" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest("run-1", script({ permission: { request_id: "perm-a", tool: "shell", title: "Run ls" } }), { observeMessages: false }),
    runtime({ type: "permission_request", id: "run-1", payload: { request_id: "perm-a", tool: "shell", title: "Run ls" } }),
    core({ type: "permission_decision", id: "perm-a", payload: { delivery_id: first, approved: true } }),
    silence("14999 millis"),
    check("core", { _tag: "DecisionOutcome", interaction: "perm-a", outcome: "pending" }),
    advance("1 millis"),
    check("core", { _tag: "DecisionOutcome", interaction: "perm-a", outcome: "unknown" }),
    runtime({ type: "interaction_decision_ack", id: "perm-a", payload: { delivery_id: first, applied: true } }),
    check("core", { _tag: "DecisionOutcome", interaction: "perm-a", outcome: "unknown" }, "the late receipt proves nothing to a waiter that gave up"),
    core({ type: "permission_decision", id: "perm-a", payload: { delivery_id: second, approved: true } }),
    runtime({ type: "interaction_decision_ack", id: "perm-a", payload: { delivery_id: second, applied: true } }),
    check("core", { _tag: "DecisionOutcome", interaction: "perm-a", outcome: "applied" })
  ]
})
