import { deltaFrame, plainHeartbeat, promptRequest, script } from "./Fixtures.js"
import { bind, check, connect, core, runtime, runtimeStep, scenario, settle, silence } from "./WireScenario.js"

const cancelDelivery = bind("cancel.delivery_id", "cancel-1")

export default scenario({
  name: "cancellation-settles-without-done",
  description:
    "A cancellation receipt may settle a Run without any done: then the receipt's outcome carries the stopped " +
    "Turn's confirmed continuity snapshot (partial content, native Session). Core takes the terminal outcome " +
    "from the receipt and never waits for, or invents, a done.",
  sections: ["Active input receipts", "What each acknowledgement proves"],
  replay: {
    runtime: { skip: "the daemon always publishes done before the receipt (pinned by cancellation-waits-for-settlement)" },
    core: { asserts: "the cancellation is confirmed by the receipt alone; no done is invented" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest("run-1", script({ cancel_settles_on: "settle" }, { delta: "partial" }, { hang: true }), { observeMessages: false }),
    runtimeStep(deltaFrame("run-1", "partial", 1)),
    core({ type: "prompt_cancel", id: "run-1", payload: { delivery_id: cancelDelivery } }),
    silence("5 seconds"),
    settle("settle"),
    runtime({
      type: "interaction_decision_ack",
      id: "run-1",
      payload: {
        delivery_id: cancelDelivery,
        applied: true,
        outcome: { content: "partial", metadata: { agent_session_id: "scripted-session", agent_session_type: "scripted" } }
      }
    }),
    silence("1 minute", { note: "no done follows" }),
    check("core", { _tag: "CancelOutcome", run: "run-1", outcome: "confirmed" }),
    check("core", { _tag: "TurnResolved", run: "run-1", status: "cancelled" })
  ]
})
