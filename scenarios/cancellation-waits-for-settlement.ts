import {
  completeMessage,
  deltaFrame,
  heartbeat,
  openMessage,
  prepare,
  script,
  SessionA,
  start,
  status,
  statusFrame
} from "./Fixtures.js"
import { bind, check, connect, core, interleave, runtime, scenario, settle, silence } from "./WireScenario.js"

const cancelDelivery = bind("cancel.delivery_id", "cancel-1")

export default scenario({
  name: "cancellation-waits-for-settlement",
  description:
    "Once prompt_cancel is sent, its receipt owns the terminal outcome: the Runtime sends nothing until native " +
    "settlement, then a done may close the settled stream, and the receipt (applied only after settlement) " +
    "carries the stopped Turn's continuity snapshot. A done after cancellation does not imply success.",
  sections: ["Active input receipts", "What each acknowledgement proves"],
  replay: {
    runtime: { asserts: "silence while the native cancel is unsettled, then done and the applied receipt with the snapshot" },
    core: { asserts: "Core records the cancellation as confirmed by its receipt; the Run subscription ends after done" }
  },
  steps: [
    connect(),
    heartbeat(),
    prepare("prep-1", SessionA),
    status("prep-1", 1, "preparing"),
    status("prep-1", 2, "ready"),
    start("prep-1", "run-1", script({ cancel_settles_on: "settle" }, { delta: "partial" }, { hang: true })),
    status("prep-1", 3, "starting", { run_id: "run-1" }),
    interleave([
      [statusFrame("prep-1", 4, "started", { run_id: "run-1" })],
      [openMessage("run-1", 1), deltaFrame("run-1", "partial", 1, 1), completeMessage("run-1", 1, "partial")]
    ]),
    core({ type: "prompt_cancel", id: "run-1", payload: { delivery_id: cancelDelivery } }),
    silence("5 seconds", { note: "cancellation waits for native settlement" }),
    settle("settle"),
    runtime({ type: "done", id: "run-1", payload: { content: "" } }, { note: "the receipt carries the snapshot; done closes the stream" }),
    runtime({
      type: "interaction_decision_ack",
      id: "run-1",
      payload: {
        delivery_id: cancelDelivery,
        applied: true,
        outcome: {
          content: "partial",
          metadata: { agent_session_id: bind("native-session", "scripted-executor-1"), agent_session_type: "scripted" }
        }
      }
    }),
    check("core", { _tag: "CancelOutcome", run: "run-1", outcome: "confirmed" }),
    check("core", { _tag: "TurnResolved", run: "run-1", status: "cancelled" }, "the done after the cancellation does not make it completed"),
    check("core", { _tag: "RunCompleted", run: "run-1", events: ["output_message", "delta", "output_message", "done"] }),
    check("runtime", { _tag: "NoRuns" })
  ]
})
