import { deltaFrame, doneFrame, plainHeartbeat, promptRequest, script, text } from "./Fixtures.js"
import { any, check, connect, core, frame, interleave, optional, runtime, scenario } from "./WireScenario.js"

const steer = (inputId: string, s: string) =>
  core({ type: "prompt_steer", id: "run-1", payload: { input_id: inputId, input: text(s), durable_receipt: true } })
const written = (inputId: string) =>
  frame({ type: "prompt_steer_ack", id: "run-1", payload: { input_id: inputId, accepted: false, written: true } })
const accepted = (inputId: string) => frame({ type: "prompt_steer_ack", id: "run-1", payload: { input_id: inputId, accepted: true } })

export default scenario({
  name: "duplicate-and-stale-receipts",
  description:
    "Duplicate input follows the family's receipt identity and conflict rules, with no transport-wide " +
    "deduplication: the same input id with the same content returns the stored final receipt without a second " +
    "native write; with other content it is input_conflict. On Core's side a repeated or unknown receipt " +
    "correlates with nothing and changes no outcome.",
  sections: ["Active input receipts", "Failures, retries and cleanup"],
  replay: {
    runtime: { asserts: "one native write per input id; the duplicate gets the stored accepted receipt, the conflict input_conflict" },
    core: { asserts: "each input is accepted exactly once; the repeated and the unknown receipt change nothing" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest("run-1", script({ await_steer: 1 }, { await_steer: 1 }), { observeMessages: false }),
    steer("1", "first"),
    interleave([[written("1"), accepted("1")], [deltaFrame("run-1", "first", 1)]]),
    { ...steer("1", "first"), sides: ["runtime"], note: "identical repeat: the stored final receipt" },
    { ...runtime({ type: "prompt_steer_ack", id: "run-1", payload: { input_id: "1", accepted: true } }), sides: ["runtime"] },
    { ...steer("1", "changed"), sides: ["runtime"], note: "same input id, other content" },
    {
      ...runtime({
        type: "prompt_steer_ack",
        id: "run-1",
        payload: { input_id: "1", accepted: false, error_code: "input_conflict", error: optional(any()) }
      }),
      sides: ["runtime"]
    },
    {
      ...runtime({ type: "prompt_steer_ack", id: "run-1", payload: { input_id: "1", accepted: true } }),
      sides: ["core"],
      note: "a repeated receipt"
    },
    {
      ...runtime({ type: "prompt_steer_ack", id: "run-1", payload: { input_id: "99", accepted: true } }),
      sides: ["core"],
      note: "a receipt for an input Core never sent"
    },
    check("core", { _tag: "InputOutcome", run: "run-1", input: "1", outcome: "accepted" }),
    steer("2", "second"),
    interleave([[written("2"), accepted("2")], [deltaFrame("run-1", "second", 2), doneFrame("run-1", "firstsecond")]]),
    check("core", { _tag: "InputOutcome", run: "run-1", input: "2", outcome: "accepted" }),
    check("runtime", { _tag: "NoRuns" })
  ]
})
