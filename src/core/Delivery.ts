/**
 * Turn delivery (protocol "Preparation and execution order", "Failures, retries and cleanup"): the five-step
 * execution Turn and the direct `prompt_request` path, over one `DeviceSession`.
 *
 *  1. subscribe to the preparation status, then send `execution_prepare` (no Run input);
 *  2. `preparing` / `ready` (Executor id, handle, revision, expiry);
 *  3. subscribe to the Run (`subscribeDurable`), then send `execution_start` with the Executor id, handle,
 *     Run id and ordered input (`started` confirms the transfer; output can race it);
 *  4. consume Run events until `done` or loss of observation;
 *  5. to abandon before start send `execution_release`; after start only `prompt_cancel`.
 *
 * The dispatch boundary is explicit: before an envelope entered the send queue every failure is definite
 * (`NotDispatched` facts, `…Rejected`); after it, a disconnect, overflow or timeout is the family's
 * `…Unknown` unless an application receipt proves otherwise. A definite `preparation_capacity` rejection
 * leaves the Turn unclaimed for retry; nothing else authorizes a replay, and nothing here ever replays.
 * Each request that carries or may start the Run (`execution_prepare`, `execution_start`, `prompt_request`)
 * is preceded by a `Dispatching` fact; with `durableDispatch` the send waits until the consumer of `facts`
 * confirmed that fact journaled, so a journal without a following `Dispatched` / `NotDispatched` means "may
 * have left" (unknown), and one without `Dispatching` means "never left".
 *
 * A delivered Turn is a typed handle: `facts` (every observation and dispatch, in order, for the dev Core to
 * persist; `Outcome.project` replays them after a restart), `settled` / `resolution` / `result`, and the
 * operations that change the outcome while it runs: `steer` (active input) and `cancel` (release before
 * start, `prompt_cancel` after). Those operations run in the Turn's scope: interrupting a caller only stops
 * it observing; the dispatched operation keeps its waiter until its own budget ends.
 *
 * `facts` is bounded: when more than `factBuffer` facts wait for the consumer, the Turn stops observing its Run
 * (`RunObservationEnded{subscriber_overflow}`, as when its own subscriber overflows) instead of buffering
 * without end; what follows is bounded by the Turn's own operations (release, abort, receipts).
 *
 * Never: a synthetic error or done; a status from an engine failure code; replay after loss.
 */
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Option, Pull, Queue, Result, Scope, Stream } from "effect"
import { type Ids, Limits, type MessageInput, type Preparation } from "../proto/index.js"
import * as Cancellation from "./Cancellation.js"
import { admit, type Admitted } from "./CapabilityPolicy.js"
import type { DeviceSession, RunEvent } from "./DeviceSession.js"
import type { NotSent, SubscriptionRejected } from "./Errors.js"
import * as Request from "./ExecutionRequest.js"
import * as Outcome from "./Outcome.js"
import * as Steering from "./Steering.js"

// ---------------------------------------------------------------------------------------------- API

/** What to deliver. The ids are Core's, generated and persisted before delivery. */
export interface PreparedPlan {
  readonly request_id: Ids.PreparationRequestId
  readonly run_id: Ids.RunId
  readonly spec: Request.ExecutionSpec
  readonly input: MessageInput.MessageInput
}

export interface DirectPlan {
  readonly run_id: Ids.RunId
  readonly spec: Request.ExecutionSpec
  readonly input: MessageInput.MessageInput
}

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
   * taken) before the Turn stops taking Run events: observation ends with `subscriber_overflow`. Default 4096.
   */
  readonly factBuffer?: number
}

/** Default bound of the facts waiting for their consumer. */
export const DefaultFactBuffer = 4096
/** Run events taken off the session's subscriber ahead of the driver; a slower driver pushes back into it. */
const RunQueueCapacity = 1024

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

// ---------------------------------------------------------------------------------------------- driver

type Phase = "preparing" | "starting" | "started" | "abandoned"

interface Driver {
  readonly session: DeviceSession
  readonly runId: Ids.RunId
  readonly record: (fact: Outcome.TurnFact) => Effect.Effect<void>
  /**
   * Records `Dispatching{type}`; succeeds with true once the send may follow (at once, or with
   * `durableDispatch` when the consumer confirmed it journaled), false when it was refused (the
   * `NotDispatched` fact is already recorded).
   */
  readonly boundary: (type: Outcome.DispatchType) => Effect.Effect<boolean>
  /** True when more facts wait for the consumer than `factBuffer` allows. */
  readonly backlogFull: () => boolean
  readonly state: () => Outcome.TurnState
  readonly settled: Deferred.Deferred<Outcome.TurnResolution>
  readonly turnEnded: Deferred.Deferred<void>
  /** true once the start (or prompt_request) entered the send queue; false when it never will. */
  readonly runDispatched: Deferred.Deferred<boolean>
  readonly abandon: Deferred.Deferred<void>
  phase: Phase
}

const observationEnd = (e: unknown): Outcome.ObservationEnd => {
  if (typeof e === "object" && e !== null && "_tag" in e) {
    if (e._tag === "SubscriberOverflow") return "subscriber_overflow"
    if (e._tag === "ObservationLost" && "reason" in e) return (e as { reason: Outcome.ObservationEnd }).reason
  }
  // A stream that ended without its terminal frame: the connection went away.
  return "disconnected"
}

/** Takes the next item, or reports how the queue ended. Never loses an item when interrupted. */
const takeExit = <A, E>(queue: Queue.Dequeue<A, E>) => Effect.exit(Queue.take(queue))

const notDispatched = (
  type: Outcome.DispatchType,
  e: NotSent | SubscriptionRejected,
  extra: { readonly delivery_id?: string; readonly input_id?: string } = {}
): Outcome.TurnFact => ({
  _tag: "NotDispatched",
  type,
  reason: e._tag === "NotSent" ? e.reason : "subscription_rejected",
  ...extra
})

/** Sends and journals the dispatch boundary. */
const dispatch = (d: Driver, type: Outcome.DispatchType, send: Effect.Effect<void, NotSent>) =>
  Effect.matchEffect(send, {
    onFailure: (e) => Effect.as(d.record(notDispatched(type, e)), false),
    onSuccess: () => Effect.as(d.record({ _tag: "Dispatched", type }), true)
  })

/** A request that carries or may start the Run: `Dispatching` first (durable when asked), then the send. */
const dispatchRun = (d: Driver, type: "execution_prepare" | "execution_start" | "prompt_request", send: Effect.Effect<void, NotSent>) =>
  Effect.flatMap(d.boundary(type), (go) => (go ? dispatch(d, type, send) : Effect.succeed(false)))

/** Step 4: consume Run events until done, loss, or another fact settled the Turn (a cancellation receipt). */
const consumeRun = (d: Driver, runQueue: Queue.Dequeue<RunEvent, unknown>) =>
  Effect.gen(function*() {
    let overflowed = false
    while (true) {
      if (Deferred.isDoneUnsafe(d.settled)) break
      // Hot path: take what is buffered without forking; race the settlement only when idle.
      const buffered = yield* Queue.poll(runQueue)
      const next = Option.isSome(buffered)
        ? { _tag: "Item" as const, exit: Exit.succeed(buffered.value) }
        : yield* Effect.raceFirst(
          Effect.map(takeExit(runQueue), (exit) => ({ _tag: "Item" as const, exit })),
          Effect.as(Deferred.await(d.settled), { _tag: "Settled" as const })
        )
      if (next._tag === "Settled") break
      const exit = next.exit
      if (Exit.isSuccess(exit)) {
        if (d.backlogFull()) {
          // The consumer of the facts fell behind its bound: stop observing rather than buffer without end.
          overflowed = true
          yield* Effect.logWarning("turn facts consumer fell behind; observation ended").pipe(
            Effect.annotateLogs({ reason: "subscriber_overflow" })
          )
          yield* d.record({ _tag: "RunObservationEnded", reason: "subscriber_overflow" })
          break
        }
        yield* d.record({ _tag: "RunEvent", event: exit.value })
        if (exit.value.type === "done") break
        continue
      }
      // The stream ends normally only after done; any other end is a loss of observation.
      const error = Pull.isDoneCause(exit.cause) ? undefined : Option.getOrUndefined(Cause.findErrorOption(exit.cause))
      yield* d.record({ _tag: "RunObservationEnded", reason: observationEnd(error) })
      break
    }
    yield* Deferred.succeed(d.turnEnded, undefined)
    // A pending cancellation (≤ 15 s) or in-flight input (grace) still owns the settlement.
    yield* Deferred.await(d.settled)
    // Events already buffered after settlement are evidence only (journal draining), within the bound.
    while (!overflowed && !d.backlogFull()) {
      const polled = yield* Queue.poll(runQueue)
      if (Option.isNone(polled)) break
      yield* d.record({ _tag: "RunEvent", event: polled.value })
    }
    // A failed Turn whose Run may still be running unobserved: best-effort abort (no receipt, owns nothing).
    const s = d.state()
    const r = s.resolution
    if (
      r._tag === "Settled" && s.done === undefined && s.cancel === undefined && (s.startSent || s.directSent) &&
      (r.outcome.error_code === "event_stream_incomplete" || r.outcome.error_code === "delivery_unknown")
    ) {
      const abort = Request.promptCancel(d.runId)
      if (Result.isSuccess(abort)) yield* dispatch(d, "prompt_cancel", d.session.send(abort.success))
    }
  })

/** Releases an abandoned admission once a handle is known. */
const releaseAbandoned = (
  d: Driver,
  requestId: Ids.PreparationRequestId,
  prepQueue: Queue.Dequeue<Preparation.PreparationStatusPayload, unknown>,
  knownHandle: Ids.AdmissionHandle | undefined
) =>
  Effect.gen(function*() {
    yield* d.record({ _tag: "Abandoned" })
    let handle = knownHandle
    if (handle === undefined) {
      // The admission expires on its own; observe at most that long for its handle.
      handle = yield* Effect.gen(function*() {
        while (true) {
          const exit = yield* takeExit(prepQueue)
          if (Exit.isFailure(exit)) return undefined
          yield* d.record({ _tag: "PreparationStatus", status: exit.value })
          if (exit.value.handle !== undefined && exit.value.state !== "rejected") return exit.value.handle
        }
      }).pipe(Effect.timeoutOrElse({ duration: Limits.AdmissionExpiry, orElse: () => Effect.undefined }))
    }
    if (handle === undefined) return
    const release = Request.executionRelease(requestId, handle)
    if (Result.isSuccess(release)) yield* dispatch(d, "execution_release", d.session.send(release.success))
  })

const preparedDriver = (
  d: Driver,
  plan: PreparedPlan,
  prepare: Request.PrepareMessage
) =>
  Effect.gen(function*() {
    const { session } = d
    // Step 1: subscribe to the preparation status, then send execution_prepare.
    const prepStream = yield* Effect.result(session.subscribePreparation(plan.request_id))
    if (Result.isFailure(prepStream)) return yield* d.record(notDispatched("execution_prepare", prepStream.failure))
    // At most 16 statuses per subscription (the session's buffer); terminal states end it.
    const prepQueue = yield* Stream.toQueue(prepStream.success, { capacity: "unbounded" })
    if (!(yield* dispatchRun(d, "execution_prepare", session.send(prepare)))) return

    // Step 2: preparing / ready.
    let handle: Ids.AdmissionHandle | undefined
    let ready: Preparation.PreparationStatusPayload | undefined
    while (ready === undefined) {
      const next = yield* Effect.raceFirst(
        Effect.map(takeExit(prepQueue), (exit) => ({ _tag: "Item" as const, exit })),
        Effect.as(Deferred.await(d.abandon), { _tag: "Abandon" as const })
      )
      if (next._tag === "Abandon") return yield* releaseAbandoned(d, plan.request_id, prepQueue, handle)
      const exit = next.exit
      if (Exit.isFailure(exit)) {
        // A stream that ended normally delivered a terminal state, which resolved the Turn.
        if (!Outcome.isResolved(d.state())) {
          const error = Pull.isDoneCause(exit.cause) ? undefined : Option.getOrUndefined(Cause.findErrorOption(exit.cause))
          yield* d.record({ _tag: "PreparationObservationEnded", reason: observationEnd(error) })
        }
        return
      }
      const status = exit.value
      yield* d.record({ _tag: "PreparationStatus", status })
      if (Outcome.isResolved(d.state())) return
      if (status.state !== "rejected" && status.handle !== undefined) handle = status.handle
      if (status.state === "ready" && status.executor_id !== undefined && status.handle !== undefined) ready = status
    }
    if (d.phase === "abandoned") return yield* releaseAbandoned(d, plan.request_id, prepQueue, handle)
    d.phase = "starting"

    // Step 3: subscribe to the Run, then send execution_start.
    const start = Request.executionStart(
      plan.request_id,
      { executor_id: ready.executor_id!, handle: ready.handle! },
      plan.run_id,
      plan.input
    )
    if (Result.isFailure(start)) return yield* Effect.die(start.failure) // validated before delivery
    const runStream = yield* Effect.result(session.subscribeDurable(plan.run_id))
    if (Result.isFailure(runStream)) {
      yield* d.record(notDispatched("execution_start", runStream.failure))
      return yield* releaseAbandonedAfterRefusal(d, plan.request_id, ready.handle!)
    }
    const runQueue = yield* Stream.toQueue(runStream.success, { capacity: RunQueueCapacity })
    const sent = yield* dispatchRun(d, "execution_start", session.send(start.success))
    yield* Deferred.succeed(d.runDispatched, sent)
    if (!sent) return yield* releaseAbandonedAfterRefusal(d, plan.request_id, ready.handle!)
    d.phase = "started"

    // starting / started / a start rejection keep arriving on the preparation stream.
    yield* Effect.forkScoped(
      Effect.gen(function*() {
        while (true) {
          const exit = yield* takeExit(prepQueue)
          if (Exit.isFailure(exit)) {
            // A normal end follows a terminal state; only a failure is a loss of observation.
            if (!Pull.isDoneCause(exit.cause)) {
              const error = Option.getOrUndefined(Cause.findErrorOption(exit.cause))
              yield* d.record({ _tag: "PreparationObservationEnded", reason: observationEnd(error) })
            }
            return
          }
          yield* d.record({ _tag: "PreparationStatus", status: exit.value })
        }
      })
    )
    // Step 4.
    yield* consumeRun(d, runQueue)
  })

/** The start never entered the queue: the reservation is Core's to abandon (no Run input was submitted). */
const releaseAbandonedAfterRefusal = (d: Driver, requestId: Ids.PreparationRequestId, handle: Ids.AdmissionHandle) =>
  Effect.gen(function*() {
    const release = Request.executionRelease(requestId, handle)
    if (Result.isSuccess(release)) yield* dispatch(d, "execution_release", d.session.send(release.success))
  })

const directDriver = (d: Driver, plan: DirectPlan, request: Request.PromptMessage) =>
  Effect.gen(function*() {
    const runStream = yield* Effect.result(d.session.subscribeDurable(plan.run_id))
    if (Result.isFailure(runStream)) {
      yield* Deferred.succeed(d.runDispatched, false)
      return yield* d.record(notDispatched("prompt_request", runStream.failure))
    }
    const runQueue = yield* Stream.toQueue(runStream.success, { capacity: RunQueueCapacity })
    const sent = yield* dispatchRun(d, "prompt_request", d.session.send(request))
    yield* Deferred.succeed(d.runDispatched, sent)
    if (!sent) return
    d.phase = "started"
    yield* consumeRun(d, runQueue)
  })

// ---------------------------------------------------------------------------------------------- Turn

type Admission = Result.Result<Admitted, Outcome.AdmissionRejection | Outcome.ConfigurationRejected>

const makeTurn = (
  session: DeviceSession,
  runId: Ids.RunId,
  spec: Request.ExecutionSpec,
  admission: Admission,
  initialPhase: Phase,
  options: DeliveryOptions,
  run: (d: Driver) => Effect.Effect<void, never, Scope.Scope>
): Effect.Effect<Turn, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    // Never full: the driver stops taking Run events once `factBuffer` facts wait (see consumeRun), and
    // what follows is bounded by the Turn's own operations. Recording never waits, so settlement is immediate.
    const facts = yield* Queue.unbounded<Outcome.TurnFact, Cause.Done>()
    const settled = yield* Deferred.make<Outcome.TurnResolution>()
    const finished = yield* Deferred.make<Outcome.TurnResolution>()
    let state = Outcome.initial
    const durable = options.durableDispatch === true
    const factBuffer = Math.max(1, options.factBuffer ?? DefaultFactBuffer)
    /** Facts recorded so far, and how many of them the consumer confirmed journaled. */
    let offered = 0
    let confirmed = 0
    /** Set by endObservation: every later boundary is refused. */
    let refusing = false
    /** The boundary waiting for its fact's confirmation (the driver is sequential: at most one). */
    let barrier: { readonly index: number; readonly type: Outcome.DispatchType; readonly go: Deferred.Deferred<boolean> } | undefined

    // Facts come from several fibers; each is applied and journaled in one synchronous step.
    const recordUnsafe = (fact: Outcome.TurnFact): number => {
      const before = Outcome.isResolved(state)
      state = Outcome.step(state, fact)
      Queue.offerUnsafe(facts, fact)
      offered++
      if (!before && Outcome.isResolved(state)) Deferred.doneUnsafe(settled, Exit.succeed(state.resolution))
      return offered
    }
    const record = (fact: Outcome.TurnFact) =>
      Effect.sync(() => {
        recordUnsafe(fact)
      })

    const refuse = (type: Outcome.DispatchType) => {
      recordUnsafe({ _tag: "NotDispatched", type, reason: "journal_unavailable" })
    }

    const boundary = (type: Outcome.DispatchType): Effect.Effect<boolean> =>
      Effect.suspend(() => {
        if (refusing) {
          refuse(type)
          return Effect.succeed(false)
        }
        const index = recordUnsafe({ _tag: "Dispatching", type })
        if (!durable || confirmed >= index) return Effect.succeed(true)
        const go = Deferred.makeUnsafe<boolean>()
        barrier = { index, type, go }
        return Deferred.await(go)
      })

    const journaled = Effect.sync(() => {
      confirmed++
      if (barrier !== undefined && confirmed >= barrier.index) {
        const go = barrier.go
        barrier = undefined
        Deferred.doneUnsafe(go, Exit.succeed(true))
      }
    })

    const d: Driver = {
      session,
      runId,
      record,
      boundary,
      backlogFull: () => (durable ? offered - confirmed : Queue.sizeUnsafe(facts)) >= factBuffer,
      state: () => state,
      settled,
      turnEnded: yield* Deferred.make<void>(),
      runDispatched: yield* Deferred.make<boolean>(),
      abandon: yield* Deferred.make<void>(),
      phase: initialPhase
    }

    const finish = Effect.sync(() => {
      if (barrier !== undefined) Deferred.doneUnsafe(barrier.go, Exit.succeed(false))
      barrier = undefined
      Deferred.doneUnsafe(d.runDispatched, Exit.succeed(false))
      Deferred.doneUnsafe(d.turnEnded, Exit.void)
      Deferred.doneUnsafe(finished, Exit.succeed(state.resolution))
      Queue.endUnsafe(facts)
    })
    // Closing the Turn's scope stops observation (it settles nothing) and ends the fact stream.
    yield* Effect.addFinalizer(() => finish)

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
              return record({ _tag: "InputWritten", input_id: progress.input_id })
            case "Resending":
              return Effect.void
          }
        },
        ...(options.inputGraceAfterTurnEnd === undefined ? {} : { graceAfterTurnEnd: options.inputGraceAfterTurnEnd }),
        ...(options.steerRetryInterval === undefined ? {} : { retryInterval: options.steerRetryInterval })
      })
      // The driver's subscriptions live in their own scope, closed when it finishes.
      const logFinished = Effect.suspend(() => {
        const r = state.resolution
        return Effect.logDebug("turn finished").pipe(
          Effect.annotateLogs({
            resolution: r._tag,
            ...(r._tag === "Settled" ? { status: r.outcome.status, error_code: r.outcome.error_code ?? "" } : {}),
            ...(r._tag === "Unclaimed" ? { reason: r.reason } : {})
          })
        )
      })
      yield* Effect.forkIn(
        Effect.scoped(run(d)).pipe(
          Effect.ensuring(finish),
          Effect.andThen(logFinished),
          Effect.annotateLogs({ device_id: session.deviceId, run_id: runId })
        ),
        scope
      )
    }

    const notActive = new Outcome.TurnNotActive({ run_id: runId })

    const steer: Turn["steer"] = (inputId, input) =>
      Effect.gen(function*() {
        const channel = steering
        if (channel === undefined || Outcome.isResolved(state)) return yield* notActive
        if (!(yield* Deferred.await(d.runDispatched)) || Outcome.isResolved(state)) return yield* notActive
        const work = channel.deliver(inputId, input).pipe(
          Effect.tap(() => record({ _tag: "InputAccepted", input_id: inputId })),
          Effect.tapError((e) => {
            switch (e._tag) {
              case "InputRejected":
                return record({ _tag: "InputRejected", input_id: inputId, code: e.code })
              case "InputOutcomeUnknown":
                return record({ _tag: "InputUnknown", input_id: inputId, reason: e.reason })
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
          if (Outcome.isResolved(state) || d.phase === "abandoned") return "inactive" as const
          if (d.phase === "preparing") {
            d.phase = "abandoned"
            return "abandon" as const
          }
          return "cancel" as const
        })
        if (decision === "inactive") return yield* notActive
        if (decision === "abandon") {
          yield* Deferred.succeed(d.abandon, undefined)
          const resolution = yield* Deferred.await(settled)
          if (resolution._tag === "Settled" && resolution.outcome.status === "cancelled") {
            return { _tag: "Abandoned" } satisfies CancelResult
          }
          return yield* notActive
        }
        // The cancellation must follow the start in the send queue.
        if (!(yield* Deferred.await(d.runDispatched)) || Outcome.isResolved(state)) return yield* notActive
        const work = Cancellation.cancel(session, runId, deliveryId, {
          onDispatched: record({ _tag: "Dispatched", type: "prompt_cancel", delivery_id: deliveryId })
        }).pipe(
          Effect.tapError((e) => record(cancelFact(deliveryId, e))),
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
        if (refusing) return
        refusing = true
        if (barrier !== undefined) {
          // Refused before its send: recorded first, so the journal proves nothing left.
          const waiting = barrier
          barrier = undefined
          refuse(waiting.type)
          Deferred.doneUnsafe(waiting.go, Exit.succeed(false))
        }
        if (Outcome.isResolved(state)) return
        recordUnsafe({ _tag: "RunObservationEnded", reason })
        if (d.phase === "preparing") {
          d.phase = "abandoned"
          Deferred.doneUnsafe(d.abandon, Exit.void)
        }
      })

    const resolution = Deferred.await(finished)
    const turn: Turn = {
      runId,
      admitted,
      facts: Stream.fromQueue(facts),
      settled: Deferred.await(settled),
      resolution,
      result: Effect.flatMap(resolution, (r) => {
        if (r._tag === "Pending") return Effect.die("the Turn's scope closed before it resolved")
        const mapped = Outcome.toResult(runId, spec.agent_kind, r)
        return mapped._tag === "Success" ? Effect.succeed(mapped.outcome) : Effect.fail(mapped.error)
      }),
      snapshot: Effect.sync(() => state),
      journaled,
      endObservation,
      steer,
      cancel
    }
    return turn
  })

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

// ---------------------------------------------------------------------------------------------- entry points

/**
 * The final admission check and the request, against the connection's current declaration. A refusal
 * resolves the Turn before anything is sent.
 */
const admitAndBuild = <M>(
  session: DeviceSession,
  spec: Request.ExecutionSpec,
  input: MessageInput.MessageInput,
  build: (admitted: Admitted) => Result.Result<M, Outcome.ConfigurationRejected | Outcome.CapabilityUnsupported>
) =>
  Effect.map(session.declaration, (declaration) =>
    Result.flatMap(
      Result.flatMap(admit(Request.admissionInput(spec, Request.requestFactsFor(input)), declaration), (admitted) =>
        Result.map(Request.validateInput(input), () => admitted)),
      (admitted) => Result.map(build(admitted), (message) => ({ admitted, message }))
    ))

/**
 * Delivers a prepared Turn (the five steps) on `session`. Returns the Turn handle at once; the Turn runs in
 * the caller's scope. The final admission check runs first: a refusal (unsupported capability, invalid
 * binding, unknown capabilities, unavailable Harness, invalid configuration) resolves the Turn with nothing
 * sent. Capacity (`preparation_capacity`) resolves it `Unclaimed`: retry-safe. Every other outcome is in
 * `result` / `resolution`, and never authorizes a replay.
 */
export const deliverPrepared: (
  session: DeviceSession,
  plan: PreparedPlan,
  options?: DeliveryOptions
) => Effect.Effect<Turn, never, Scope.Scope> = Effect.fn("Delivery.deliverPrepared")(
  function*(session: DeviceSession, plan: PreparedPlan, options: DeliveryOptions = {}) {
    const built = yield* admitAndBuild(session, plan.spec, plan.input, (admitted) =>
      Request.executionPrepare(plan.request_id, plan.spec, admitted))
    return yield* makeTurn(
      session,
      plan.run_id,
      plan.spec,
      Result.map(built, (b) => b.admitted),
      "preparing",
      options,
      (d) => Result.isSuccess(built) ? preparedDriver(d, plan, built.success.message) : Effect.void
    )
  }
)

/**
 * Delivers a Turn directly with `prompt_request` (no admission handle; never a fallback after a failed
 * prepared start): subscribe to the Run, send, consume. Same handle and rules as `deliverPrepared`.
 */
export const deliverDirect: (
  session: DeviceSession,
  plan: DirectPlan,
  options?: DeliveryOptions
) => Effect.Effect<Turn, never, Scope.Scope> = Effect.fn("Delivery.deliverDirect")(
  function*(session: DeviceSession, plan: DirectPlan, options: DeliveryOptions = {}) {
    const built = yield* admitAndBuild(session, plan.spec, plan.input, (admitted) =>
      Request.promptRequest(plan.run_id, plan.spec, admitted, plan.input))
    return yield* makeTurn(
      session,
      plan.run_id,
      plan.spec,
      Result.map(built, (b) => b.admitted),
      "starting",
      options,
      (d) => Result.isSuccess(built) ? directDriver(d, plan, built.success.message) : Effect.void
    )
  }
)
