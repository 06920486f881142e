/**
 * A delivered Turn's handle (see `Delivery.ts` for the rules): the fact stream and journal barrier, the
 * settlement, the typed result, and the operations that change the outcome while it runs (`steer`, `cancel`,
 * `endObservation`). The driver (`DeliveryDriver.ts`) runs in the Turn's scope; the operations' waiters live
 * there too, so interrupting a caller only stops it observing.
 */
import { Deferred, Duration, Effect, Exit, Fiber, Option, Result, Scope, type Stream } from "effect"
import type { Ids, MessageInput } from "../proto/index.js"
import * as Cancellation from "./Cancellation.js"
import * as CoreMetrics from "./CoreMetrics.js"
import type { Admitted } from "./CapabilityPolicy.js"
import type { Deadlines } from "./DeliveryDeadlines.js"
import { type Driver, notDispatched, type Phase } from "./DeliveryDriver.js"
import type { DeviceSession } from "./DeviceSession.js"
import type * as Request from "./ExecutionRequest.js"
import { Signal } from "./internal/turnWait.js"
import * as JournalBarrier from "./JournalBarrier.js"
import * as Outcome from "./Outcome.js"
import * as Steering from "./Steering.js"
import * as Projection from "./TurnProjection.js"
import { toResult } from "./TurnResult.js"

export interface DeliveryOptions {
  /** Active-input resend interval after not_ready / busy. Default 250 ms. */
  readonly steerRetryInterval?: Duration.Input
  /** How long receipts already on their way may arrive after the Run's stream ended. Default 1 s. */
  readonly inputGraceAfterTurnEnd?: Duration.Input
  /**
   * Durable dispatch boundary, for a consumer that journals `facts` (the dev Core). The `Dispatching` fact
   * before `execution_prepare`, `execution_start` or `prompt_request` must be confirmed journaled
   * (`Turn.journaled`, once per fact in order) before the envelope is handed to the send queue. When the
   * consumer gives up instead (`Turn.endObservation`), nothing is sent: `NotDispatched{journal_unavailable}`.
   * Default false: the send follows `Dispatching` at once.
   */
  readonly durableDispatch?: boolean
  /**
   * How many facts may wait for the consumer (not yet confirmed with `durableDispatch`, otherwise not yet
   * taken) before the Turn stops taking Run events and waits for room (backpressure down to the device's
   * socket). Default 4096.
   */
  readonly factBuffer?: number
  /**
   * How long the Turn waits for room while its consumer confirms (or takes) nothing before it counts as gone:
   * observation ends with `subscriber_overflow`. Default 60 s.
   */
  readonly factStallBudget?: Duration.Input
  /**
   * How long a prepared Turn waits for `ready` after `execution_prepare` was sent. Past it the Turn is
   * abandoned (`execution_release` once a handle is known) and fails `preparation_interrupted` with the
   * observation `preparation_timeout` (`delivery_unknown` when no status arrived at all). Default 10 min.
   */
  readonly preparationTimeout?: Duration.Input
  /**
   * After `failed` with `cleanup_unconfirmed` / `executor_cleanup_unconfirmed`, how long the Turn waits for
   * the confirmed release (`released` / `expired`: `preparation_failed`, `detail: cleanup_confirmed`) before it
   * fails `cleanup_unconfirmed` (observation `preparation_timeout`). Default 60 s.
   */
  readonly cleanupConfirmTimeout?: Duration.Input
  /** One timer for the preparation budgets of many Turns (DeliveryDeadlines.ts); default a timer fiber per Turn. */
  readonly deadlines?: Deadlines
}

/** Default bound of the facts waiting for their consumer. */
export const DefaultFactBuffer = 4096
/** Default time a consumer of the facts may make no progress while the bound is reached. */
export const DefaultFactStallBudget: Duration.Duration = Duration.seconds(60)
/** What `cancel` did. */
export type CancelResult =
  | { readonly _tag: "Abandoned" } // before start: no Run input was submitted; execution_release sent when a handle was known
  | { readonly _tag: "Confirmed"; readonly confirmed: Cancellation.CancelConfirmed } // applied: true

export interface Turn {
  readonly runId: Ids.RunId
  /** The declaration the Turn was admitted with; None when the final check refused it. */
  readonly admitted: Option.Option<Admitted>
  /**
   * Every fact in order as it happens (single consumer). Ends once the Turn finished: resolved, its
   * cancellation and inputs settled, and the events already buffered drained as evidence.
   */
  readonly facts: Stream.Stream<Outcome.TurnFact>
  /** Completes as soon as the status is known. */
  readonly settled: Effect.Effect<Outcome.TurnResolution>
  /**
   * Read at once: the status is known and the Run's observation ended, so the facts still to come are the last few
   * (events already buffered, a best-effort abort), none waiting on the peer. For a consumer of `facts` deciding
   * how to store the ones it took (the dev Core holds them for the outcome's transaction).
   */
  readonly isFinishing: () => boolean
  /** Completes when the Turn finished, with the final projection (Pending only if its scope closed first). */
  readonly resolution: Effect.Effect<Outcome.TurnResolution>
  /** The resolution in the typed channel: completed / cancelled succeed; everything else fails by what is known. */
  readonly result: Effect.Effect<Outcome.TurnOutcome, Outcome.TurnError>
  /** The reducer state so far (diagnostics, tests). */
  readonly snapshot: Effect.Effect<Outcome.TurnState>
  /**
   * The consumer of `facts` confirms that the next fact, in order, is journaled (call it once per fact).
   * Only `durableDispatch` waits for it; without that option it only feeds the `factBuffer` bound.
   */
  readonly journaled: Effect.Effect<void>
  /**
   * Ends observation by the consumer's decision (its journal is unavailable). A dispatch boundary still
   * waiting is refused (`NotDispatched{journal_unavailable}`: nothing sent), a preparation is abandoned
   * (released once its handle is known), and `RunObservationEnded{reason}` is recorded, so the projection
   * says what is known (`delivery_failed` when nothing left, else `delivery_unknown`,
   * `preparation_interrupted` or `event_stream_incomplete`). Afterwards only a release or the best-effort
   * abort is sent. Idempotent; after the Turn resolved it only refuses later boundaries.
   */
  readonly endObservation: (reason: Outcome.ObservationEnd) => Effect.Effect<void>
  /**
   * Delivers one active input after the Run was dispatched (waits for that); see `Steering.deliver`. The
   * outcome is journaled (`InputWritten` / `InputAccepted` / `InputRejected` / `InputUnknown`).
   * `TurnNotActive`: the Turn resolved or never started; nothing sent.
   */
  readonly steer: (
    inputId: Ids.InputId,
    input: MessageInput.MessageInput
  ) => Effect.Effect<Steering.InputAccepted, Steering.SteerError | Outcome.TurnNotActive>
  /**
   * Cancels the Turn. Before start: abandons the admission (`execution_release` once a handle is known) and
   * the Turn is cancelled at once (no Run input was submitted). After start: `prompt_cancel` with
   * `deliveryId`, whose receipt owns the terminal outcome (see `Cancellation.cancel` for the errors).
   * `TurnNotActive`: the Turn already resolved; nothing sent.
   */
  readonly cancel: (
    deliveryId: Ids.DeliveryId
  ) => Effect.Effect<CancelResult, Cancellation.CancelError | Outcome.TurnNotActive>
}

// ---------------------------------------------------------------------------------------------- Turn

export type Admission = Result.Result<Admitted, Outcome.AdmissionRejection | Outcome.ConfigurationRejected>

export const makeTurn = Effect.fnUntraced(function*(
  session: DeviceSession,
  runId: Ids.RunId,
  spec: Request.ExecutionSpec,
  admission: Admission,
  initialPhase: Phase,
  options: DeliveryOptions,
  run: (d: Driver) => Effect.Effect<void, never, Scope.Scope>
) {
  const scope = yield* Effect.scope
  const journal = yield* JournalBarrier.make(runId, {
    durable: options.durableDispatch === true,
    factBuffer: Math.max(1, options.factBuffer ?? DefaultFactBuffer)
  })
  const finished = yield* Deferred.make<Outcome.TurnResolution>()
  const { record, settled } = journal
  const state = journal.state

  const d: Driver = {
    session,
    runId,
    record,
    append: (fact) => {
      journal.append(fact)
    },
    boundary: journal.boundary,
    backlogFull: journal.backlogFull,
    awaitRoom: journal.awaitRoom(Duration.fromInputUnsafe(options.factStallBudget ?? DefaultFactStallBudget)),
    state,
    settled,
    settledSignal: journal.settledSignal,
    turnEnded: yield* Deferred.make<void>(),
    runDispatched: yield* Deferred.make<boolean>(),
    abandon: new Signal(),
    preparationTimeout: Duration.fromInputUnsafe(options.preparationTimeout ?? Duration.minutes(10)),
    cleanupConfirmTimeout: Duration.fromInputUnsafe(options.cleanupConfirmTimeout ?? Duration.seconds(60)),
    deadlines: options.deadlines,
    phase: initialPhase
  }

  const finish = Effect.sync(() => {
    journal.close()
    Deferred.doneUnsafe(d.runDispatched, Exit.succeed(false))
    Deferred.doneUnsafe(d.turnEnded, Exit.void)
    Deferred.doneUnsafe(finished, Exit.succeed(state().resolution))
  })
  // Closing the Turn's scope stops observation (it settles nothing) and ends the fact stream. Registered on the
  // scope itself: `Effect.addFinalizer` would run it under the registering fiber's context, a copy of the whole
  // context map per Turn (issue 18, "tmain"); `finish` reads no service.
  yield* Scope.addFinalizer(scope, finish)

  const admitted = Result.isSuccess(admission) ? Option.some(admission.success) : Option.none<Admitted>()
  let steering: Steering.Steering | undefined
  if (Result.isFailure(admission)) {
    yield* record(Outcome.admissionFact(admission.failure))
    yield* finish
  } else {
    steering = yield* Steering.make(session, runId, {
      admitted: admission.success,
      engine: spec.engine,
      turnEnded: Deferred.await(d.turnEnded),
      observe: (progress) => {
        switch (progress._tag) {
          case "Dispatched":
            return record({ _tag: "Dispatched", type: "prompt_steer", input_id: progress.input_id })
          case "Written":
            return Effect.andThen(
              CoreMetrics.receipt("written", "accepted"),
              record({ _tag: "InputWritten", input_id: progress.input_id })
            )
          case "Resending":
            return Effect.void
        }
      },
      ...(options.inputGraceAfterTurnEnd === undefined ? {} : { graceAfterTurnEnd: options.inputGraceAfterTurnEnd }),
      ...(options.steerRetryInterval === undefined ? {} : { retryInterval: options.steerRetryInterval })
    })
    // The driver's subscriptions live in their own scope, closed when it finishes.
    const logFinished = Effect.suspend(() => {
      const r = state().resolution
      return Effect.logDebug("turn finished").pipe(
        Effect.annotateLogs({
          resolution: r._tag,
          ...(r._tag === "Settled" ? { status: r.outcome.status, error_code: r.outcome.error_code ?? "" } : {}),
          ...(r._tag === "Unclaimed" ? { reason: r.reason } : {})
        })
      )
    })
    // A dispatched Run counts as finished once its driver stopped, with the status it settled on.
    const runFinished = Effect.suspend(() => {
      const s = state()
      if (!(s.startSent || s.directSent)) return Effect.void
      return CoreMetrics.runFinished(s.resolution._tag === "Settled" ? s.resolution.outcome.status : "unresolved")
    })
    yield* Effect.forkIn(
      Effect.scoped(run(d)).pipe(
        Effect.ensuring(runFinished),
        Effect.ensuring(finish),
        Effect.andThen(logFinished),
        Effect.annotateLogs({ device_id: session.deviceId, run_id: runId })
      ),
      scope
    )
  }

  // Made when an operation finds the Turn inactive (an error captures a stack: not a cost of every Turn).
  const notActive = () => new Outcome.TurnNotActive({ run_id: runId })

  const steer: Turn["steer"] = (inputId, input) =>
    Effect.gen(function*() {
      const channel = steering
      if (channel === undefined || Projection.isResolved(state())) return yield* notActive()
      if (!(yield* Deferred.await(d.runDispatched)) || Projection.isResolved(state())) return yield* notActive()
      const work = channel.deliver(inputId, input).pipe(
        Effect.tap(() => Effect.andThen(CoreMetrics.receipt("applied", "accepted"), record({ _tag: "InputAccepted", input_id: inputId }))),
        Effect.tapError((e) => {
          switch (e._tag) {
            case "InputRejected":
              return Effect.andThen(
                CoreMetrics.receipt("applied", "rejected"),
                record({ _tag: "InputRejected", input_id: inputId, code: e.code })
              )
            case "InputOutcomeUnknown":
              return Effect.andThen(
                CoreMetrics.receipt(e.reason === "written_ack_timeout" ? "written" : "applied", "unknown"),
                record({ _tag: "InputUnknown", input_id: inputId, reason: e.reason })
              )
            case "NotSent":
            case "SubscriptionRejected":
              return record(notDispatched("prompt_steer", e, { input_id: inputId }))
            default:
              return Effect.void
          }
        })
      )
      // The waiter lives in the Turn's scope: interrupting the caller stops observing only.
      return yield* Fiber.join(yield* Effect.forkIn(work, scope))
    })

  const cancel: Turn["cancel"] = (deliveryId) =>
    Effect.gen(function*() {
      const decision = yield* Effect.sync(() => {
        if (Projection.isResolved(state()) || d.phase === "abandoned") return "inactive" as const
        if (d.phase === "preparing") {
          d.phase = "abandoned"
          return "abandon" as const
        }
        return "cancel" as const
      })
      if (decision === "inactive") return yield* notActive()
      if (decision === "abandon") {
        d.abandon.fire()
        const resolution = yield* Deferred.await(settled)
        if (resolution._tag === "Settled" && resolution.outcome.status === "cancelled") {
          return { _tag: "Abandoned" } satisfies CancelResult
        }
        return yield* notActive()
      }
      // The cancellation must follow the start in the send queue.
      if (!(yield* Deferred.await(d.runDispatched)) || Projection.isResolved(state())) return yield* notActive()
      const work = Cancellation.cancel(session, runId, deliveryId, {
        onDispatched: record({ _tag: "Dispatched", type: "prompt_cancel", delivery_id: deliveryId })
      }).pipe(
        Effect.tapError((e) => Effect.andThen(CoreMetrics.cancel(cancelOutcome(e)), record(cancelFact(deliveryId, e)))),
        Effect.tap(() => CoreMetrics.cancel("applied")),
        Effect.tap((confirmed) =>
          record({
            _tag: "CancelReceipt",
            delivery_id: deliveryId,
            ack: {
              delivery_id: deliveryId,
              applied: true,
              ...(confirmed.outcome === undefined ? {} : { outcome: confirmed.outcome })
            }
          })
        ),
        Effect.map((confirmed): CancelResult => ({ _tag: "Confirmed", confirmed }))
      )
      return yield* Fiber.join(yield* Effect.forkIn(work, scope))
    })

  const endObservation: Turn["endObservation"] = (reason) =>
    Effect.sync(() => {
      if (!journal.refuse()) return
      if (Projection.isResolved(state())) return
      journal.append({ _tag: "RunObservationEnded", reason })
      if (d.phase === "preparing") {
        d.phase = "abandoned"
        d.abandon.fire()
      }
    })

  const resolution = Deferred.await(finished)
  const turn: Turn = {
    runId,
    admitted,
    facts: journal.facts,
    settled: Deferred.await(settled),
    isFinishing: () => Deferred.isDoneUnsafe(settled) && Deferred.isDoneUnsafe(d.turnEnded),
    resolution,
    result: Effect.flatMap(resolution, (r) =>
      r._tag === "Pending" ? Effect.die("the Turn's scope closed before it resolved") : Effect.fromResult(toResult(r))),
    snapshot: Effect.sync(state),
    journaled: journal.journaled,
    endObservation,
    steer,
    cancel
  }
  return turn
})

const cancelOutcome = (e: Cancellation.CancelError): "rejected" | "failed" | "unconfirmed" | "not_sent" => {
  switch (e._tag) {
    case "NotSent":
    case "SubscriptionRejected":
      return "not_sent"
    case "CancelRejected":
      return "rejected"
    case "CancelFailed":
      return "failed"
    case "CancelUnconfirmed":
      return "unconfirmed"
  }
}

const cancelFact = (deliveryId: Ids.DeliveryId, e: Cancellation.CancelError): Outcome.TurnFact => {
  switch (e._tag) {
    case "NotSent":
    case "SubscriptionRejected":
      return notDispatched("prompt_cancel", e, { delivery_id: deliveryId })
    case "CancelRejected":
      return {
        _tag: "CancelReceipt",
        delivery_id: deliveryId,
        ack: { delivery_id: deliveryId, applied: false, error_code: e.code }
      }
    case "CancelFailed":
      return {
        _tag: "CancelReceipt",
        delivery_id: deliveryId,
        ack: { delivery_id: deliveryId, applied: false, error_code: e.code }
      }
    case "CancelUnconfirmed":
      return e.reason === "not_applied"
        ? {
          _tag: "CancelReceipt",
          delivery_id: deliveryId,
          ack: { delivery_id: deliveryId, applied: false, ...(e.code === undefined ? {} : { error_code: e.code }) }
        }
        : { _tag: "CancelUnconfirmed", delivery_id: deliveryId, reason: e.reason }
  }
}
