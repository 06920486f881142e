/**
 * The dev Core's Turn runners: one fiber per Turn, owned by this service's scope.
 *
 * A runner waits for its device's connection (the gateway's `Connected` events, not a poll), begins an
 * attempt, delivers it with `Delivery.deliverPrepared` (durable dispatch boundary), and persists every fact
 * the delivery layer reports, in order, as it arrives (Run frames as received, dispatches, preparation
 * statuses, receipts; `TurnJournal`), keeping the interaction and input records in step with them. It writes
 * the outcome the projection settles on. A `preparation_capacity` refusal (or unknown capabilities, an
 * unavailable Harness) leaves the Turn unclaimed: it is queued again and retried with capped backoff
 * (nothing was executed); no other outcome is ever retried or replayed.
 *
 * Store writes of a runner are never dropped: a failed write is retried with capped backoff (100 ms doubling
 * to 5 s by default) while later facts wait in the delivery layer's bounded buffer. When one write keeps
 * failing for `journalStallBudget` (30 s), the runner logs an error with the Turn id and ends the Turn's
 * observation (`journal_unavailable`): nothing more is dispatched, and the outcome it settles on is written
 * only after every fact before it is stored (or reconciled from the journal at the next start).
 *
 * Shutdown: first the gateway shuts down (every connection ends with `gateway_shutdown`, so running Turns
 * settle with that observation reason and are recorded), then the runners get a bounded time to record, then
 * what is left is interrupted (such a Turn is reconciled at the next start).
 */
import { Cause, Context, Deferred, Duration, Effect, Fiber, FiberSet, Layer, Option, Result, Stream } from "effect"
import { Ids } from "../../proto/index.js"
import { FreshMap } from "../../proto/FreshMap.js"
import * as Delivery from "../Delivery.js"
import { makeDeadlines } from "../DeliveryDeadlines.js"
import type { DeviceSession } from "../DeviceSession.js"
import { type ExecutionSpec, promptCancel } from "../ExecutionRequest.js"
import * as Functions from "../Functions.js"
import { Gateway } from "../Gateway.js"
import { closeCodeFor } from "../transport/DeviceTransport.js"
import type * as Outcome from "../Outcome.js"
import { DevIds } from "./DevIds.js"
import { failureKind, makeDurable } from "./DurableWrites.js"
import type { LeaseLost } from "./pg/OwnerLeases.js"
import type { StoreFailed } from "./StoreErrors.js"
import * as TurnFence from "./TurnFence.js"
import * as TurnFacts from "./TurnFacts.js"
import { makeStartCache, type StartCache } from "./TurnStartChecks.js"
import { journalVerdict } from "./JournalOutcome.js"
import { SessionInitialization } from "./Initialization.js"
import { settleSpan, turnSpan } from "./TurnTelemetry.js"
import { TurnJournal, type JournalWriter } from "./TurnJournal.js"
import { TurnStore } from "./TurnStore.js"

import type { Active, TurnPlan, TurnsOptions } from "./TurnPlan.js"

export type { Active, TurnPlan, TurnsOptions } from "./TurnPlan.js"

export class TurnRunner extends Context.Service<TurnRunner, {
  /** Starts the runner of a recorded Turn. */
  readonly launch: (plan: TurnPlan) => Effect.Effect<void>
  /**
   * Stops the runner of a Turn whose creation failed (`Turns.ts`, launched before its row committed) and forgets it.
   * Nothing it wrote can commit (every journal row references the Turn's row) and nothing was sent (a send waits
   * for its `Dispatching` to be stored).
   */
  readonly withdraw: (turnId: string) => Effect.Effect<void>
  /** The Turn's live state while its runner is alive. */
  readonly active: (turnId: string) => Option.Option<Active>
  /** Ends every connection, waits `shutdownGrace` for the runners to record, interrupts the rest. Idempotent. */
  readonly shutdown: Effect.Effect<void>
  /** What starts may know without a read: fed by every settle that wrote its row (TurnStartChecks.ts). */
  readonly startCache: StartCache
}>()("agentwire/core/dev/TurnRunner") {}

const make = (options: TurnsOptions) =>
  Effect.gen(function* () {
    const gateway = yield* Gateway
    const store = yield* TurnStore
    const journal = yield* TurnJournal
    const ids = yield* DevIds
    const runners = yield* FiberSet.make()
    const active = new FreshMap<string, Active>()
    /** Completed when shutdown begins: queued runners stop waiting and leave their Turn queued for the next start. */
    const stopping = yield* Deferred.make<void>()
    const retryDelay = Duration.fromInputUnsafe(options.retryDelay ?? Duration.seconds(1))
    const maxRetryDelay = Duration.fromInputUnsafe(options.maxRetryDelay ?? Duration.seconds(10))
    const fence = yield* TurnFence.make
    const deadlines = yield* makeDeadlines // one timer for every runner's preparation budget (DeliveryDeadlines.ts)
    const fencedDurable = fence.guard(makeDurable(options, (a: Active) =>
      a.current === undefined ? Effect.void : a.current.delivery.endObservation("journal_unavailable")))
    /** A store write of the Turn, retried until stored; fenced on the attempt's owner lease (several nodes). */
    const durable = <A>(a: Active, operation: string, write: Effect.Effect<A, StoreFailed | LeaseLost>): Effect.Effect<A, LeaseLost> =>
      fencedDurable(a, operation, a.fence, write)
    const initialization = yield* Effect.serviceOption(SessionInitialization)

    /**
     * The Session's environment initialization, before its first dispatch (Initialization.ts): `undefined` to
     * go on, "retry" to wait and look again, or the definite outcome of a Turn that was never dispatched.
     */
    const initializeFirst = Effect.fnUntraced(function* (a: Active, session: DeviceSession) {
      const env = a.spec.environment
      // `initializes` below is this condition.
      if (Option.isNone(initialization) || env.type === "none" || env.binding === undefined) return undefined
      const writer = yield* durable(a, "journal_open", journal.open(a.turnId, 0))
      const ready = yield* initialization.value.ensure({
        sessionId: a.sessionId,
        session,
        environment: env.binding,
        durable: (operation, write) => durable(a, operation, write),
        notify: (notice) => writer.notify("initialization", notice)
      })
      switch (ready._tag) {
        case "Ready":
          return undefined
        case "Retry":
          return "retry" as const
        case "Failed":
          return { status: "failed", error_code: "initialization_failed", detail: ready.detail } satisfies Outcome.TurnOutcome
        case "Unknown":
          return { status: "failed", error_code: "initialization_unknown", detail: ready.detail } satisfies Outcome.TurnOutcome
      }
    })
    const { flush, onFacts, takeHeld } = TurnFacts.make(store, durable)
    const startCache = makeStartCache()
    const finish = Effect.fnUntraced(function* (a: Active, outcome: Outcome.TurnOutcome, writer: JournalWriter | undefined) {
      a.settling = true
      if (writer !== undefined) yield* durable(a, "begin_attempt", writer.begun)
      const w = writer ?? (yield* durable(a, "journal_open", journal.open(a.turnId, 0)))
      // One transaction: the facts held for it (none after a failed runner), the outcome, the abandoned interactions
      // and the Session's native Session id; then the facts and the outcome are published (TurnFacts.ts).
      const held = writer === undefined ? TurnFacts.nothingHeld : takeHeld(a)
      const settled = yield* durable(a, "complete", w.settle(held.facts, held.options, (entries) =>
        store.settle(a.turnId, outcome, a.sessionId, entries)))
      if (Option.isSome(settled.written)) startCache.settled(settled.written.value)
      yield* durable(a, "finish", settled.publish)
      active.delete(a.turnId)
      yield* Deferred.succeed(a.finished, undefined)
      yield* Effect.logInfo("turn finished").pipe(
        Effect.annotateLogs({ turn_id: a.turnId, run_id: a.runId, status: outcome.status, error_code: outcome.error_code ?? "" })
      )
    }, (effect, _a, outcome) => settleSpan(outcome)(effect))

    /** A cancel of the queued Turn or the start of shutdown, whichever comes first. */
    const cancelledOrStopping = (a: Active) =>
      Effect.raceFirst(
        Effect.as(Deferred.await(a.cancelQueued), "cancelled" as const),
        Effect.as(Deferred.await(stopping), "stopping" as const)
      )
    /** Waits `delay` unless the Turn is cancelled or shutdown begins first. */
    const pause = (a: Active, delay: Duration.Duration) =>
      Effect.raceFirst(cancelledOrStopping(a), Effect.as(Effect.sleep(delay), "retry" as const))

    /** The device's connection; while offline, subscribed to the gateway's events before looking again (no gap). */
    const connection = (a: Active) =>
      Deferred.isDoneUnsafe(stopping) ? Effect.succeed("stopping" as const) : Effect.flatMap(gateway.session(Ids.unsafeMake.deviceId(a.deviceId)),
        (current) => Option.isSome(current) ? Effect.succeed(current.value) : awaitConnection(a, Ids.unsafeMake.deviceId(a.deviceId)))
    const awaitConnection = (a: Active, deviceId: Ids.DeviceId) =>
      Effect.scoped(Effect.gen(function* () {
        const events = yield* gateway.events
        const current = yield* gateway.session(deviceId)
        if (Option.isSome(current)) return current.value
        const connected = events.pipe(
          Stream.filter((e) => e._tag === "Connected" && e.deviceId === deviceId),
          Stream.mapEffect(() => gateway.session(deviceId)),
          Stream.filterMap((session) => Option.isSome(session) ? Result.succeed(session.value) : Result.failVoid),
          Stream.runHead,
          Effect.map(Option.getOrElse(() => "stopping" as const))
        )
        return yield* Effect.raceFirst(connected, cancelledOrStopping(a))
      }))

    const abandonQueued = Effect.fnUntraced(function* (a: Active) {
      const attempt = Option.match(yield* durable(a, "get", store.get(a.turnId)), { onNone: () => 0, onSome: (t) => t.attempt })
      const writer = yield* durable(a, "journal_open", journal.open(a.turnId, attempt))
      yield* durable(a, "journal", writer.record({ _tag: "Abandoned" }))
      yield* finish(a, { status: "cancelled" }, writer)
    })

    /** A Turn settled before any dispatch (its Session's initialization did not complete). */
    const finishUndispatched = (a: Active, outcome: Outcome.TurnOutcome) =>
      Effect.flatMap(durable(a, "journal_open", journal.open(a.turnId, 0)), (writer) => finish(a, outcome, writer))

    /** Shutdown while queued: the Turn stays queued in the store; the next start runs it again. */
    const leaveQueued = (a: Active) =>
      Effect.andThen(Effect.sync(() => active.delete(a.turnId)), Deferred.succeed(a.finished, undefined))

    /** One delivery of the Turn in its own scope: its facts stored as they come, until it resolves. */
    const deliver = Effect.fnUntraced(function* (a: Active, found: DeviceSession, requestId: Ids.PreparationRequestId, writer: JournalWriter, attempt: number) {
      const delivery = yield* Delivery.deliverPrepared(
        found,
        { request_id: requestId, run_id: a.runId, spec: a.spec, input: a.input },
        { ...options.delivery, durableDispatch: true, deadlines }
      )
      const functions = Option.isSome(delivery.admitted)
        ? yield* Functions.make(found, a.runId, { admitted: delivery.admitted.value, engine: a.spec.engine })
        : undefined
      a.current = { session: found, delivery, writer, functions }
      yield* Effect.logInfo("turn delivery started").pipe(
        Effect.annotateLogs({ turn_id: a.turnId, run_id: a.runId, device_id: a.deviceId, attempt })
      )
      // Facts stored in order (consecutive journal-only ones in one statement), each then confirmed to the delivery
      // layer, which holds a Run-carrying send until its `Dispatching` is confirmed (TurnFacts.ts, also `flush`).
      // Once finishing, journal-only facts are held for the outcome's transaction (`finish`); else stored now.
      yield* Stream.runForEachArray(delivery.facts, (facts) => onFacts(a, writer, facts, delivery.journaled, delivery.isFinishing))
      const resolved = yield* delivery.resolution
      if (resolved._tag !== "Settled") yield* flush(a, writer)
      return resolved
    })

    const runTurn = Effect.fnUntraced(function* (a: Active) {
      a.span = Option.getOrUndefined(yield* Effect.option(Effect.currentParentSpan))
      let delay = retryDelay
      let knownLastSeq = a.fresh === true ? 0 : undefined
      while (true) {
        if (Option.isSome(yield* Deferred.poll(a.cancelQueued))) return yield* abandonQueued(a)
        const found = yield* connection(a)
        if (found === "cancelled") return yield* abandonQueued(a)
        if (found === "stopping") return yield* leaveQueued(a)
        const lease = yield* fence.leaseFor(a.deviceId)
        if (fence.enabled && Option.isNone(lease)) {
          // No lease here for the device's connection (it is being replaced): wait for the next one.
          yield* Effect.sleep(TurnFence.leaselessPause)
          continue
        }
        a.fence = Option.getOrUndefined(lease)
        const init = yield* initializeFirst(a, found)
        if (init === "retry") {
          const wait = yield* pause(a, delay)
          if (wait === "cancelled") return yield* abandonQueued(a)
          if (wait === "stopping") return yield* leaveQueued(a)
          delay = Duration.min(Duration.times(delay, 2), maxRetryDelay)
          continue
        }
        if (init !== undefined) return yield* finishUndispatched(a, init)
        if (Option.isSome(yield* Deferred.poll(a.cancelQueued))) return yield* abandonQueued(a)
        const owner = a.fence === undefined || fence.nodeId === undefined
          ? undefined
          : { nodeId: fence.nodeId, generation: a.fence.generation }
        // Created here just now: attempt 1 is begun by its first append's transaction (issue 18), else `writer.begun`.
        const begin = knownLastSeq === 0 ? { deviceId: a.deviceId, owner } : undefined
        const attempt = begin !== undefined ? 1 : yield* durable(a, "begin_attempt", store.beginAttempt(a.turnId, a.deviceId, owner))
        const writer = yield* durable(a, "journal_open", journal.open(a.turnId, attempt, knownLastSeq, begin))
        knownLastSeq = undefined
        const requestId = Ids.unsafeMake.preparationRequestId(yield* ids.next("preparation"))
        const resolution = yield* Effect.scoped(deliver(a, found, requestId, writer, attempt))
        a.current = undefined
        switch (resolution._tag) {
          case "Settled":
            return yield* finish(a, resolution.outcome, writer)
          case "Pending":
            // The Turn's scope closed before it resolved (shutdown): the next start reconciles it.
            return
          case "Unclaimed": {
            // Nothing was executed: queue it again and retry with capped backoff.
            yield* durable(a, "begin_attempt", writer.begun)
            yield* durable(a, "requeue", store.requeue(a.turnId))
            yield* Effect.logInfo("turn unclaimed; queued for another attempt").pipe(
              Effect.annotateLogs({ turn_id: a.turnId, reason: resolution.reason, retry_in_ms: Duration.toMillis(delay) })
            )
            const wait = yield* pause(a, delay)
            if (wait === "cancelled") return yield* abandonQueued(a)
            if (wait === "stopping") return yield* leaveQueued(a)
            delay = Duration.min(Duration.times(delay, 2), maxRetryDelay)
            continue
          }
        }
      }
    }, (effect, a) => Effect.annotateLogs(effect, { turn_id: a.turnId }))

    /**
     * The runner failed (a defect: a fact that cannot be journaled, a bug). It never dies silently: the
     * failure is logged (its kind only, never its text), the Turn's Run gets a best-effort abort, and the Turn
     * settles on what its stored journal proves with `RunObservationEnded{journal_unavailable}`
     * (`JournalOutcome.ts`), so the Session accepts new Turns and cancel answers `TurnNotActive`.
     */
    const runnerFailed = Effect.fnUntraced(function* (a: Active, cause: Cause.Cause<unknown>) {
      if (a.current !== undefined) yield* durable(a, "begin_attempt", a.current.writer.begun)
      const session = a.current?.session
      a.current = undefined
      yield* Effect.logError("turn runner failed; settling the turn from its journal").pipe(
        Effect.annotateLogs({ turn_id: a.turnId, run_id: a.runId, failure: failureKind(cause), observation: "journal_unavailable" })
      )
      const turn = yield* durable(a, "get", store.get(a.turnId))
      const attempt = Option.match(turn, { onNone: () => 0, onSome: (t) => t.attempt })
      const verdict = yield* durable(a, "journal_read", journalVerdict(store, { turnId: a.turnId, runId: a.runId, attempt }, "journal_unavailable"))
      const outcome: Outcome.TurnOutcome = verdict === "requeued"
        ? { status: "failed", error_code: "delivery_failed", detail: "journal_unavailable", observation: "journal_unavailable" }
        : verdict
      if (session !== undefined && outcome.error_code !== undefined && outcome.error_code !== "delivery_failed") {
        const abort = promptCancel(a.runId)
        if (Result.isSuccess(abort)) yield* Effect.ignore(session.send(abort.success))
      }
      yield* finish(a, outcome, undefined)
    }, (effect, a) =>
      // Even this failing must not leave the Turn owned by a dead runner.
      Effect.catchCause(effect, (second) =>
        Cause.hasInterruptsOnly(second)
          ? Effect.failCause(second)
          : Effect.logError("turn runner failed and its outcome could not be recorded").pipe(
            Effect.annotateLogs({ turn_id: a.turnId, failure: failureKind(second) }),
            Effect.andThen(Effect.sync(() => active.delete(a.turnId))),
            Effect.andThen(Deferred.succeed(a.finished, undefined))
          )
      ))

    /**
     * A write of the Turn was refused: a newer owner of the device exists (another node took its lease). The
     * Turn stops being observed here with nothing more recorded (no outcome is invented: the lease sweeper
     * reconciles it from its journal), and the connection here is closed `replaced`.
     */
    const fencedOut = Effect.fnUntraced(function* (a: Active, lost: LeaseLost) {
      const session = a.current?.session
      a.current = undefined
      yield* Effect.logWarning("turn write refused: a newer owner holds the device; observation of the turn ends here").pipe(
        Effect.annotateLogs({ turn_id: a.turnId, run_id: a.runId, device_id: a.deviceId, generation: lost.generation })
      )
      const live = yield* gateway.session(Ids.unsafeMake.deviceId(a.deviceId))
      if (session !== undefined && Option.isSome(live) && live.value.connectionNumber === session.connectionNumber) {
        yield* session.close(closeCodeFor("replaced"), "replaced")
      }
      active.delete(a.turnId)
      yield* Deferred.succeed(a.finished, undefined)
    })

    const launch = Effect.fnUntraced(function* (plan: TurnPlan) {
      const a: Active = {
        ...plan,
        current: undefined,
        pending: new Map(),
        calls: new Map(),
        cancelQueued: yield* Deferred.make<void>(),
        finished: yield* Deferred.make<void>()
      }
      // One runner per Turn in this process: a second launch (a race of two claim paths) is ignored.
      if (active.has(a.turnId)) return yield* Effect.logWarning("turn already running here").pipe(Effect.annotateLogs({ turn_id: a.turnId }))
      active.set(a.turnId, a)
      // Every line of the Turn carries `turn_ms` (time since launch): "turn finished" has its duration.
      const fiber = yield* FiberSet.run(runners, runTurn(a).pipe(Effect.catchTag("LeaseLost", (lost) => fencedOut(a, lost)), Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause) ? Effect.failCause(cause) : runnerFailed(a, cause)
      ), Effect.withLogSpan("turn"), turnSpan(a)))
      a.fiber = fiber
    })

    const withdraw = (turnId: string) =>
      Effect.suspend(() => {
        const a = active.get(turnId)
        if (a === undefined) return Effect.void
        return Effect.andThen(a.fiber === undefined ? Effect.void : Fiber.interrupt(a.fiber), () => {
          if (active.get(turnId) === a) active.delete(turnId)
          return Deferred.succeed(a.finished, undefined)
        })
      })

    // Shutdown: end the connections first so running Turns settle (gateway_shutdown) and get recorded.
    const grace = Duration.fromInputUnsafe(options.shutdownGrace ?? Duration.seconds(20))
    const shutdown = Effect.gen(function* () {
      yield* Deferred.succeed(stopping, undefined)
      yield* gateway.shutdown
      yield* FiberSet.awaitEmpty(runners).pipe(Effect.timeoutOrElse({ duration: grace, orElse: () => Effect.void }))
      // What did not record within the grace is interrupted now (a second call then returns at once); the
      // next start reconciles such a Turn from its journal.
      yield* FiberSet.clear(runners)
    })
    yield* Effect.addFinalizer(() => shutdown)
    return TurnRunner.of({ launch, withdraw, active: (turnId) => Option.fromUndefinedOr(active.get(turnId)), shutdown, startCache })
  })

/** Whether a runner of a Turn with `spec` initializes the Session's environment before its first dispatch. */
export const initializes = (initialization: Option.Option<unknown>, spec: ExecutionSpec): boolean =>
  Option.isSome(initialization) && spec.environment.type !== "none" && spec.environment.binding !== undefined

export const layer = (options: TurnsOptions = {}) => Layer.effect(TurnRunner, make(options))
