/**
 * Interactions (protocol "Envelope and identity", reference part 2 §3): permission requests and their
 * cancellation, user-choice questions, the decisions Core sends, and `interaction_decision_ack`, the one
 * receipt type shared by decisions, function results and cancellation receipts.
 *
 * Correlation: permission_request / prompt_for_user_choice travel under the Run id and carry the interaction
 * id in their payload; permission_cancel, both decisions and a decision's ack use the interaction id; a
 * cancellation or function-result ack uses the Run id. Every ack also matches the `delivery_id`. A reply
 * without the required correlation establishes nothing. `applied: true` proves the identified operation
 * settled (a cancellation also requires native settlement); nothing weaker ever becomes applied.
 */
import { Option, Schema } from "effect"
import { JsonObject, NonNegativeInt } from "./Checks.js"
import { AckErrorCode } from "./ErrorCodes.js"
import { DeliveryId, InteractionId } from "./Ids.js"
import { DonePayload } from "./RunEvents.js"

/** A native tool asks for approval. */
export const PermissionRequestPayload = Schema.Struct({
  request_id: InteractionId,
  tool: Schema.String,
  title: Schema.String,
  detail: Schema.optionalKey(Schema.String),
  payload: Schema.optionalKey(JsonObject)
})
export type PermissionRequestPayload = typeof PermissionRequestPayload.Type

/** Core's answer to a permission request. */
export const PermissionDecisionPayload = Schema.Struct({
  delivery_id: DeliveryId,
  approved: Schema.Boolean,
  message: Schema.optionalKey(Schema.String),
  updated_input: Schema.optionalKey(JsonObject)
})
export type PermissionDecisionPayload = typeof PermissionDecisionPayload.Type

export const QuestionOption = Schema.Struct({
  label: Schema.String,
  description: Schema.optionalKey(Schema.String)
})
export type QuestionOption = typeof QuestionOption.Type

/** A question. `id` identifies it; `header` is display only and never identifies an answer. */
export const Question = Schema.Struct({
  id: Schema.NonEmptyString,
  header: Schema.optionalKey(Schema.String),
  question: Schema.String,
  multi_select: Schema.optionalKey(Schema.Boolean),
  is_other: Schema.optionalKey(Schema.Boolean),
  is_secret: Schema.optionalKey(Schema.Boolean),
  options: Schema.Array(QuestionOption)
})
export type Question = typeof Question.Type

/** The Runtime asks the user to choose. Question ids are unique within one ask. */
export const UserChoicePayload = Schema.Struct({
  ask_id: InteractionId,
  questions: Schema.Array(Question).check(
    Schema.makeFilter((qs) => new Set(qs.map((q) => q.id)).size === qs.length, { expected: "unique question ids" })
  ),
  tool_use_id: Schema.optionalKey(Schema.String),
  auto_resolution_ms: Schema.optionalKey(NonNegativeInt)
})
export type UserChoicePayload = typeof UserChoicePayload.Type

/** One explicitly identified answer. `answers: []` is an explicit non-answer. */
export const QuestionAnswer = Schema.Struct({
  question_id: Schema.String,
  answers: Schema.Array(Schema.String)
})
export type QuestionAnswer = typeof QuestionAnswer.Type

/** Core's answer to a user-choice ask; always decoded strictly, including inside `question_answers`. */
export const UserChoiceDecisionPayload = Schema.Struct({
  delivery_id: DeliveryId,
  question_answers: Schema.optionalKey(Schema.Array(QuestionAnswer)),
  cancelled: Schema.optionalKey(Schema.Boolean),
  reason: Schema.optionalKey(Schema.String)
})
export type UserChoiceDecisionPayload = typeof UserChoiceDecisionPayload.Type

/** The application receipt of a decision, function result or cancellation. */
export const InteractionDecisionAckPayload = Schema.Struct({
  delivery_id: DeliveryId,
  applied: Schema.Boolean,
  error_code: Schema.optionalKey(AckErrorCode),
  error: Schema.optionalKey(Schema.String),
  /** Only on cancellation receipts: the stopped Turn's confirmed continuity snapshot when no done carries it. */
  outcome: Schema.optionalKey(DonePayload)
}).check(
  Schema.makeFilter((ack) => !(ack.applied && ack.error_code !== undefined), {
    expected: "no error_code on an applied receipt"
  })
)
export type InteractionDecisionAckPayload = typeof InteractionDecisionAckPayload.Type

// ---------------------------------------------------------------------------------------------- validators

/** Why a user-choice decision has an invalid shape. */
export type DecisionIssue =
  | "cancelled_with_answers" // a cancellation carries no answers
  | "blank_question_id"
  | "duplicate_question_id"
  | "unknown_question_id" // not one of the emitted questions

/**
 * The shared user-choice decision rule, checked before any native submission: a cancellation carries no
 * answers; every question_id is non-blank and unique; when `emittedQuestionIds` is given (binding to a
 * pending ask) every id must belong to it. Order and headers never identify answers; an omitted question
 * stays unanswered; `answers: []` is an explicit non-answer.
 */
export const validateUserChoiceDecision = (
  decision: UserChoiceDecisionPayload,
  emittedQuestionIds?: ReadonlyArray<string>
): Option.Option<DecisionIssue> => {
  const answers = decision.question_answers ?? []
  if (decision.cancelled === true && answers.length > 0) return Option.some("cancelled_with_answers")
  const seen = new Set<string>()
  const emitted = emittedQuestionIds === undefined ? undefined : new Set(emittedQuestionIds)
  for (const answer of answers) {
    if (answer.question_id.trim().length === 0) return Option.some("blank_question_id")
    if (seen.has(answer.question_id)) return Option.some("duplicate_question_id")
    seen.add(answer.question_id)
    if (emitted !== undefined && !emitted.has(answer.question_id)) return Option.some("unknown_question_id")
  }
  return Option.none()
}

/** Answers keyed by question id; questions without an entry stay unanswered. */
export const answersByQuestion = (
  decision: UserChoiceDecisionPayload
): ReadonlyMap<string, ReadonlyArray<string>> =>
  new Map((decision.question_answers ?? []).map((a) => [a.question_id, a.answers] as const))
