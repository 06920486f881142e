/**
 * One timer for the preparation budgets of every Turn a runner service delivers (issue 18, "turnshttp"): a budget
 * armed here costs no fiber and no timer of its own (a budget on its own fiber cost a fiber, its start and its
 * interruption, and a timer, per prepared Turn). The budgets are a `DueOrder`: one is taken only when it is due
 * no earlier than every budget already armed (true of every budget of the same length, armed as time goes on);
 * `armDeadline` falls back to a sleep on its own fiber for any other. A due budget fires its signal (its waiter
 * goes on in that step). The timer lives in the scope that made it (the runners'); a budget armed after that closed
 * falls back.
 */
import { Clock, Duration, Effect, Fiber, Scope } from "effect"
import * as DueOrder from "../proto/DueOrder.js"
import type { Signal } from "./internal/turnWait.js"

export interface Deadlines {
  /** Arms `signal` to fire at `at` (the clock's milliseconds); the disarm, or undefined when not taken here. */
  readonly arm: (at: number, signal: Signal) => (() => void) | undefined
}

export const makeDeadlines: Effect.Effect<Deadlines, never, Scope.Scope> = Effect.map(
  DueOrder.make<{ readonly signal: Signal }>((entry) => entry.signal.fire()),
  (order): Deadlines => ({
    arm: (at, signal) => {
      const entry = { signal }
      return order.add(entry, at) ? () => order.remove(entry) : undefined
    }
  })
)

/**
 * Arms `signal` to fire at `at` on `deadlines` (a sleep on its own fiber in the current scope when there are none or
 * they do not take it); disarmed when the scope closes. Answers the disarm.
 */
export const armDeadline = (deadlines: Deadlines | undefined, at: number, signal: Signal): Effect.Effect<Effect.Effect<void>, never, Scope.Scope> =>
  Effect.suspend(() => {
    const disarm = deadlines?.arm(at, signal)
    // The disarm on the scope itself: no copy of the fiber's context to run it (issue 18, "tmain").
    if (disarm !== undefined) return Effect.flatMap(Effect.scope, (scope) => Effect.as(Scope.addFinalizer(scope, Effect.sync(disarm)), Effect.sync(disarm)))
    return Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.map(
        Effect.forkScoped(Effect.andThen(Effect.sleep(Duration.millis(Math.max(0, at - now))), Effect.sync(() => signal.fire()))),
        (fiber) => Fiber.interrupt(fiber)
      ))
  })
