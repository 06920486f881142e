import { deltaFrame, doneFrame, plainHeartbeat, promptRequest, script, text } from "./Fixtures.js"
import { check, connect, core, frame, interleave, scenario } from "./WireScenario.js"

export default scenario({
  name: "active-input-written-accepted",
  description:
    "Core delivers active input as prompt_steer with durable_receipt and waits for its receipts: written proves " +
    "only the native write (the cursor does not move), accepted proves native consumption (the cursor moves). " +
    "Before done the Runtime waits for the in-flight input.",
  sections: ["Active input receipts", "What each acknowledgement proves"],
  replay: {
    runtime: { asserts: "written, then accepted for the input; its echo and done on the Run stream" },
    core: { asserts: "the input outcome is accepted (written alone never advanced it)" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest("run-1", script({ await_steer: 1 }), { observeMessages: false }),
    core({ type: "prompt_steer", id: "run-1", payload: { input_id: "1", input: text("also add tests"), durable_receipt: true } }),
    interleave([
      [
        frame({ type: "prompt_steer_ack", id: "run-1", payload: { input_id: "1", accepted: false, written: true } }),
        frame({ type: "prompt_steer_ack", id: "run-1", payload: { input_id: "1", accepted: true } })
      ],
      [deltaFrame("run-1", "also add tests", 1), doneFrame("run-1", "also add tests")]
    ]),
    check("core", { _tag: "InputOutcome", run: "run-1", input: "1", outcome: "accepted" }),
    check("runtime", { _tag: "NoRuns" })
  ]
})
