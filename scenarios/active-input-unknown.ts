import { plainHeartbeat, promptRequest, script, text } from "./Fixtures.js"
import { advance, check, connect, core, scenario, silence } from "./WireScenario.js"

export default scenario({
  name: "active-input-unknown",
  description:
    "Core waits at most 30 seconds from delivery for the written receipt; without it the input outcome is " +
    "unknown (a timeout after dispatch is never a failure) and the input cursor does not move.",
  sections: ["Active input receipts"],
  replay: {
    runtime: { skip: "Core's timer; the Runtime's write bound is pinned by active-input-write-timeout" },
    core: { asserts: "the input is pending 1 ms before 30 s and unknown at 30 s" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest("run-1", script({ hang: true }), { observeMessages: false }),
    core({ type: "prompt_steer", id: "run-1", payload: { input_id: "1", input: text("also add tests"), durable_receipt: true } }),
    silence("29999 millis"),
    check("core", { _tag: "InputOutcome", run: "run-1", input: "1", outcome: "pending" }),
    advance("1 millis"),
    check("core", { _tag: "InputOutcome", run: "run-1", input: "1", outcome: "unknown" })
  ]
})
