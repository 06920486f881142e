import { deltaFrame, doneFrame, plainHeartbeat, promptRequest, script } from "./Fixtures.js"
import { any, bind, type Bind, check, connect, core, frame, interleave, optional, raw, runtime, scenario } from "./WireScenario.js"

const functionTools = [{ name: "lookup", description: "Find a ticket", parameters: { type: "object" } }]
const deliveryA = bind("call-a.delivery_id", "function:call-a")
const deliveryB = bind("call-b.delivery_id", "function:call-b")
const resultA = { call_id: "call-a", success: true, content: [{ type: "input_text", text: "open" }] } as const
const ack = (delivery: string | Bind<string>, applied: boolean, code?: "decision_conflict" | "not_pending" | "invalid_result") =>
  frame({
    type: "interaction_decision_ack",
    id: "run-1",
    payload: code === undefined ? { delivery_id: delivery, applied } : { delivery_id: delivery, applied, error_code: code, error: optional(any()) }
  })

export default scenario({
  name: "function-results",
  description:
    "A function_call travels under the Run id with its native call id; Core answers with function_result (ordered " +
    "content, may be empty) and the Runtime acknowledges under the Run id with the delivery id. Replay identity is " +
    "(Run id, call id) plus the content: an identical retry is applied again, changed content is decision_conflict, " +
    "an unknown call is not_pending, and a result whose content does not decode is invalid_result when its call and " +
    "delivery ids can be read (the call stays pending). Call ids, delivery ids and input ids are never interchangeable.",
  sections: ["Envelope and identity", "Message families"],
  replay: {
    runtime: { asserts: "each result acknowledged under the Run id; replay, conflict, unknown-call and undecodable-content codes" },
    core: { asserts: "both results are applied" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest(
      "run-1",
      script(
        { function_call: { call_id: "call-a", name: "lookup", arguments: { id: "T-1" } } },
        { function_call: { call_id: "call-b", name: "lookup", arguments: { id: "T-2" } } }
      ),
      { observeMessages: false, functionTools }
    ),
    runtime({ type: "function_call", id: "run-1", payload: { call_id: "call-a", name: "lookup", arguments: { id: "T-1" } } }),
    core({ type: "function_result", id: "run-1", payload: { delivery_id: deliveryA, ...resultA } }),
    interleave([
      [ack(deliveryA, true)],
      [
        deltaFrame("run-1", "result call-a ok: open", 1),
        frame({ type: "function_call", id: "run-1", payload: { call_id: "call-b", name: "lookup", arguments: { id: "T-2" } } })
      ]
    ]),
    { ...core({ type: "function_result", id: "run-1", payload: { delivery_id: "function:call-a#2", ...resultA } }), sides: ["runtime"], note: "identical retry" },
    { _tag: "Runtime", message: ack("function:call-a#2", true), sides: ["runtime"] },
    {
      ...core({ type: "function_result", id: "run-1", payload: { delivery_id: "function:call-a#3", call_id: "call-a", success: false, content: [] } }),
      sides: ["runtime"],
      note: "changed result"
    },
    { _tag: "Runtime", message: ack("function:call-a#3", false, "decision_conflict"), sides: ["runtime"] },
    {
      ...core({ type: "function_result", id: "run-1", payload: { delivery_id: "function:call-z", call_id: "call-z", success: true, content: [] } }),
      sides: ["runtime"],
      note: "a call that never happened"
    },
    { _tag: "Runtime", message: ack("function:call-z", false, "not_pending"), sides: ["runtime"] },
    raw("core", JSON.stringify({
      type: "function_result",
      id: "run-1",
      payload: { delivery_id: "function:call-b#0", call_id: "call-b", success: true, content: [{ type: "input_text" }] }
    }), { note: "content that does not decode (a text part without text)" }),
    { _tag: "Runtime", message: ack("function:call-b#0", false, "invalid_result"), sides: ["runtime"] },
    check("core", { _tag: "FunctionResultOutcome", run: "run-1", call: "call-a", outcome: "applied" }),
    core({
      type: "function_result",
      id: "run-1",
      payload: { delivery_id: deliveryB, call_id: "call-b", success: false, content: [{ type: "input_text", text: "not found" }] }
    }),
    interleave([
      [ack(deliveryB, true)],
      [deltaFrame("run-1", "result call-b failed: not found", 2), doneFrame("run-1", "result call-a ok: openresult call-b failed: not found")]
    ]),
    check("core", { _tag: "FunctionResultOutcome", run: "run-1", call: "call-b", outcome: "applied" })
  ]
})
