import { deltaFrame, doneFrame, plainHeartbeat, promptRequest, script } from "./Fixtures.js"
import { any, bind, connect, core, frame, interleave, optional, raw, runtime, scenario, silence } from "./WireScenario.js"

const questions = [
  { id: "q1", question: "Which branch?", options: [{ label: "main" }, { label: "dev" }] },
  { id: "q2", question: "Why?", options: [] }
]
const invalid = (delivery: string) =>
  runtime(
    {
      type: "interaction_decision_ack",
      id: "ask-b",
      payload: { delivery_id: delivery, applied: false, error_code: "invalid_decision", error: optional(any()) }
    },
    { sides: ["runtime"] }
  )
const decision = (delivery: string, payload: { readonly cancelled?: boolean; readonly question_answers?: ReadonlyArray<{ readonly question_id: string; readonly answers: ReadonlyArray<string> }> }, issue: string) =>
  core({ type: "prompt_for_user_choice_decision", id: "ask-b", payload: { delivery_id: delivery, ...payload } }, {
    refusedByCore: issue,
    note: `Core's validator refuses it (${issue}); the Runtime answers invalid_decision`
  })
const cancelDelivery = bind("ask-b.delivery_id", "d-9")

export default scenario({
  name: "interaction-decisions-invalid",
  description:
    "The shared user-choice validator rejects every invalid shape before native submission: a cancellation with " +
    "answers, a repeated, blank or unknown question id. Core refuses to send them; a Runtime that receives them " +
    "answers invalid_decision. A decision that does not decode strictly, or has no delivery id, gets no receipt. " +
    "A decision for an interaction that is not pending is not_pending. The ask then still accepts a valid cancellation.",
  sections: ["Envelope and identity"],
  replay: {
    runtime: { asserts: "invalid_decision for each invalid shape, no receipt for undecodable ones, not_pending, then the cancellation applies" },
    core: { asserts: "Core refuses each invalid shape locally and sends nothing; the valid cancellation is applied" }
  },
  steps: [
    connect(),
    ...plainHeartbeat(),
    promptRequest("run-1", script({ ask: { ask_id: "ask-b", questions } }), { observeMessages: false }),
    runtime({ type: "prompt_for_user_choice", id: "run-1", payload: { ask_id: "ask-b", questions } }),
    decision("d-1", { cancelled: true, question_answers: [{ question_id: "q1", answers: ["main"] }] }, "cancelled_with_answers"),
    invalid("d-1"),
    decision("d-2", { question_answers: [{ question_id: "q1", answers: ["main"] }, { question_id: "q1", answers: ["dev"] }] }, "duplicate_question_id"),
    invalid("d-2"),
    decision("d-3", { question_answers: [{ question_id: "q9", answers: ["x"] }] }, "unknown_question_id"),
    invalid("d-3"),
    decision("d-4", { question_answers: [{ question_id: " ", answers: [] }] }, "blank_question_id"),
    invalid("d-4"),
    raw("core", JSON.stringify({ type: "prompt_for_user_choice_decision", id: "ask-b", payload: { delivery_id: "d-5", answers: ["main"] } }), {
      note: "the pre-0.10 top-level answers member fails the strict decoder: no receipt"
    }),
    raw("core", JSON.stringify({ type: "prompt_for_user_choice_decision", id: "ask-b", payload: { question_answers: [] } }), {
      note: "no delivery id: no receipt"
    }),
    silence("1 second"),
    { ...core({ type: "permission_decision", id: "perm-zz", payload: { delivery_id: "d-6", approved: true } }), sides: ["runtime"] },
    {
      ...runtime({
        type: "interaction_decision_ack",
        id: "perm-zz",
        payload: { delivery_id: "d-6", applied: false, error_code: "not_pending", error: optional(any()) }
      }),
      sides: ["runtime"]
    },
    core({ type: "prompt_for_user_choice_decision", id: "ask-b", payload: { delivery_id: cancelDelivery, cancelled: true, reason: "timeout" } }),
    interleave([
      [frame({ type: "interaction_decision_ack", id: "ask-b", payload: { delivery_id: cancelDelivery, applied: true } })],
      [deltaFrame("run-1", "answer ask-b: cancelled", 1), doneFrame("run-1", "answer ask-b: cancelled")]
    ])
  ]
})
