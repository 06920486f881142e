/**
 * The reconnect deadline of a Codex Turn. Codex 0.171.0 never gives up on an unreachable model endpoint: with
 * the server down (connection refused) it sends `error {willRetry: true}` notifications ("Reconnecting...")
 * with a growing backoff for as long as we wait, whatever `stream_max_retries` says (observed > 75 s). So the
 * adapter keeps its own deadline (docs/harness-codex.md, "Unreachable model endpoint"):
 *
 * - `arm`: a retried error arrived; starts the deadline unless one is already running.
 * - `reset`: native progress arrived (an item, a delta, usage); the running deadline no longer counts.
 * - `stop`: the Turn ended.
 *
 * When a deadline passes that was neither reset nor stopped, `expire` runs once (the Turn interrupts itself and
 * settles with a typed error). A reset deadline's fiber sleeps out its time in the scope and does nothing.
 */
import { type Duration, Effect, type Scope } from "effect"

export interface Watchdog {
  readonly arm: Effect.Effect<void>
  readonly reset: Effect.Effect<void>
  readonly stop: Effect.Effect<void>
}

export const makeWatchdog = (budget: Duration.Duration, expire: Effect.Effect<void>, scope: Scope.Scope): Watchdog => {
  /** The generation of the running deadline, if one runs. */
  let running: number | undefined
  let generation = 0
  let stopped = false
  return {
    arm: Effect.suspend(() => {
      if (stopped || running !== undefined) return Effect.void
      const mine = ++generation
      running = mine
      return Effect.sleep(budget).pipe(
        Effect.andThen(Effect.suspend(() => {
          if (stopped || running !== mine) return Effect.void
          running = undefined
          return expire
        })),
        Effect.forkIn(scope),
        Effect.asVoid
      )
    }),
    reset: Effect.sync(() => {
      running = undefined
    }),
    stop: Effect.sync(() => {
      stopped = true
      running = undefined
    })
  }
}
