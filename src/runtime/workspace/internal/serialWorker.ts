/**
 * The steps of a connection service's active operation (a transfer's, a write's or an export's frames, and the end
 * its budget forces), run one at a time in arrival order by one long-lived fiber of the connection, instead of a
 * fork and a lock per frame (a 64 KiB chunk is a frame: the fork and the lock were a large part of its cost).
 *
 * - `submit` queues a step without waiting: the read loop never waits for a disk write or a reply's send.
 * - A step starts only after the previous one ended (what the per-operation lock guaranteed).
 * - A step that fails or dies is logged (its cause's kind, never data) and the worker goes on with the next one.
 * - The worker lives in the scope it was made in (the connection's): closing it interrupts the running step and
 *   drops the queued ones, as it did for the background fibers they replace.
 */
import { Cause, Effect, Queue, type Scope } from "effect"

export interface SerialWorker {
  /** Queues `step` after every step queued before it; returns at once. */
  readonly submit: (step: Effect.Effect<void>) => Effect.Effect<void>
}

/** A worker whose fiber lives in the caller's scope. `name` labels its log lines. */
export const make = (name: string): Effect.Effect<SerialWorker, never, Scope.Scope> =>
  Effect.gen(function*() {
    const steps = yield* Queue.unbounded<Effect.Effect<void>>()
    const runOne = Effect.flatMap(Queue.take(steps), (step) =>
      Effect.catchCause(step, (cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.void
          : Effect.logError("connection step failed").pipe(Effect.annotateLogs({ worker: name, defect: Cause.hasDies(cause) }))))
    yield* Effect.forkScoped(Effect.forever(runOne))
    return { submit: (step) => Effect.sync(() => void Queue.offerUnsafe(steps, step)) }
  })
