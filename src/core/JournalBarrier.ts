/**
 * The fact journal of one delivered Turn and its durable dispatch boundary (see `DeliveryOptions`).
 *
 * Facts come from several fibers; each is applied to the projection and queued for the consumer in one
 * synchronous step, so the resolution never lags the facts. With `durable`, a Run-carrying request waits
 * until the consumer confirmed its `Dispatching` fact journaled (`journaled`, once per fact in order); once
 * the consumer gave up (`refuse`), every boundary is refused and recorded `NotDispatched{journal_unavailable}`,
 * so the journal proves nothing left.
 *
 * The queue is never full: the driver stops taking Run events once `factBuffer` facts wait (`backlogFull`)
 * and waits for the consumer to make room (`awaitRoom`; the Run's subscriber then fills and the connection
 * stops reading: backpressure down to the socket). What follows is bounded by the Turn's own operations.
 * Only a consumer that confirms (or, without `durable`, takes) nothing for the stall budget counts as gone.
 */
import { type Cause, Deferred, type Duration, Effect, Exit, Queue, Stream } from "effect"
import { Signal } from "./internal/turnWait.js"
import * as Projection from "./TurnProjection.js"
import type { DispatchType, TurnFact } from "./TurnFact.js"
import type { TurnResolution } from "./TurnOutcome.js"

export interface JournalBarrier {
  /** Every fact in order (single consumer); ends after `close`. */
  readonly facts: Stream.Stream<TurnFact>
  /** Applies and queues one fact at once; returns its index (1-based). */
  readonly append: (fact: TurnFact) => number
  readonly record: (fact: TurnFact) => Effect.Effect<void>
  /**
   * Records `Dispatching{type}`; succeeds with true once the send may follow (at once, or when durable once
   * the consumer confirmed it), false when it was refused (`NotDispatched` already recorded).
   */
  readonly boundary: (type: DispatchType) => Effect.Effect<boolean>
  /** The consumer confirms the next fact journaled. */
  readonly journaled: Effect.Effect<void>
  /** True when more facts wait for the consumer than the bound allows. */
  readonly backlogFull: () => boolean
  /**
   * Waits until the backlog is below the bound: true then; false when the consumer made no progress (no fact
   * confirmed, or taken without `durable`) for `stallBudget`.
   */
  readonly awaitRoom: (stallBudget: Duration.Duration) => Effect.Effect<boolean>
  /** Refuses every later boundary and the one waiting now. False when it already refused. */
  readonly refuse: () => boolean
  readonly state: () => Projection.TurnState
  /** Completes once the projection resolved. */
  readonly settled: Deferred.Deferred<TurnResolution>
  /** Fires with `settled`, for a wait that watches it beside its queues (`turnWait.awaitAny`). */
  readonly settledSignal: Signal
  /** Releases a waiting boundary (refused) and ends the fact stream. Idempotent. */
  readonly close: () => void
}

export const make = Effect.fnUntraced(function*(runId: string, options: { readonly durable: boolean; readonly factBuffer: number }) {
  const queue = yield* Queue.unbounded<TurnFact, Cause.Done>()
  const settled = yield* Deferred.make<TurnResolution>()
  const settledSignal = new Signal()
  let state = Projection.initial(runId)
  /** Facts recorded so far, and how many of them the consumer confirmed journaled. */
  let offered = 0
  let confirmed = 0
  let taken = 0
  /**
   * Completed (and dropped) when the consumer makes progress; made only while `awaitRoom` waits, not once per
   * confirmed fact.
   */
  let progress: Deferred.Deferred<void> | undefined
  const signalProgress = () => {
    const done = progress
    if (done === undefined) return
    progress = undefined
    Deferred.doneUnsafe(done, Exit.void)
  }
  const backlog = () => (options.durable ? offered - confirmed : offered - taken)
  let refusing = false
  /** The boundary waiting for its fact's confirmation (the driver is sequential: at most one). */
  let barrier: { readonly index: number; readonly type: DispatchType; readonly go: Deferred.Deferred<boolean> } | undefined

  const append = (fact: TurnFact): number => {
    const before = Projection.isResolved(state)
    state = Projection.step(state, fact)
    Queue.offerUnsafe(queue, fact)
    offered++
    if (!before && Projection.isResolved(state)) {
      Deferred.doneUnsafe(settled, Exit.succeed(state.resolution))
      settledSignal.fire()
    }
    return offered
  }
  const refused = (type: DispatchType) => {
    append({ _tag: "NotDispatched", type, reason: "journal_unavailable" })
  }
  const release = (go: boolean) => {
    if (barrier === undefined) return
    const waiting = barrier
    barrier = undefined
    Deferred.doneUnsafe(waiting.go, Exit.succeed(go))
  }

  const made: JournalBarrier = {
    // Counted per array the consumer pulls (keeps the queue's chunks: the dev Core groups its writes by them).
    facts: Stream.fromQueue(queue).pipe(Stream.mapArray((facts) => {
      taken += facts.length
      if (!options.durable) signalProgress()
      return facts
    })),
    append,
    record: (fact) => Effect.sync(() => void append(fact)),
    boundary: (type) =>
      Effect.suspend(() => {
        if (refusing) {
          refused(type)
          return Effect.succeed(false)
        }
        const index = append({ _tag: "Dispatching", type })
        if (!options.durable || confirmed >= index) return Effect.succeed(true)
        const go = Deferred.makeUnsafe<boolean>()
        barrier = { index, type, go }
        return Deferred.await(go)
      }),
    journaled: Effect.sync(() => {
      confirmed++
      if (barrier !== undefined && confirmed >= barrier.index) release(true)
      if (options.durable) signalProgress()
    }),
    backlogFull: () => backlog() >= options.factBuffer,
    awaitRoom: (stallBudget) =>
      Effect.suspend(() => {
        if (backlog() < options.factBuffer) return Effect.succeed(true)
        return Deferred.await(progress ??= Deferred.makeUnsafe<void>()).pipe(
          Effect.as(true),
          Effect.timeoutOrElse({ duration: stallBudget, orElse: () => Effect.succeed(false) })
        )
      }).pipe(
        // Each wait ends at the consumer's next step; keep waiting while it progresses and the bound is reached.
        Effect.repeat({ while: (progressed) => progressed && backlog() >= options.factBuffer })
      ),
    refuse: () => {
      if (refusing) return false
      refusing = true
      // Refused before its send: recorded first, so the journal proves nothing left.
      if (barrier !== undefined) {
        refused(barrier.type)
        release(false)
      }
      return true
    },
    state: () => state,
    settled,
    settledSignal,
    close: () => {
      signalProgress()
      release(false)
      Queue.endUnsafe(queue)
    }
  }
  return made
})
