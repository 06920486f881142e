import { plainHeartbeat, promptRequest, script, text } from "./Fixtures.js"
import { advance, any, check, connect, core, optional, runtime, scenario, silence } from "./WireScenario.js"

export default scenario({
  name: "active-input-write-timeout",
  description:
    "The Runtime bounds the adapter's native write of an active input at 10 seconds; a write that does not " +
    "finish is reported outcome_unknown (the input may or may not have been applied) and is never redelivered.",
  sections: ["Active input receipts"],
  replay: {
    runtime: { asserts: "no receipt until 10 s, then outcome_unknown exactly at 10 s" },
    core: { asserts: "the input outcome becomes unknown, never failed" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest("run-1", script({ await_steer: 1, write: "hang" }, { hang: true }), { observeMessages: false }),
    core({ type: "prompt_steer", id: "run-1", payload: { input_id: "1", input: text("also add tests"), durable_receipt: true } }),
    silence("9999 millis"),
    advance("1 millis"),
    runtime({
      type: "prompt_steer_ack",
      id: "run-1",
      payload: { input_id: "1", accepted: false, error_code: "outcome_unknown", error: optional(any()) }
    }),
    check("core", { _tag: "InputOutcome", run: "run-1", input: "1", outcome: "unknown" }),
    check("runtime", { _tag: "RunOwned", run: "run-1" })
  ]
})
