/**
 * The dev Core's operations on a running Turn: steer (active input), cancel, answer a permission request or a
 * user-choice ask, and return a function result. Each dispatches through the Turn's delivery handle and
 * answers with what is proven (accepted / rejected / unknown, cancelled / rejected / unconfirmed, applied /
 * rejected / unknown); it fails with an operator error only when nothing was sent. A caller that goes away
 * stops observing only: the dispatched operation keeps its waiter in the Turn's scope (Delivery,
 * Interactions, Functions). The records (inputs, interactions) are written before the send and after the
 * receipt, so a restart knows what may have left.
 */
import { Deferred, Effect, Option, Result, Schema } from "effect"
import { fn } from "../TracedFn.js"
import { Ids, type Interaction, MessageInput } from "../../proto/index.js"
import type * as Functions from "../Functions.js"
import * as Interactions from "../Interactions.js"
import type * as Outcome from "../Outcome.js"
import { DevIds } from "./DevIds.js"
import { unavailable } from "./Operator.js"
import { OperatorConflict, OperatorNotFound, OperatorRequestInvalid, type OperatorUnavailable } from "./OperatorErrors.js"
import { type LeaseLost, OwnerLeases } from "./pg/OwnerLeases.js"
import type { StoreFailed } from "./StoreErrors.js"
import { type Active, TurnRunner } from "./TurnRunner.js"
import { type InteractionKind, TurnStore } from "./TurnStore.js"
import * as TurnTelemetry from "./TurnTelemetry.js"
import type {
  AnswerResult,
  CancelResult,
  PermissionAnswerBody,
  SteerResult,
  TurnOperationError,
  UserChoiceAnswerBody
} from "./TurnViews.js"

export const notRunning = (turnId: string) =>
  new OperatorConflict({ reason: "turn_not_running", detail: `turn ${turnId} is not running` })
const notSent = (detail: string) => new OperatorConflict({ reason: "device_offline", detail: `nothing was sent: ${detail}` })
const replacedDetail = "a newer owner of the device exists (another node)"
/** The reason of an operation whose receipt this node could not record: a newer owner of the device exists. */
export const OwnerReplaced = "owner_replaced"

/** Builds the operations over the runner's live Turns and the store. */
export const make = Effect.gen(function* () {
  const runner = yield* TurnRunner
  const store = yield* TurnStore
  const ids = yield* DevIds
  const leases = yield* Effect.serviceOption(OwnerLeases)

  /**
   * A record of an operation (input, answer), fenced like the runner's writes on the attempt's owner lease
   * (several nodes, TurnFence.ts): refused with `LeaseLost`, nothing stored, when a newer owner of the device
   * exists. Unfenced on a single node.
   */
  const record = <A>(a: Active, write: Effect.Effect<A, StoreFailed>): Effect.Effect<A, OperatorUnavailable | LeaseLost> =>
    unavailable(Option.isSome(leases) && a.fence !== undefined ? leases.value.fenced(a.fence, write) : write)
  /** Before the send: fenced out means nothing is sent (409 device_offline). */
  const beforeSend = <A>(a: Active, write: Effect.Effect<A, StoreFailed>): Effect.Effect<A, OperatorUnavailable | OperatorConflict> =>
    record(a, write).pipe(Effect.catchTag("LeaseLost", () => Effect.fail(notSent(replacedDetail))))
  /** After the send: fenced out means the receipt cannot be recorded here; answered `lost` (unknown). */
  const afterSend = <A, B>(a: Active, write: Effect.Effect<A, StoreFailed>, lost: B): Effect.Effect<A | B, OperatorUnavailable> =>
    record(a, write).pipe(
      Effect.map((value): A | B => value),
      Effect.catchTag("LeaseLost", () =>
        Effect.as(
          Effect.logWarning("an operation's receipt was not recorded: a newer owner of the device exists").pipe(
            Effect.annotateLogs({ turn_id: a.turnId })
          ),
          lost
        ))
    )

  /** The live state of a running Turn; 404 for an unknown Turn, 409 for one that is not running. */
  const running = (turnId: string) =>
    Effect.gen(function* () {
      const a = runner.active(turnId)
      // A Turn whose outcome is being recorded is not running: a cancel or an answer now changes nothing.
      if (Option.isSome(a) && a.value.settling !== true) return a.value
      const stored = yield* unavailable(store.get(turnId))
      if (Option.isNone(stored)) return yield* new OperatorNotFound({ resource: "turn", id: turnId })
      return yield* notRunning(turnId)
    })

  // -------------------------------------------------------------------------------------- steer

  /**
   * An operator line per operation with what it proved (ids, status or outcome, code, reason; never an input or
   * an answer): info when definite, warning when it ended unknown or unconfirmed.
   */
  const logged = <Args extends ReadonlyArray<unknown>, A extends object, E, R>(
    what: string,
    operation: (turnId: string, ...args: Args) => Effect.Effect<A, E, R>
  ) =>
  (turnId: string, ...args: Args): Effect.Effect<A, E, R> =>
    Effect.tap(operation(turnId, ...args), (result) => {
      const r = result as Record<string, unknown>
      const fields: Record<string, unknown> = { turn_id: turnId }
      for (const key of ["status", "outcome", "input_id", "position", "interaction_id", "delivery_id", "error_code", "reason"]) {
        if (r[key] !== undefined && r[key] !== null) fields[key] = r[key]
      }
      const unknown = r["status"] === "unknown" || r["status"] === "unconfirmed" || r["outcome"] === "unknown"
      return (unknown ? Effect.logWarning : Effect.logInfo)(`turn ${what}`).pipe(Effect.annotateLogs(fields))
    })

  const steer = fn("Turns.steer")(function* (turnId: string, input: MessageInput.MessageInput, requestedId?: string) {
    const issue = MessageInput.validateMessageInput(input)
    if (Option.isSome(issue)) return yield* new OperatorRequestInvalid({ detail: `input: ${issue.value}` })
    const imageIssue = MessageInput.validateInlineImages(input)
    if (Option.isSome(imageIssue)) return yield* new OperatorRequestInvalid({ detail: `input: ${imageIssue.value}` })
    if (requestedId !== undefined && !Schema.is(Ids.InputId)(requestedId)) {
      return yield* new OperatorRequestInvalid({ detail: "input_id must be non-blank and at most 256 bytes" })
    }
    const a = yield* running(turnId)
    const current = a.current
    if (current === undefined) return yield* notRunning(turnId)
    const inputId = Ids.unsafeMake.inputId(requestedId ?? (yield* ids.next("input")))
    const existing = yield* unavailable(store.inputs(turnId))
    if (existing.some((i) => i.inputId === inputId)) {
      return yield* new OperatorRequestInvalid({ detail: "input_id already used in this Turn" })
    }
    yield* beforeSend(a, store.insertInput(turnId, inputId, input))
    const result = yield* Effect.result(
      current.delivery.steer(inputId, input).pipe(TurnTelemetry.inTurn(a.span, "Turn.steer", { "agentwire.input_id": inputId }))
    )
    const unrecorded = (): SteerResult => ({ input_id: inputId, status: "unknown", reason: OwnerReplaced })
    if (Result.isSuccess(result)) {
      const position = yield* afterSend(a, store.acceptInput(turnId, inputId), undefined)
      if (position === undefined) return unrecorded()
      return { input_id: inputId, status: "accepted", position } satisfies SteerResult
    }
    const error = result.failure
    switch (error._tag) {
      case "InputRejected":
        return { input_id: inputId, status: "rejected", error_code: error.code, retryable: error.isRetryable } satisfies SteerResult
      case "InputOutcomeUnknown":
        return { input_id: inputId, status: "unknown", reason: error.reason } satisfies SteerResult
      case "CapabilityUnsupported":
        yield* afterSend(a, store.setInputStatus(turnId, inputId, "not_sent", "capability_unsupported"), undefined)
        return yield* error
      case "InputInvalid":
        yield* afterSend(a, store.setInputStatus(turnId, inputId, "not_sent", error.issue), undefined)
        return yield* new OperatorRequestInvalid({ detail: `input: ${error.issue}` })
      case "TurnNotActive":
        yield* afterSend(a, store.setInputStatus(turnId, inputId, "not_sent", "turn_not_active"), undefined)
        return yield* notRunning(turnId)
      case "NotSent":
        yield* afterSend(a, store.setInputStatus(turnId, inputId, "not_sent", error.reason), undefined)
        return yield* notSent(error.reason)
      case "SubscriptionRejected":
        yield* afterSend(a, store.setInputStatus(turnId, inputId, "not_sent", error.reason), undefined)
        return yield* notSent(error.reason)
    }
  })

  // -------------------------------------------------------------------------------------- cancel

  // `presetDeliveryId`: the id a requesting node chose before routing the operation here (pg/RoutedTurns.ts).
  const cancel = fn("Turns.cancel")(function* (turnId: string, presetDeliveryId?: string) {
    const a = yield* running(turnId)
    const current = a.current
    if (current === undefined) {
      // Queued (waiting for a device or a retry): nothing of this Turn runs; abandon it.
      yield* Deferred.succeed(a.cancelQueued, undefined)
      yield* Deferred.await(a.finished)
      return { status: "cancelled", delivery_id: null, abandoned: true } satisfies CancelResult
    }
    const deliveryId = Ids.unsafeMake.deliveryId(presetDeliveryId ?? (yield* ids.next("delivery")))
    const result = yield* Effect.result(
      current.delivery.cancel(deliveryId).pipe(TurnTelemetry.inTurn(a.span, "Turn.cancel", { "agentwire.delivery_id": deliveryId }))
    )
    if (Result.isSuccess(result)) {
      return result.success._tag === "Abandoned"
        ? { status: "cancelled", delivery_id: null, abandoned: true } satisfies CancelResult
        : { status: "cancelled", delivery_id: deliveryId, abandoned: false } satisfies CancelResult
    }
    const error = result.failure
    switch (error._tag) {
      case "CancelRejected":
      case "CancelFailed":
        return { status: "rejected", delivery_id: deliveryId, error_code: error.code } satisfies CancelResult
      case "CancelUnconfirmed":
        return { status: "unconfirmed", delivery_id: deliveryId, reason: error.reason, error_code: error.code ?? null } satisfies CancelResult
      case "TurnNotActive":
        return yield* notRunning(turnId)
      case "NotSent":
        return yield* notSent(error.reason)
      case "SubscriptionRejected":
        return yield* notSent(error.reason)
    }
  })

  // -------------------------------------------------------------------------------------- answers

  /**
   * Claims a pending interaction, runs the send, records the outcome. The claim (`pending` → `answering`)
   * makes a second concurrent answer a conflict; a definite not-sent result returns it to pending.
   */
  const answer = <E>(
    a: Active,
    kind: InteractionKind,
    interactionId: string,
    answerBody: unknown,
    send: (deliveryId: Ids.DeliveryId) => Effect.Effect<unknown, E>,
    classify: (error: E) =>
      | { readonly _tag: "rejected"; readonly code: string; readonly retryable: boolean }
      | { readonly _tag: "unknown"; readonly reason: string }
      | { readonly _tag: "not_sent"; readonly error: TurnOperationError | Outcome.CapabilityUnsupported },
    presetDeliveryId: string | undefined
  ) =>
    Effect.gen(function* () {
      const deliveryId = Ids.unsafeMake.deliveryId(presetDeliveryId ?? (yield* ids.next("delivery")))
      const claimed = yield* beforeSend(a, store.beginAnswer(a.turnId, kind, interactionId, deliveryId, answerBody))
      if (!claimed) {
        return yield* new OperatorConflict({ reason: "interaction_not_pending", detail: `${kind} ${interactionId} is not pending` })
      }
      const notify = (outcome: string, extra: Record<string, unknown> = {}) =>
        a.current === undefined
          ? Effect.void
          : a.current.writer.notify("interaction", { kind, interaction_id: interactionId, delivery_id: deliveryId, outcome, ...extra })
      const result = yield* Effect.result(send(deliveryId))
      /** The receipt cannot be recorded (a newer owner exists): unknown, as the sweeper will record it. */
      const finish = (...args: [outcome: "applied" | "rejected" | "unknown" | "not_sent", detail?: string]) =>
        afterSend(a, store.finishAnswer(a.turnId, kind, interactionId, ...args), false as const)
      const unrecorded = (): AnswerResult => ({ interaction_id: interactionId, delivery_id: deliveryId, outcome: "unknown", reason: OwnerReplaced })
      if (Result.isSuccess(result)) {
        if ((yield* finish("applied")) === false) return unrecorded()
        if (kind !== "function_call") {
          const next = new Map(a.pending)
          next.delete(interactionId)
          a.pending = next
        }
        yield* notify("applied")
        return { interaction_id: interactionId, delivery_id: deliveryId, outcome: "applied" } satisfies AnswerResult
      }
      const c = classify(result.failure)
      switch (c._tag) {
        case "rejected":
          if ((yield* finish("rejected", c.code)) === false) return unrecorded()
          yield* notify("rejected", { error_code: c.code })
          return {
            interaction_id: interactionId,
            delivery_id: deliveryId,
            outcome: "rejected",
            error_code: c.code,
            retryable: c.retryable
          } satisfies AnswerResult
        case "unknown":
          yield* finish("unknown", c.reason)
          yield* notify("unknown", { reason: c.reason })
          return { interaction_id: interactionId, delivery_id: deliveryId, outcome: "unknown", reason: c.reason } satisfies AnswerResult
        case "not_sent":
          yield* finish("not_sent")
          return yield* c.error
      }
    })

  type Classified =
    | { readonly _tag: "rejected"; readonly code: string; readonly retryable: boolean }
    | { readonly _tag: "unknown"; readonly reason: string }
    | { readonly _tag: "not_sent"; readonly error: TurnOperationError | Outcome.CapabilityUnsupported }

  const decisionClassify = (e: Interactions.DecisionError): Classified => {
    switch (e._tag) {
      case "InteractionRejected":
        return { _tag: "rejected", code: e.code, retryable: e.isRetryable } as const
      case "InteractionAckUnknown":
        return { _tag: "unknown", reason: e.reason } as const
      case "NotSent":
        return { _tag: "not_sent", error: notSent(e.reason) } as const
      case "SubscriptionRejected":
        return { _tag: "not_sent", error: notSent(e.reason) } as const
    }
  }

  const pendingOf = (a: Active, interactionId: string) =>
    Effect.gen(function* () {
      const pending = a.pending.get(interactionId)
      if (pending !== undefined) return pending
      const stored = yield* unavailable(store.getInteraction(a.turnId, "permission", interactionId))
      const storedAsk = yield* unavailable(store.getInteraction(a.turnId, "user_choice", interactionId))
      if (Option.isNone(stored) && Option.isNone(storedAsk)) {
        return yield* new OperatorNotFound({ resource: "interaction", id: interactionId })
      }
      return yield* new OperatorConflict({ reason: "interaction_not_pending", detail: `interaction ${interactionId} is not pending` })
    })

  const answerPermission = fn("Turns.answerPermission")(function* (
    turnId: string,
    requestId: string,
    body: PermissionAnswerBody,
    presetDeliveryId?: string
  ) {
    const a = yield* running(turnId)
    const pending = yield* pendingOf(a, requestId)
    const session = a.current?.session
    if (pending._tag !== "Permission") {
      return yield* new OperatorRequestInvalid({ detail: `${requestId} is a user-choice ask, not a permission request` })
    }
    if (session === undefined) return yield* notRunning(turnId)
    return yield* answer(a, "permission", requestId, body, (deliveryId) =>
      Interactions.answerPermission(session, {
        interaction_id: pending.request.request_id,
        delivery_id: deliveryId,
        approved: body.approved,
        ...(body.message === undefined ? {} : { message: body.message }),
        ...(body.updated_input === undefined ? {} : { updated_input: body.updated_input })
      }), decisionClassify, presetDeliveryId)
  })

  const answerUserChoice = fn("Turns.answerUserChoice")(function* (
    turnId: string,
    askId: string,
    body: UserChoiceAnswerBody,
    presetDeliveryId?: string
  ) {
    const a = yield* running(turnId)
    const pending = yield* pendingOf(a, askId)
    const session = a.current?.session
    if (pending._tag !== "UserChoice") {
      return yield* new OperatorRequestInvalid({ detail: `${askId} is a permission request, not a user-choice ask` })
    }
    if (session === undefined) return yield* notRunning(turnId)
    // Validate against the emitted questions before claiming: an invalid shape sends nothing.
    const probe: Interaction.UserChoiceDecisionPayload = { delivery_id: Ids.unsafeMake.deliveryId("probe"), ...body }
    const valid = Interactions.validateDecision(pending.ask, probe)
    if (Result.isFailure(valid)) return yield* new OperatorRequestInvalid({ detail: `decision: ${valid.failure.issue}` })
    return yield* answer(a, "user_choice", askId, body, (deliveryId) =>
      Interactions.answerUserChoice(session, pending.ask, { ...body, delivery_id: deliveryId }), (e) =>
      e._tag === "DecisionInvalid"
        ? { _tag: "not_sent", error: new OperatorRequestInvalid({ detail: `decision: ${e.issue}` }) }
        : decisionClassify(e), presetDeliveryId)
  })

  const functionResult = fn("Turns.functionResult")(function* (
    turnId: string,
    callId: string,
    output: Functions.FunctionOutput,
    presetDeliveryId?: string
  ) {
    const a = yield* running(turnId)
    const functions = a.current?.functions
    if (!a.calls.has(callId)) {
      const stored = yield* unavailable(store.getInteraction(turnId, "function_call", callId))
      if (Option.isNone(stored)) return yield* new OperatorNotFound({ resource: "interaction", id: callId })
      return yield* new OperatorConflict({ reason: "interaction_not_pending", detail: `function call ${callId} is not pending` })
    }
    if (functions === undefined) return yield* notRunning(turnId)
    return yield* answer(a, "function_call", callId, output, (deliveryId) =>
      functions.answer(Ids.unsafeMake.callId(callId), output, { deliveryId }), (e: Functions.FunctionResultError): Classified => {
      switch (e._tag) {
        case "FunctionResultRejected":
          return { _tag: "rejected", code: e.code, retryable: e.isRetryable } as const
        case "FunctionResultUnknown":
          return { _tag: "unknown", reason: e.reason } as const
        case "FunctionResultInvalid":
          return { _tag: "not_sent", error: new OperatorRequestInvalid({ detail: `function result: ${e.issue}` }) } as const
        case "FunctionResultOutstanding":
          return {
            _tag: "not_sent",
            error: new OperatorConflict({ reason: "answer_outstanding", detail: "another function result of this Turn awaits its receipt" })
          } as const
        case "CapabilityUnsupported":
          return { _tag: "not_sent", error: new OperatorRequestInvalid({ detail: e.message }) } as const
        case "NotSent":
          return { _tag: "not_sent", error: notSent(e.reason) } as const
        case "SubscriptionRejected":
          return { _tag: "not_sent", error: notSent(e.reason) } as const
      }
    }, presetDeliveryId)
  })

  return {
    steer: logged("steer", steer),
    cancel: logged("cancel", cancel),
    answerPermission: logged("permission answer", answerPermission),
    answerUserChoice: logged("question answer", answerUserChoice),
    functionResult: logged("function result", functionResult)
  }
})
