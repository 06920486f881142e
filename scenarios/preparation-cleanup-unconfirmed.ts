import { heartbeat, prepare, rejected, SessionA, SessionB, status } from "./Fixtures.js"
import { advance, check, connect, scenario } from "./WireScenario.js"

export default scenario({
  name: "preparation-cleanup-unconfirmed",
  description:
    "A failed preparation whose native close fails is not left preparing: the Runtime reports unconfirmed cleanup " +
    "at once (failed with executor_cleanup_unconfirmed) while keeping ownership, so the capacity stays held " +
    "(a new preparation is rejected with preparation_capacity) and the close is retried; when a retry confirms " +
    "the close it publishes the confirmed release (released, next revision) and the capacity returns.",
  sections: ["Failures, retries and cleanup", "Preparation and execution order"],
  replay: {
    runtime: { asserts: "failed/executor_cleanup_unconfirmed at once, capacity held, released (revision 3) exactly at the 500 ms retry" },
    core: { asserts: "the preparation subscription ends with failed; the later release changes nothing" }
  },
  setup: { maxActive: 1 },
  steps: [
    connect(),
    heartbeat(),
    prepare("prep-1", SessionA, { scripted: { prepare: "fail_with_residue", close_fails: 1 } }),
    status("prep-1", 1, "preparing"),
    status("prep-1", 2, "failed", { error_code: "executor_cleanup_unconfirmed", granted: false }),
    check("runtime", { _tag: "CleanupUnconfirmed", kind: "executor", atLeastAttempts: 1 }),
    { ...prepare("prep-2", SessionB), sides: ["runtime"], note: "the unconfirmed cleanup still holds the only slot" },
    { ...rejected("prep-2", "execution_prepare", "preparation_capacity"), sides: ["runtime"] },
    advance("499 millis"),
    check("runtime", { _tag: "CleanupUnconfirmed", kind: "executor", atLeastAttempts: 1 }),
    advance("1 millis"),
    status("prep-1", 3, "released", { granted: false }),
    check("runtime", { _tag: "CleanupConfirmed" }),
    check("core", { _tag: "PreparationObserved", request: "prep-1", states: ["preparing", "failed"] })
  ]
})
