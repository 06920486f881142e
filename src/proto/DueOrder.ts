/**
 * One timer for many entries that fall due in the order they are added (issue 18: a sleep on its own fiber per
 * entry cost a fiber, its start and its interruption, and a timer, per Turn or per event stream). Used on both sides,
 * so it lives here beside the contract, like `SharedByKey`: by Core for the preparation budgets of delivered Turns
 * (`DeliveryDeadlines`) and the keep-alive comments of operator event streams (`OperatorSse.makeKeepAlive`), and by
 * the daemon for the budgets of its sends (`runtime/transport/internal/pendingWrites.ts`).
 *
 * An entry is taken only when it is due no earlier than every entry already added and than the time the ticker
 * sleeps until (true of entries of one fixed length added as time goes on), so insertion order is due order and
 * the ticker only ever looks at the first. It sleeps until the first entry is due, hands each due one to `fire`
 * (which may add it again) and sleeps again; with none added it waits to be woken by the next `add`. It lives in the
 * scope that made it: once that closed, `add` takes nothing. `arm` takes every entry: one `add` does not take sleeps
 * on a fiber of its own (the clock went back, another length), so its users need no fallback of their own (the
 * daemon's; Core's `DeliveryDeadlines` keeps `add`, its callers own their fallback sleep).
 */
import { Clock, Duration, Effect, type Fiber, type Scope } from "effect"
import { FreshMap } from "./FreshMap.js"

export interface DueOrder<A> {
  /** Adds `entry`, due at `at` (the clock's milliseconds); false when not taken (out of order, or closed). */
  readonly add: (entry: A, at: number) => boolean
  /**
   * Adds `entry` when the order takes it, else hands it to `fire` at `at` from a sleep on a fiber of its own (also once
   * the scope closed); `remove` disarms it either way.
   */
  readonly arm: (entry: A, at: number) => void
  /** Removes `entry` (nothing when it is not there); it will not be handed to `fire`. */
  readonly remove: (entry: A) => void
}

/** `fire` runs in the ticker's step for each entry that is due, with the clock's milliseconds of that step. */
export const make = <A>(fire: (entry: A, now: number) => void): Effect.Effect<DueOrder<A>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const clock = yield* Clock.Clock
    const context = yield* Effect.context<never>()
    /** Entries `add` did not take, each on its own sleep (`arm`). */
    const sleepers = new FreshMap<A, Fiber.Fiber<void>>()
    /** Each entry and its due time, in insertion order (= due order). */
    const entries = new FreshMap<A, number>()
    /** The latest due time added while any entry is in (an earlier one would break the order). */
    let last = Number.NEGATIVE_INFINITY
    let sleepingUntil: number | undefined
    let closed = false
    /** Resumes the ticker while it waits for an entry (set only then). */
    let wake: (() => void) | undefined
    const idle = Effect.callback<void>((resume) => {
      wake = () => {
        wake = undefined
        resume(Effect.void)
      }
      return Effect.sync(() => {
        wake = undefined
      })
    })
    const tick = Effect.suspend(() => {
      sleepingUntil = undefined
      const now = clock.currentTimeMillisUnsafe()
      // An entry `fire` adds again goes to the end and is met again in this loop, due later than `now`.
      for (const [entry, at] of entries) {
        if (at > now) {
          sleepingUntil = at
          return Effect.sleep(Duration.millis(at - now))
        }
        entries.delete(entry)
        fire(entry, now)
      }
      last = Number.NEGATIVE_INFINITY
      return idle
    })
    yield* Effect.forkScoped(Effect.forever(tick))
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        closed = true
        for (const sleeper of sleepers.values()) sleeper.interruptUnsafe()
        sleepers.clear()
      })
    )
    const add = (entry: A, at: number): boolean => {
      if (closed || at < last || (sleepingUntil !== undefined && at < sleepingUntil)) return false
      entries.set(entry, at)
      last = at
      wake?.()
      return true
    }
    return {
      add,
      arm: (entry, at) => {
        if (add(entry, at)) return
        const sleeper = Effect.runForkWith(context)(Effect.andThen(
          Effect.sleep(Duration.millis(Math.max(0, at - clock.currentTimeMillisUnsafe()))),
          Effect.sync(() => {
            if (sleepers.get(entry) !== sleeper) return
            sleepers.delete(entry)
            fire(entry, clock.currentTimeMillisUnsafe())
          })
        ))
        sleepers.set(entry, sleeper)
      },
      remove: (entry) => {
        entries.delete(entry)
        const sleeper = sleepers.get(entry)
        if (sleeper === undefined) return
        sleepers.delete(entry)
        sleeper.interruptUnsafe()
      }
    }
  })
