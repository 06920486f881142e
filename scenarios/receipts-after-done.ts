import { deltaFrame, doneFrame, plainHeartbeat, promptRequest, script, text } from "./Fixtures.js"
import { advance, any, check, connect, core, frame, interleave, optional, runtime, scenario } from "./WireScenario.js"

const steer = (inputId: string, s: string) =>
  core({ type: "prompt_steer", id: "run-1", payload: { input_id: inputId, input: text(s), durable_receipt: true } })
const written = (inputId: string) =>
  frame({ type: "prompt_steer_ack", id: "run-1", payload: { input_id: inputId, accepted: false, written: true } })
const accepted = (inputId: string) => frame({ type: "prompt_steer_ack", id: "run-1", payload: { input_id: inputId, accepted: true } })
const inactive = (inputId: string) =>
  runtime({
    type: "prompt_steer_ack",
    id: "run-1",
    payload: { input_id: inputId, accepted: false, error_code: "run_inactive", error: optional(any()) }
  })

export default scenario({
  name: "receipts-after-done",
  description:
    "A Run's receipt records outlive its done for a bounded time: an input accepted just before done and resent " +
    "afterwards (Core lost the final receipt) gets its stored receipt, not run_inactive, which Core would read as " +
    "not applied; a new input id gets run_inactive. The records are kept five minutes after done: the repeat is " +
    "answered at 4:59.999 and is run_inactive at 5:00.",
  sections: ["Active input receipts", "Failures, retries and cleanup"],
  replay: {
    runtime: { asserts: "the stored accepted receipt after done until exactly 5 minutes, run_inactive for a new id and after" },
    core: { asserts: "the input is accepted once" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest("run-1", script({ await_steer: 1 }), { observeMessages: false }),
    steer("1", "last words"),
    interleave([[written("1"), accepted("1")], [deltaFrame("run-1", "last words", 1), doneFrame("run-1", "last words")]]),
    check("core", { _tag: "InputOutcome", run: "run-1", input: "1", outcome: "accepted" }),
    { ...steer("1", "last words"), sides: ["runtime"], note: "Core lost the final receipt and resends after done" },
    { ...runtime({ type: "prompt_steer_ack", id: "run-1", payload: { input_id: "1", accepted: true } }), sides: ["runtime"] },
    { ...steer("2", "too late"), sides: ["runtime"], note: "a new input id after done" },
    { ...inactive("2"), sides: ["runtime"] },
    advance("299999 millis"),
    { ...steer("1", "last words"), sides: ["runtime"], note: "one millisecond before the records expire" },
    { ...runtime({ type: "prompt_steer_ack", id: "run-1", payload: { input_id: "1", accepted: true } }), sides: ["runtime"] },
    advance("1 millis"),
    { ...steer("1", "last words"), sides: ["runtime"], note: "five minutes after done: the records are gone" },
    { ...inactive("1"), sides: ["runtime"] },
    check("runtime", { _tag: "NoRuns" })
  ]
})
