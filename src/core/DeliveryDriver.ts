/**
 * The delivery driver of one Turn (protocol "Preparation and execution order"): the five steps of a prepared
 * Turn and the direct `prompt_request` path, recording every dispatch and observation as a fact through the
 * Turn's journal barrier. `DeliveryTurn.ts` owns the Turn handle and runs a driver in the Turn's scope.
 *
 *  1. subscribe to the preparation status, then send `execution_prepare` (no Run input);
 *  2. `preparing` / `ready` (Executor id, handle, revision, expiry);
 *  3. subscribe to the Run, then send `execution_start` (`started` confirms the transfer; output can race it);
 *  4. consume Run events until `done` or loss of observation;
 *  5. to abandon before start send `execution_release`; after start only `prompt_cancel`.
 */
import { Cause, Clock, Deferred, Duration, Effect, Exit, Option, Pull, Queue, Result, type Scope, Stream } from "effect"
import { type Ids, Limits, type MessageInput, type Preparation } from "../proto/index.js"
import type { DeviceSession, RunEvent } from "./DeviceSession.js"
import type { NotSent, ObservationLost, SubscriberOverflow, SubscriptionRejected } from "./Errors.js"
import * as Request from "./ExecutionRequest.js"
import type * as Outcome from "./Outcome.js"
import * as CoreMetrics from "./CoreMetrics.js"
import { armDeadline, type Deadlines } from "./DeliveryDeadlines.js"
import { awaitAny, canTake, Signal } from "./internal/turnWait.js"
import * as Subscriber from "./Subscriber.js"
import * as Projection from "./TurnProjection.js"

/** What a prepared Turn delivers (the ids are Core's, generated and persisted before delivery). */
export interface PreparedPlan {
  readonly request_id: Ids.PreparationRequestId
  readonly run_id: Ids.RunId
  readonly spec: Request.ExecutionSpec
  readonly input: MessageInput.MessageInput
}

/** What a direct Turn delivers. */
export interface DirectPlan {
  readonly run_id: Ids.RunId
  readonly spec: Request.ExecutionSpec
  readonly input: MessageInput.MessageInput
}

/** Run events taken off a subscription that is not the session's own subscriber (a double) by a pump fiber. */
const RunQueueCapacity = 1024

export type Phase = "preparing" | "starting" | "started" | "abandoned"

export interface Driver {
  readonly session: DeviceSession
  readonly runId: Ids.RunId
  readonly record: (fact: Outcome.TurnFact) => Effect.Effect<void>
  /** `record` as a plain call, inside a running step (a generator's body): no Effect per fact (issue 18, "tmain"). */
  readonly append: (fact: Outcome.TurnFact) => void
  /**
   * Records `Dispatching{type}`; succeeds with true once the send may follow (at once, or with
   * `durableDispatch` when the consumer confirmed it journaled), false when it was refused (the
   * `NotDispatched` fact is already recorded).
   */
  readonly boundary: (type: Outcome.DispatchType) => Effect.Effect<boolean>
  /** True when more facts wait for the consumer than `factBuffer` allows. */
  readonly backlogFull: () => boolean
  /** Waits for room below `factBuffer`; false when the consumer made no progress for the stall budget. */
  readonly awaitRoom: Effect.Effect<boolean>
  readonly state: () => Outcome.TurnState
  readonly settled: Deferred.Deferred<Outcome.TurnResolution>
  /** Fires with `settled` (the driver's waits watch it beside their queues). */
  readonly settledSignal: Signal
  readonly turnEnded: Deferred.Deferred<void>
  /** true once the start (or prompt_request) entered the send queue; false when it never will. */
  readonly runDispatched: Deferred.Deferred<boolean>
  /** Fired to abandon the preparation (`cancel` before start, `endObservation`). */
  readonly abandon: Signal
  /** How long step 2 waits for `ready` (or, after `failed{…cleanup_unconfirmed}`, for the confirmed release). */
  readonly preparationTimeout: Duration.Duration
  readonly cleanupConfirmTimeout: Duration.Duration
  readonly deadlines: Deadlines | undefined
  phase: Phase
}

/** Why a subscription's queue ended without its terminal item. */
const observationEnd = (cause: Cause.Cause<ObservationLost | SubscriberOverflow | Cause.Done>): Outcome.ObservationEnd => {
  const error = Cause.findErrorOption(cause)
  if (Option.isNone(error)) return "disconnected" // ended without its terminal frame: the connection went away
  switch (error.value._tag) {
    case "SubscriberOverflow":
      return "subscriber_overflow"
    case "ObservationLost":
      return error.value.reason
    case "Done":
      return "disconnected"
  }
}

type Subscription<A> = Queue.Dequeue<A, ObservationLost | SubscriberOverflow | Cause.Done>

/**
 * The subscription's items as a queue the driver takes from on its own fiber: the session's subscriber queue
 * itself (`Subscriber.queueOf`: no pump fiber and no second buffer per subscription; a slower driver pushes back
 * into the subscriber, whose producer waits for room or overflows by the subscription's own rule), else the
 * stream pumped into a queue of `capacity`.
 */
const subscriptionQueue = <A>(
  stream: Stream.Stream<A, ObservationLost | SubscriberOverflow>,
  capacity: number | "unbounded"
): Effect.Effect<Subscription<A>, never, Scope.Scope> => {
  const direct = Subscriber.queueOf(stream)
  return direct !== undefined ? Effect.succeed(direct) : Stream.toQueue(stream, { capacity })
}

export const notDispatched = (
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

/**
 * Records the preparation statuses buffered after the start (`starting` / `started` / a start rejection keep
 * arriving on that stream); the queue while it is open, undefined once it ended.
 */
const recordPreparation = Effect.fnUntraced(function*(d: Driver, prepQueue: Subscription<Preparation.PreparationStatusPayload>) {
  while (true) {
    const exit = Queue.takeUnsafe(prepQueue)
    if (exit === undefined) return prepQueue
    if (Exit.isFailure(exit)) {
      // A normal end follows a terminal state; only a failure is a loss of observation.
      if (!Pull.isDoneCause(exit.cause)) {
        yield* d.record({ _tag: "PreparationObservationEnded", reason: observationEnd(exit.cause) })
      }
      return undefined
    }
    d.append({ _tag: "PreparationStatus", status: exit.value })
    yield* CoreMetrics.preparationStatus(exit.value)
  }
})

/**
 * Step 4: consume Run events until done, loss, or another fact settled the Turn (a cancellation receipt), and the
 * preparation's remaining statuses as they come; one fiber waits on both queues and the settlement (`awaitAny`).
 */
const consumeRun = Effect.fnUntraced(function*(
  d: Driver,
  runQueue: Subscription<RunEvent>,
  prepQueue?: Subscription<Preparation.PreparationStatusPayload>
) {
  let prep = prepQueue
  let overflowed = false
  while (true) {
    if (prep !== undefined && canTake(prep)) prep = yield* recordPreparation(d, prep)
    if (Deferred.isDoneUnsafe(d.settled)) break
    const exit = Queue.takeUnsafe(runQueue)
    if (exit === undefined) {
      yield* awaitAny(prep === undefined ? [runQueue] : [runQueue, prep], [d.settledSignal])
      continue
    }
    if (Exit.isSuccess(exit)) {
      if (d.backlogFull()) {
        // Backpressure: wait until the facts' consumer makes room (meanwhile the Run's subscriber fills and
        // the connection stops reading). Only a consumer that makes no progress for the stall budget is gone.
        const room = yield* Effect.raceFirst(d.awaitRoom, Effect.as(Deferred.await(d.settled), true))
        if (!room) {
          overflowed = true
          yield* Effect.logWarning("turn facts consumer made no progress within the stall budget; observation ended").pipe(
            Effect.annotateLogs({ reason: "subscriber_overflow" })
          )
          yield* d.record({ _tag: "RunObservationEnded", reason: "subscriber_overflow" })
          break
        }
        if (Deferred.isDoneUnsafe(d.settled)) {
          // Settled while waiting (a cancellation receipt, the journal given up): the event is evidence only.
          if (!d.backlogFull()) yield* d.record({ _tag: "RunEvent", event: exit.value })
          break
        }
      }
      d.append({ _tag: "RunEvent", event: exit.value })
      if (exit.value.type === "done") break
      continue
    }
    // The stream ends normally only after done; any other end is a loss of observation.
    yield* d.record({ _tag: "RunObservationEnded", reason: observationEnd(exit.cause) })
    break
  }
  yield* Deferred.succeed(d.turnEnded, undefined)
  // A pending cancellation (≤ 15 s) or in-flight input (grace) still owns the settlement.
  while (true) {
    if (prep !== undefined && canTake(prep)) prep = yield* recordPreparation(d, prep)
    if (Deferred.isDoneUnsafe(d.settled)) break
    yield* awaitAny(prep === undefined ? [] : [prep], [d.settledSignal])
  }
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

/** Records the preparation's statuses until one carries the admission's handle; undefined once the stream ended. */
const awaitHandle = Effect.fnUntraced(function*(d: Driver, prepQueue: Subscription<Preparation.PreparationStatusPayload>) {
  while (true) {
    const exit = yield* Effect.exit(Queue.take(prepQueue)) // never loses an item when interrupted
    if (Exit.isFailure(exit)) return undefined
    yield* d.record({ _tag: "PreparationStatus", status: exit.value })
    if (exit.value.handle !== undefined && exit.value.state !== "rejected") return exit.value.handle
  }
})

/** Releases an abandoned admission once a handle is known. */
const releaseAbandoned = Effect.fnUntraced(function*(
  d: Driver,
  requestId: Ids.PreparationRequestId,
  prepQueue: Subscription<Preparation.PreparationStatusPayload>,
  knownHandle: Ids.AdmissionHandle | undefined
) {
  yield* d.record({ _tag: "Abandoned" })
  let handle = knownHandle
  if (handle === undefined) {
    // The admission expires on its own; observe at most that long for its handle.
    handle = yield* awaitHandle(d, prepQueue).pipe(
      Effect.timeoutOrElse({ duration: Limits.AdmissionExpiry, orElse: () => Effect.undefined })
    )
  }
  if (handle === undefined) return
  const release = Request.executionRelease(requestId, handle)
  if (Result.isSuccess(release)) yield* dispatch(d, "execution_release", d.session.send(release.success))
})

/** Steps 1 and 2: the admission is ready (its status, handle and preparation queue), or the driver is done. */
const preparePhase = Effect.fnUntraced(function*(d: Driver, plan: PreparedPlan, prepare: Request.PrepareMessage) {
  const { session } = d
  // Step 1: subscribe to the preparation status, then send execution_prepare.
  const prepStream = yield* Effect.result(session.subscribePreparation(plan.request_id))
  if (Result.isFailure(prepStream)) {
    yield* d.record(notDispatched("execution_prepare", prepStream.failure))
    return undefined
  }
  // At most 16 statuses per subscription (the session's buffer); terminal states end it.
  const prepQueue = yield* subscriptionQueue(prepStream.success, "unbounded")
  if (!(yield* dispatchRun(d, "execution_prepare", session.send(prepare)))) return undefined

  // Step 2: preparing / ready, within the preparation budget (a failed admission whose cleanup is
  // unconfirmed: within the cleanup budget for its confirmed release).
  let handle: Ids.AdmissionHandle | undefined
  let ready: Preparation.PreparationStatusPayload | undefined
  let deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(d.preparationTimeout)
  let cleanupWait = false
  // The budget's timer (the runners' shared one, DeliveryDeadlines.ts, else a sleep on its own fiber in the driver's
  // scope), armed when the driver first waits and again only when the deadline moves; the driver itself waits on
  // the queue and both signals (`awaitAny`).
  let timer: { readonly at: number; readonly expired: Signal; readonly stop: Effect.Effect<void> } | undefined
  while (ready === undefined) {
    // A buffered status is taken first, as a status that raced the deadline or the abandonment wins.
    let exit = Queue.takeUnsafe(prepQueue)
    if (exit === undefined && !d.abandon.fired && !(timer?.at === deadline && timer.expired.fired)) {
      if (timer?.at !== deadline) {
        if (timer !== undefined) yield* timer.stop
        const expired = new Signal()
        timer = { at: deadline, expired, stop: yield* armDeadline(d.deadlines, deadline, expired) }
      }
      yield* awaitAny([prepQueue], [d.abandon, timer.expired])
      exit = Queue.takeUnsafe(prepQueue)
    }
    if (exit === undefined && !d.abandon.fired) {
      // Settles preparation_interrupted (or cleanup_unconfirmed); a known admission is released.
      yield* Effect.logWarning("preparation not ready within its budget; abandoned").pipe(
        Effect.annotateLogs({ request_id: plan.request_id, observation: "preparation_timeout", cleanup_pending: cleanupWait })
      )
      yield* d.record({ _tag: "PreparationObservationEnded", reason: "preparation_timeout" })
      if (handle === undefined || cleanupWait) return undefined
      const release = Request.executionRelease(plan.request_id, handle)
      if (Result.isSuccess(release)) yield* dispatch(d, "execution_release", session.send(release.success))
      return undefined
    }
    if (exit === undefined) {
      yield* releaseAbandoned(d, plan.request_id, prepQueue, handle)
      return undefined
    }
    if (Exit.isFailure(exit)) {
      // A stream that ended normally delivered a terminal state, which resolved the Turn.
      if (!Projection.isResolved(d.state())) {
        yield* d.record({ _tag: "PreparationObservationEnded", reason: observationEnd(exit.cause) })
      }
      return undefined
    }
    const status = exit.value
    d.append({ _tag: "PreparationStatus", status })
    yield* CoreMetrics.preparationStatus(status)
    if (Projection.isResolved(d.state())) return undefined
    if (status.state !== "rejected" && status.handle !== undefined) handle = status.handle
    if (status.state === "failed" && !cleanupWait) {
      // Still pending after `failed`: its cleanup is unconfirmed; wait a bounded time for the release.
      cleanupWait = true
      deadline = Math.min(deadline, (yield* Clock.currentTimeMillis) + Duration.toMillis(d.cleanupConfirmTimeout))
    }
    if (status.state === "ready" && status.executor_id !== undefined && status.handle !== undefined) ready = status
  }
  if (d.phase === "abandoned") {
    yield* releaseAbandoned(d, plan.request_id, prepQueue, handle)
    return undefined
  }
  return { ready, prepQueue }
}, (effect) => effect.pipe(Effect.withSpan("Turn.prepare", { attributes: { "agentwire.wire.type": "execution_prepare" } }, { captureStackTrace: false })))

/** Step 3: subscribe to the Run, then send execution_start; the Run's queue once the start entered the send queue. */
const startPhase = Effect.fnUntraced(function*(d: Driver, plan: PreparedPlan, ready: Preparation.PreparationStatusPayload) {
  const start = Request.executionStart(
    plan.request_id,
    { executor_id: ready.executor_id!, handle: ready.handle! },
    plan.run_id,
    plan.input
  )
  if (Result.isFailure(start)) return yield* Effect.die(start.failure) // validated before delivery
  const runStream = yield* Effect.result(d.session.subscribeDurable(plan.run_id))
  if (Result.isFailure(runStream)) {
    yield* d.record(notDispatched("execution_start", runStream.failure))
    yield* releaseAbandonedAfterRefusal(d, plan.request_id, ready.handle!)
    return undefined
  }
  const runQueue = yield* subscriptionQueue(runStream.success, RunQueueCapacity)
  const sent = yield* dispatchRun(d, "execution_start", d.session.send(start.success))
  yield* Deferred.succeed(d.runDispatched, sent)
  if (sent) yield* CoreMetrics.runStarted
  if (!sent) {
    yield* releaseAbandonedAfterRefusal(d, plan.request_id, ready.handle!)
    return undefined
  }
  d.phase = "started"
  // starting / started / a start rejection keep arriving on the preparation stream: step 4 records them.
  return runQueue
}, (effect) => effect.pipe(Effect.withSpan("Turn.start", { attributes: { "agentwire.wire.type": "execution_start" } }, { captureStackTrace: false })))

/** Step 4 in its span: the Run's events until done or loss of observation. */
const eventsPhase = (
  d: Driver,
  runQueue: Subscription<RunEvent>,
  prepQueue?: Subscription<Preparation.PreparationStatusPayload>
) => Effect.withSpan(consumeRun(d, runQueue, prepQueue), "Turn.events", { captureStackTrace: false })

export const preparedDriver = Effect.fnUntraced(function*(
  d: Driver,
  plan: PreparedPlan,
  prepare: Request.PrepareMessage
) {
  const prepared = yield* preparePhase(d, plan, prepare)
  if (prepared === undefined) return
  d.phase = "starting"
  const runQueue = yield* startPhase(d, plan, prepared.ready)
  if (runQueue === undefined) return
  yield* eventsPhase(d, runQueue, prepared.prepQueue)
})

/** The start never entered the queue: the reservation is Core's to abandon (no Run input was submitted). */
const releaseAbandonedAfterRefusal = Effect.fnUntraced(function*(d: Driver, requestId: Ids.PreparationRequestId, handle: Ids.AdmissionHandle) {
  const release = Request.executionRelease(requestId, handle)
  if (Result.isSuccess(release)) yield* dispatch(d, "execution_release", d.session.send(release.success))
})

export const directDriver = Effect.fnUntraced(function*(d: Driver, plan: DirectPlan, request: Request.PromptMessage) {
  const runStream = yield* Effect.result(d.session.subscribeDurable(plan.run_id))
  if (Result.isFailure(runStream)) {
    yield* Deferred.succeed(d.runDispatched, false)
    return yield* d.record(notDispatched("prompt_request", runStream.failure))
  }
  const runQueue = yield* subscriptionQueue(runStream.success, RunQueueCapacity)
  const sent = yield* dispatchRun(d, "prompt_request", d.session.send(request)).pipe(
    Effect.withSpan("Turn.start", { attributes: { "agentwire.wire.type": "prompt_request" } }, { captureStackTrace: false })
  )
  yield* Deferred.succeed(d.runDispatched, sent)
  if (!sent) return
  yield* CoreMetrics.runStarted
  d.phase = "started"
  yield* eventsPhase(d, runQueue)
})
