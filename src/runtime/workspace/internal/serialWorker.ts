/**
 * The steps of a connection service's active operation (a transfer's, a write's or an export's frames, and the end
 * its budget forces), run one at a time in arrival order by one long-lived fiber of the connection, instead of a
 * fork and a lock per frame (a 64 KiB chunk is a frame: the fork and the lock were a large part of its cost).
 *
 * - `submit` queues a step without waiting: the read loop never waits for a disk write or a reply's send.
 * - A step starts only after the previous one ended (what the per-operation lock guaranteed).
 * - An idle worker is woken at once: its fiber resumes inside `submit` and runs the step until the step first
 *   waits (or ends), then `submit` returns. A chunk step (synchronous staging write, hash, posted receipt) is done by
 *   then: no event-loop turn between the frame's dispatch and its step (a `Queue` wake-up is scheduled, which from
 *   inside a running fiber costs one turn of the event loop: 37 → 9 µs per chunk, stamped). A busy worker takes
 *   queued steps in order when the running one ends.
 * - A step that fails or dies is logged (its cause's kind, never data) and the worker goes on with the next one.
 * - The worker lives in the scope it was made in (the connection's): closing it interrupts the running step and
 *   drops the queued ones, as it did for the background fibers they replace.
 */
import { Cause, Effect, type Scope } from "effect"

export interface SerialWorker {
  /** Queues `step` after every step queued before it; returns without waiting for it to end. */
  readonly submit: (step: Effect.Effect<void>) => Effect.Effect<void>
}

/** A worker whose fiber lives in the caller's scope. `name` labels its log lines. */
export const make = (name: string): Effect.Effect<SerialWorker, never, Scope.Scope> =>
  Effect.gen(function*() {
    const steps: Array<Effect.Effect<void>> = []
    /** Set while the worker waits for a step: hands it one and resumes the worker's fiber at once. */
    let wake: ((step: Effect.Effect<void>) => void) | undefined
    const next: Effect.Effect<Effect.Effect<void>> = Effect.suspend(() => {
      const queued = steps.shift()
      if (queued !== undefined) return Effect.succeed(queued)
      return Effect.callback<Effect.Effect<void>>((resume) => {
        wake = (step) => {
          wake = undefined
          resume(Effect.succeed(step))
        }
        // Interrupted while waiting (the scope closed): nothing more is handed to it.
        return Effect.sync(() => {
          wake = undefined
        })
      })
    })
    const runOne = Effect.flatMap(next, (step) =>
      Effect.catchCause(step, (cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.void
          : Effect.logError("connection step failed").pipe(Effect.annotateLogs({ worker: name, defect: Cause.hasDies(cause) }))))
    // No yield between steps (the scheduler's operation budget still makes a long run of steps yield): after a step
    // the worker waits for the next one at once, so `submit` finds it waiting.
    yield* Effect.forkScoped(Effect.forever(runOne, { disableYield: true }))
    return {
      submit: (step) =>
        Effect.sync(() => {
          if (wake !== undefined) wake(step)
          else steps.push(step)
        })
    }
  })
