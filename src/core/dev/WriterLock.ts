/**
 * One journal writer's calls one at a time, in call order (`TurnJournal`: each append takes the next seq only after
 * the previous one's append settled). It is what `Semaphore.make(1).withPermit` gave, for the journal's hot path
 * (issue 18: one call per journal fact): a free lock is taken in the call's own step, with no mask, no permit
 * callback and no waiter set, and its release is one exit hook shared by every call of the writer.
 *
 * The holder is the fiber that took the lock: the shared exit hook releases the lock only when its own fiber holds
 * it, so a call that ends before it held the lock (interrupted while queued) releases nothing. A call that finds
 * the lock taken queues its fiber; a release hands the lock straight to the first queued fiber (first come, first
 * served) and wakes it. Interrupted while queued, a fiber leaves the queue; interrupted after the hand-over and
 * before it ran, its exit hook passes the lock on.
 */
import { Effect, Fiber } from "effect"

interface Waiter {
  readonly fiber: Fiber.Fiber<unknown, unknown>
  readonly wake: (effect: Effect.Effect<void>) => void
}

export interface WriterLock {
  /** Runs `body` alone: after every earlier call (of any fiber) has ended, before any later one starts. */
  readonly run: <A, E, R>(body: () => Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

export const make = (): WriterLock => {
  let holder: Fiber.Fiber<unknown, unknown> | undefined
  const queue: Array<Waiter> = []

  const release = (): void => {
    const next = queue.shift()
    holder = next?.fiber
    next?.wake(Effect.void)
  }
  /** The exit hook of every call: the lock passes on only from the fiber that holds it. */
  const onExit = (): undefined => {
    if (holder !== undefined && holder === Fiber.getCurrent()) release()
    return undefined
  }
  /** Queued behind the holder until a release hands this fiber the lock (taken at once when it is free by then). */
  const acquire = Effect.callback<void>((wake) => {
    const fiber = Fiber.getCurrent()!
    if (holder === undefined) {
      holder = fiber
      return wake(Effect.void)
    }
    const waiter: Waiter = { fiber, wake }
    queue.push(waiter)
    return Effect.sync(() => {
      const at = queue.indexOf(waiter)
      if (at >= 0) queue.splice(at, 1)
    })
  })

  const run = <A, E, R>(body: () => Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    // `onExitPrimitive`: a hook with nothing to run adds no step. Not `interruptible`: an interrupted fiber skips
    // the exit hooks of interruptible frames (effect's `exitFailCause`), so the hook must run uninterruptibly.
    Effect.onExitPrimitive(
      Effect.suspend(() => {
        if (holder === undefined) {
          holder = Fiber.getCurrent()
          return body()
        }
        return Effect.andThen(acquire, Effect.suspend(body))
      }),
      onExit
    )
  return { run }
}
