/**
 * Interactions, Runtime side (protocol "Envelope and identity", reference part 2 §3): the routes of pending
 * permission requests and user-choice asks, their decisions, and `interaction_decision_ack` under the
 * interaction id with the decision's delivery id.
 *
 * A decision is applied only after the native side accepted it: `applied: true` proves the identified
 * operation settled. Codes: `not_pending` (unknown, resolved or withdrawn interaction, or the Run is gone),
 * `not_ready`, `unsupported` (the admitted snapshot lacks `permissions`, which gates both kinds),
 * `contract_violation`, `runtime_error` (the native submission failed; the route is kept so a retry can
 * succeed), `decision_conflict`, and `invalid_decision` for a user-choice decision that fails the shared
 * validator against the emitted questions (docs/wire-decisions.md I2), checked before any native call.
 *
 * Replay: applied decisions are remembered (at most 1024; when full, records older than an hour are pruned,
 * then the oldest is evicted) keyed by decision type and interaction id with a fingerprint of the payload
 * without `delivery_id`. An identical retry under a new delivery id is applied again; other content is a
 * conflict. A decision that does not decode or lacks a delivery id gets no ack (handled by the dispatcher).
 * There is no transport-wide deduplication.
 */
import { Context, Effect, FiberSet, Layer, Option } from "effect"
import { canonicalJson, omitKeys } from "../proto/Canonical.js"
import type { DecisionErrorCode } from "../proto/ErrorCodes.js"
import type { DeliveryId, InteractionId } from "../proto/Ids.js"
import { unsafeMake } from "../proto/Ids.js"
import type { PermissionDecisionPayload, UserChoiceDecisionPayload } from "../proto/Interaction.js"
import { validateUserChoiceDecision } from "../proto/Interaction.js"
import { AppliedDecisions, makeKeyedLock, sendAck, submitErrorCode } from "./Applied.js"
import { Background } from "./ConnectionServices.js"
import type { TurnEvent } from "./harness/Harness.js"
import { guarded } from "./harness/Harness.js"
import { Outbound } from "./Outbound.js"
import { RunLifecycle } from "./RunLifecycle.js"
import type { RunRecord } from "./RunRecord.js"

// ---------------------------------------------------------------------------------------------- interactions

type InteractionKind = "permission" | "user_choice"

interface PendingInteraction {
  readonly kind: InteractionKind
  readonly run: RunRecord
  /** The emitted question ids of an ask. */
  readonly questionIds: ReadonlyArray<string>
}

export interface InteractionsShape {
  readonly permissionDecision: (id: InteractionId, payload: PermissionDecisionPayload, trace: string | undefined) => Effect.Effect<void>
  readonly userChoiceDecision: (id: InteractionId, payload: UserChoiceDecisionPayload, trace: string | undefined) => Effect.Effect<void>
  /** Pending interaction ids (status). */
  readonly pendingCount: Effect.Effect<number>
}

const makeInteractions = Effect.gen(function* () {
  const outbound = yield* Outbound
  const applied = yield* AppliedDecisions
  const background = yield* Background
  const lifecycle = yield* RunLifecycle
  /** This family's per-Run state: the pending interactions, by interaction id, with the Run that emitted them. */
  const pending = new Map<string, PendingInteraction>()
  const withLock = makeKeyedLock()

  const decide = (
    kind: InteractionKind,
    id: InteractionId,
    deliveryId: DeliveryId,
    fingerprint: string,
    trace: string | undefined,
    submit: (entry: PendingInteraction) => Effect.Effect<void, DecisionErrorCode>
  ) => {
    const key = `${kind}\u0000${id}`
    const ack = (code: DecisionErrorCode | undefined) => sendAck(outbound, unsafeMake.ackSubjectId(id), deliveryId, trace, code)
    return withLock(key, Effect.gen(function* () {
      const remembered = applied.lookup(key)
      if (Option.isSome(remembered)) return yield* ack(remembered.value === fingerprint ? undefined : "decision_conflict")
      const entry = pending.get(id)
      if (entry === undefined || entry.kind !== kind || entry.run.phase === "finished") return yield* ack("not_pending")
      if (!entry.run.snapshot.capabilities.permissions) return yield* ack("unsupported")
      const outcome = yield* Effect.result(submit(entry))
      if (outcome._tag === "Failure") {
        if (outcome.failure === "not_pending") pending.delete(id)
        return yield* ack(outcome.failure)
      }
      yield* applied.remember(key, fingerprint)
      pending.delete(id)
      return yield* ack(undefined)
    }))
  }

  const turnOf = (entry: PendingInteraction) =>
    entry.run.turn === undefined ? Effect.fail("not_ready" as const) : Effect.succeed(entry.run.turn)

  /** Registers and withdraws routes as the Turn emits its frames (before the frame is queued). */
  const emitted = (run: RunRecord, event: TurnEvent) =>
    Effect.sync(() => {
      switch (event.type) {
        case "permission_request":
          pending.set(event.payload.request_id, { kind: "permission", run, questionIds: [] })
          return
        case "prompt_for_user_choice":
          pending.set(event.payload.ask_id, { kind: "user_choice", run, questionIds: event.payload.questions.map((q) => q.id) })
          return
        case "permission_cancel":
          pending.delete(event.interactionId)
          return
      }
    })

  /** Drops every route of a Run that is over. */
  const stopped = (run: RunRecord) =>
    Effect.sync(() => {
      for (const [id, entry] of pending) if (entry.run === run) pending.delete(id)
    })

  yield* lifecycle.subscribe((event) =>
    event._tag === "Emitted" ? emitted(event.run, event.event) : event._tag === "Stopped" ? stopped(event.run) : Effect.void
  )

  return Interactions.of({
    permissionDecision: (id, payload, trace) =>
      FiberSet.run(
        background,
        decide("permission", id, payload.delivery_id, canonicalJson(omitKeys(payload, ["delivery_id"])), trace, (entry) =>
          Effect.gen(function* () {
            const turn = yield* turnOf(entry)
            yield* guarded(
              entry.run.snapshot,
              "permissions",
              turn.decidePermission(id, {
                approved: payload.approved,
                message: payload.message,
                updatedInput: payload.updated_input
              })
            ).pipe(Effect.mapError(submitErrorCode))
          }))
      ).pipe(Effect.asVoid),
    userChoiceDecision: (id, payload, trace) =>
      Effect.gen(function* () {
        const ack = (code: DecisionErrorCode) => sendAck(outbound, unsafeMake.ackSubjectId(id), payload.delivery_id, trace, code)
        // Shape rules that need no pending ask (cancelled with answers, blank or repeated ids).
        if (Option.isSome(validateUserChoiceDecision(payload))) {
          return yield* FiberSet.run(background, ack("invalid_decision")).pipe(Effect.asVoid)
        }
        yield* FiberSet.run(
          background,
          decide("user_choice", id, payload.delivery_id, canonicalJson(omitKeys(payload, ["delivery_id"])), trace, (entry) =>
            Effect.gen(function* () {
              if (Option.isSome(validateUserChoiceDecision(payload, entry.questionIds))) {
                return yield* Effect.fail("invalid_decision" as const)
              }
              const turn = yield* turnOf(entry)
              yield* guarded(
                entry.run.snapshot,
                "permissions",
                turn.answerUserChoice(id, {
                  questionAnswers: payload.question_answers ?? [],
                  cancelled: payload.cancelled === true,
                  reason: payload.reason
                })
              ).pipe(Effect.mapError(submitErrorCode))
            }))
        )
      }),
    pendingCount: Effect.sync(() => pending.size)
  })
})

/** Permission and user-choice routes and decisions of one connection. */
export class Interactions extends Context.Service<Interactions, InteractionsShape>()("agentwire/runtime/Interactions") {
  static readonly layer = Layer.effect(Interactions, makeInteractions)
}
