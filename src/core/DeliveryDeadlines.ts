/**
 * One timer for the preparation budgets of every Turn a runner service delivers (issue 18, "turnshttp"): a budget
 * armed here costs no fiber and no timer of its own (a budget on its own fiber cost a fiber, its start and its
 * interruption, and a timer, per prepared Turn). Budgets are kept in due order: one is taken only when it is due
 * no earlier than every budget already armed and than the time the ticker sleeps until (true of every budget of
 * the same length, armed as time goes on), so insertion order is due order; `armDeadline` falls back to a sleep on
 * its own fiber for any other. The ticker sleeps until the first budget is due, fires the due ones' signals (their
 * waiters go on in that step) and sleeps again; with none armed it waits to be woken by the next. It lives in the
 * scope that made it (the runners'); a budget armed after that closed falls back.
 */
import { Clock, Duration, Effect, Fiber, type Scope } from "effect"
import type { Signal } from "./internal/turnWait.js"

export interface Deadlines {
  /** Arms `signal` to fire at `at` (the clock's milliseconds); the disarm, or undefined when not taken here. */
  readonly arm: (at: number, signal: Signal) => (() => void) | undefined
}

interface Armed {
  readonly at: number
  readonly signal: Signal
}

export const makeDeadlines: Effect.Effect<Deadlines, never, Scope.Scope> = Effect.gen(function* () {
  const clock = yield* Clock.Clock
  const armed = new Set<Armed>()
  /** The latest due time armed (while any is); the ticker's wake while it sleeps. */
  let last = Number.NEGATIVE_INFINITY
  let sleepingUntil: number | undefined
  let closed = false
  /** Resumes the ticker while it waits for a budget (set only then). */
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
    for (const entry of armed) {
      if (entry.at > now) {
        sleepingUntil = entry.at
        return Effect.sleep(Duration.millis(entry.at - now))
      }
      armed.delete(entry)
      entry.signal.fire()
    }
    last = Number.NEGATIVE_INFINITY
    return idle
  })
  yield* Effect.forkScoped(Effect.forever(tick))
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      closed = true
    }))
  return {
    arm: (at, signal) => {
      if (closed || at < last || (sleepingUntil !== undefined && at < sleepingUntil)) return undefined
      const entry: Armed = { at, signal }
      armed.add(entry)
      last = at
      wake?.()
      return () => {
        armed.delete(entry)
      }
    }
  }
})

/**
 * Arms `signal` to fire at `at` on `deadlines` (a sleep on its own fiber in the current scope when there are none or
 * they do not take it); disarmed when the scope closes. Answers the disarm.
 */
export const armDeadline = (deadlines: Deadlines | undefined, at: number, signal: Signal): Effect.Effect<Effect.Effect<void>, never, Scope.Scope> =>
  Effect.suspend(() => {
    const disarm = deadlines?.arm(at, signal)
    if (disarm !== undefined) return Effect.as(Effect.addFinalizer(() => Effect.sync(disarm)), Effect.sync(disarm))
    return Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.map(
        Effect.forkScoped(Effect.andThen(Effect.sleep(Duration.millis(Math.max(0, at - now))), Effect.sync(() => signal.fire()))),
        (fiber) => Fiber.interrupt(fiber)
      ))
  })
