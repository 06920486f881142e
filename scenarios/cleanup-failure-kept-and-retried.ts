import { deltaFrame, doneFrame, plainHeartbeat, prepare, promptRequest, rejected, script, SessionA, status } from "./Fixtures.js"
import { advance, check, connect, runtimeStep, scenario } from "./WireScenario.js"

export default scenario({
  name: "cleanup-failure-kept-and-retried",
  description:
    "A failed cleanup keeps resource ownership and reports unconfirmed cleanup: the Executor whose close fails " +
    "stays owned and keeps holding its capacity (a new preparation is rejected with preparation_capacity), the " +
    "close is retried with capped backoff, and capacity returns only after a confirmed close.",
  sections: ["Failures, retries and cleanup", "Preparation and execution order"],
  replay: {
    runtime: { asserts: "cleanup unconfirmed after each failed close, capacity held until the third attempt confirms, then admitted" },
    core: { skip: "cleanup ownership is the Runtime's; Core's side of a capacity rejection is pinned by preparation-capacity" }
  },
  setup: { maxActive: 1 },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest("run-1", script({ close_fails: 2 }, { delta: "x" }), { observeMessages: false }),
    runtimeStep(deltaFrame("run-1", "x", 1)),
    runtimeStep(doneFrame("run-1", "x")),
    check("runtime", { _tag: "CleanupUnconfirmed", kind: "executor", atLeastAttempts: 1 }),
    prepare("prep-1", SessionA, { observeMessages: false }),
    rejected("prep-1", "execution_prepare", "preparation_capacity"),
    advance("500 millis"),
    check("runtime", { _tag: "CleanupUnconfirmed", kind: "executor", atLeastAttempts: 2 }),
    advance("750 millis"),
    check("runtime", { _tag: "CleanupConfirmed" }),
    prepare("prep-2", SessionA, { observeMessages: false }),
    status("prep-2", 1, "preparing"),
    status("prep-2", 2, "ready")
  ]
})
