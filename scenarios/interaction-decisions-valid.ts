import { deltaFrame, doneFrame, plainHeartbeat, promptRequest, script } from "./Fixtures.js"
import { any, bind, check, connect, core, frame, interleave, optional, runtime, scenario } from "./WireScenario.js"

const questions = [
  { id: "q1", header: "Target", question: "Which branch?", options: [{ label: "main" }, { label: "dev", description: "unstable" }] },
  { id: "q2", question: "Anything else?", options: [] }
]
const permDelivery = bind("perm-a.delivery_id", "d-1")
const askDelivery = bind("ask-a.delivery_id", "d-4")

export default scenario({
  name: "interaction-decisions-valid",
  description:
    "Interactions travel under the Run id and carry their interaction id; decisions and their receipts use the " +
    "interaction id and echo the delivery id. applied: true only once the decision settled. A retry of an applied " +
    "decision with identical content and a new delivery id is applied again; changed content is decision_conflict. " +
    "User-choice answers name their question ids; an empty answers array is an explicit non-answer.",
  sections: ["Envelope and identity", "Message families"],
  replay: {
    runtime: { asserts: "each decision is acknowledged under its interaction id with its delivery id; replay and conflict rules hold" },
    core: { asserts: "both decisions are applied; a repeated receipt for a settled delivery changes nothing" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest(
      "run-1",
      script({ permission: { request_id: "perm-a", tool: "shell", title: "Run ls" } }, { ask: { ask_id: "ask-a", questions } }),
      { observeMessages: false }
    ),
    runtime({ type: "permission_request", id: "run-1", payload: { request_id: "perm-a", tool: "shell", title: "Run ls" } }),
    core({ type: "permission_decision", id: "perm-a", payload: { delivery_id: permDelivery, approved: true } }),
    interleave([
      [frame({ type: "interaction_decision_ack", id: "perm-a", payload: { delivery_id: permDelivery, applied: true } })],
      [
        deltaFrame("run-1", "permission perm-a: approved", 1),
        frame({ type: "prompt_for_user_choice", id: "run-1", payload: { ask_id: "ask-a", questions } })
      ]
    ]),
    { ...core({ type: "permission_decision", id: "perm-a", payload: { delivery_id: "d-2", approved: true } }), sides: ["runtime"], note: "identical retry" },
    {
      ...runtime({ type: "interaction_decision_ack", id: "perm-a", payload: { delivery_id: "d-2", applied: true } }),
      sides: ["runtime"]
    },
    { ...core({ type: "permission_decision", id: "perm-a", payload: { delivery_id: "d-3", approved: false } }), sides: ["runtime"], note: "changed decision" },
    {
      ...runtime({
        type: "interaction_decision_ack",
        id: "perm-a",
        payload: { delivery_id: "d-3", applied: false, error_code: "decision_conflict", error: optional(any()) }
      }),
      sides: ["runtime"]
    },
    {
      ...runtime({ type: "interaction_decision_ack", id: "perm-a", payload: { delivery_id: permDelivery, applied: true } }),
      sides: ["core"],
      note: "a repeated receipt for a settled delivery"
    },
    check("core", { _tag: "DecisionOutcome", interaction: "perm-a", outcome: "applied" }),
    core({
      type: "prompt_for_user_choice_decision",
      id: "ask-a",
      payload: { delivery_id: askDelivery, question_answers: [{ question_id: "q1", answers: ["main"] }, { question_id: "q2", answers: [] }] }
    }),
    interleave([
      [frame({ type: "interaction_decision_ack", id: "ask-a", payload: { delivery_id: askDelivery, applied: true } })],
      [
        deltaFrame("run-1", "answer ask-a: q1=main; q2=", 2),
        doneFrame("run-1", "permission perm-a: approvedanswer ask-a: q1=main; q2=")
      ]
    ]),
    check("core", { _tag: "DecisionOutcome", interaction: "ask-a", outcome: "applied" })
  ]
})
