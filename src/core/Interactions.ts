/**
 * Core's side of interactions (protocol "Envelope and identity", "What each acknowledgement proves";
 * reference part 2 §3): answering `permission_request` with `permission_decision` and
 * `prompt_for_user_choice` with `prompt_for_user_choice_decision`, and the shared waiter for
 * `interaction_decision_ack` that function results and cancellation receipts use too.
 *
 * Correlation: a decision's envelope carries the interaction id; its ack must match the delivery id (the
 * Correlator key) and the interaction id (the ack's envelope id). A reply without both establishes nothing
 * and is ignored. `applied: true` proves the operation settled; a missing ack within 15 s is
 * `InteractionAckUnknown` (the interaction stays retryable; success is never inferred); `applied: false`
 * is the definite `InteractionRejected{code}`.
 *
 * Never: send a user-choice decision that fails the shared validator against the emitted questions; treat a
 * local timeout or interruption as a rejection; retry a decision automatically.
 */
import { Duration, Effect, Option, Queue, Result, Schema, type Scope, Stream } from "effect"
import { ErrorCodes, Ids, Interaction, Limits, Messages } from "../proto/index.js"
import type { DeviceSession, RunEvent } from "./DeviceSession.js"
import { type NotSent, receiptLoss, type SubscriptionRejected } from "./Errors.js"
import {
  type AckUnknownReason,
  DecisionInvalid,
  InteractionAckUnknown,
  InteractionRejected
} from "./Outcome.js"

// ---------------------------------------------------------------------------------------------- shared ack waiter

/** Why an acknowledgement wait ended without a correlated receipt. */
export interface AckMissing {
  readonly _tag: "AckMissing"
  readonly reason: AckUnknownReason
}

/** A registered waiter for one delivery id whose ack must carry `subject` as its envelope id. */
export interface AckWaiter {
  /**
   * Waits at most `budget` for the first correlated ack. A receipt that raced the deadline wins. Fails with
   * `AckMissing` (no receipt, connection lost, overflow): the effect of the request is unknown.
   */
  readonly await: (budget: Duration.Input) => Effect.Effect<Interaction.InteractionDecisionAckPayload, AckMissing>
}

/** Turns a few scheduler passes before the last poll, so a receipt already routed is seen. */
const raceWindow = Effect.repeat(Effect.yieldNow, { times: 16 })

/**
 * Registers for the `interaction_decision_ack` of one delivery id before the request is sent (subscribe
 * before sending). The waiter lives in the caller's scope; closing it unsubscribes and settles nothing.
 * Fails with `SubscriptionRejected` (definite, nothing sent) for a duplicate pending delivery id.
 */
export const registerAck = (
  session: DeviceSession,
  deliveryId: Ids.DeliveryId,
  subject: string
): Effect.Effect<AckWaiter, SubscriptionRejected, Scope.Scope> =>
  Effect.gen(function*() {
    const replies = yield* session.expectReplies("interaction_decision_ack", deliveryId)
    const queue = yield* Stream.toQueue(replies, { capacity: "unbounded" })
    const correlated = (m: Messages.MessageOfType<"interaction_decision_ack">) =>
      m.id === subject && m.payload.delivery_id === deliveryId
    const missing = (reason: AckUnknownReason): AckMissing => ({ _tag: "AckMissing", reason })
    const next: Effect.Effect<Interaction.InteractionDecisionAckPayload, AckMissing> = Effect.flatMap(
      Effect.mapError(Queue.take(queue), (e) => missing(receiptLoss(e))),
      // A reply without the required correlation establishes nothing: keep waiting.
      (m) => (correlated(m) ? Effect.succeed(m.payload) : Effect.suspend(() => next))
    )
    const pollOnce: Effect.Effect<Interaction.InteractionDecisionAckPayload, AckMissing> = Effect.gen(function*() {
      yield* raceWindow
      while (true) {
        const polled = yield* Queue.poll(queue)
        if (Option.isNone(polled)) return yield* Effect.fail(missing("no_receipt"))
        if (correlated(polled.value)) return polled.value.payload
      }
    })
    return {
      await: (budget) => Effect.timeoutOrElse(next, { duration: budget, orElse: () => pollOnce })
    }
  })

// ---------------------------------------------------------------------------------------------- decisions

/** `applied: true`: the identified decision settled in the Runtime. */
export interface DecisionApplied {
  readonly interaction_id: Ids.InteractionId
  readonly delivery_id: Ids.DeliveryId
}

export type DecisionError = NotSent | SubscriptionRejected | InteractionRejected | InteractionAckUnknown

const decisionOutcome = (
  interactionId: Ids.InteractionId,
  deliveryId: Ids.DeliveryId,
  waiter: AckWaiter
): Effect.Effect<DecisionApplied, InteractionRejected | InteractionAckUnknown> =>
  waiter.await(Limits.InteractionAckBudget).pipe(
    Effect.mapError((m) => new InteractionAckUnknown({ interaction_id: interactionId, delivery_id: deliveryId, reason: m.reason })),
    Effect.flatMap((ack) =>
      ack.applied
        ? Effect.succeed({ interaction_id: interactionId, delivery_id: deliveryId })
        : Effect.fail(
          new InteractionRejected({
            interaction_id: interactionId,
            delivery_id: deliveryId,
            code: decisionCode(ack.error_code)
          })
        )
    )
  )

const decisionCodes: ReadonlySet<string> = new Set(ErrorCodes.DecisionErrorCode.literals)
/** A decision ack's code; a code of another family (a Runtime bug) reads as runtime_error. */
const decisionCode = (code: ErrorCodes.AckErrorCode | undefined): ErrorCodes.DecisionErrorCode =>
  code !== undefined && decisionCodes.has(code) ? (code as ErrorCodes.DecisionErrorCode) : "runtime_error"

/** Registers, sends, waits: the dispatch boundary is the send. */
const sendDecision = (
  session: DeviceSession,
  interactionId: Ids.InteractionId,
  deliveryId: Ids.DeliveryId,
  message: Messages.CoreToRuntime
): Effect.Effect<DecisionApplied, DecisionError> =>
  Effect.scoped(
    Effect.gen(function*() {
      // Before dispatch: every failure is definite.
      const waiter = yield* registerAck(session, deliveryId, interactionId)
      yield* session.send(message)
      // After dispatch: no ack is unknown, never a failure.
      return yield* decisionOutcome(interactionId, deliveryId, waiter)
    })
  )

export interface PermissionAnswer {
  readonly interaction_id: Ids.InteractionId
  readonly delivery_id: Ids.DeliveryId
  readonly approved: boolean
  readonly message?: string
  readonly updated_input?: Interaction.PermissionDecisionPayload["updated_input"]
}

/**
 * Answers a permission request. Success proves the Runtime applied the decision. `InteractionRejected` is
 * the Runtime's definite `applied: false`; `InteractionAckUnknown` means no correlated ack within 15 s or
 * the connection ended (the decision may or may not have applied; the interaction stays retryable with a
 * new delivery id); `NotSent` / `SubscriptionRejected` mean nothing was sent.
 */
export const answerPermission = Effect.fn("Interactions.answerPermission")(function*(
  session: DeviceSession,
  answer: PermissionAnswer
) {
  const payload: Interaction.PermissionDecisionPayload = {
    delivery_id: answer.delivery_id,
    approved: answer.approved,
    ...(answer.message === undefined ? {} : { message: answer.message }),
    ...(answer.updated_input === undefined ? {} : { updated_input: answer.updated_input })
  }
  return yield* sendDecision(session, answer.interaction_id, answer.delivery_id, {
    type: "permission_decision",
    id: answer.interaction_id,
    payload
  })
})

const decodeDecision = Schema.decodeUnknownResult(Interaction.UserChoiceDecisionPayload, { onExcessProperty: "error" })

/**
 * Validates a user-choice decision against the ask it answers, before any send: the exact wire shape (strict;
 * `answers` present and an array for every answer), no answers with `cancelled: true`, non-blank unique
 * question ids that belong to the emitted questions. Order and headers never identify answers; an omitted
 * question stays unanswered; `answers: []` is an explicit non-answer.
 */
export const validateDecision = (
  ask: Interaction.UserChoicePayload,
  decision: unknown
): Result.Result<Interaction.UserChoiceDecisionPayload, DecisionInvalid> => {
  const decoded = decodeDecision(decision)
  if (Result.isFailure(decoded)) {
    return Result.fail(new DecisionInvalid({ interaction_id: ask.ask_id, issue: "invalid_shape" }))
  }
  const issue = Interaction.validateUserChoiceDecision(decoded.success, ask.questions.map((q) => q.id))
  return Option.isSome(issue)
    ? Result.fail(new DecisionInvalid({ interaction_id: ask.ask_id, issue: issue.value }))
    : Result.succeed(decoded.success)
}

/**
 * Answers a user-choice ask (`ask` is the emitted payload; its `ask_id` is the interaction id). The decision
 * is validated first (`DecisionInvalid`, nothing sent); then as `answerPermission`.
 */
export const answerUserChoice = Effect.fn("Interactions.answerUserChoice")(function*(
  session: DeviceSession,
  ask: Interaction.UserChoicePayload,
  decision: Interaction.UserChoiceDecisionPayload
) {
  const valid = validateDecision(ask, decision)
  if (Result.isFailure(valid)) return yield* valid.failure
  return yield* sendDecision(session, ask.ask_id, valid.success.delivery_id, {
    type: "prompt_for_user_choice_decision",
    id: ask.ask_id,
    payload: valid.success
  })
})

/** A user-choice cancellation (`cancelled: true`, no answers). */
export const cancelledDecision = (deliveryId: Ids.DeliveryId, reason?: string): Interaction.UserChoiceDecisionPayload => ({
  delivery_id: deliveryId,
  cancelled: true,
  ...(reason === undefined ? {} : { reason })
})

// ---------------------------------------------------------------------------------------------- pending interactions

/** An interaction the Runtime asked and has not withdrawn (Core's view, from the Run's events). */
export type PendingInteraction =
  | { readonly _tag: "Permission"; readonly run_id: Ids.RunId; readonly request: Interaction.PermissionRequestPayload }
  | { readonly _tag: "UserChoice"; readonly run_id: Ids.RunId; readonly ask: Interaction.UserChoicePayload }

/**
 * Folds a Run event into the pending interactions: a request or ask adds one (a repeated id replaces it), a
 * `permission_cancel` withdraws one (a later decision would get not_pending). Pure.
 */
export const trackInteractions = (
  pending: ReadonlyMap<string, PendingInteraction>,
  event: RunEvent
): ReadonlyMap<string, PendingInteraction> => {
  switch (event.type) {
    case "permission_request": {
      const next = new Map(pending)
      next.set(event.payload.request_id, { _tag: "Permission", run_id: event.id, request: event.payload })
      return next
    }
    case "prompt_for_user_choice": {
      const next = new Map(pending)
      next.set(event.payload.ask_id, { _tag: "UserChoice", run_id: event.id, ask: event.payload })
      return next
    }
    case "permission_cancel": {
      if (!pending.has(event.id)) return pending
      const next = new Map(pending)
      next.delete(event.id)
      return next
    }
    default:
      return pending
  }
}

/** Brands a caller-chosen delivery id (generated by Core's ids service and persisted before sending). */
export const deliveryId = (value: string): Ids.DeliveryId => Ids.unsafeMake.deliveryId(value)
