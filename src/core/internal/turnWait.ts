/**
 * How a Turn's driver waits on several sources at once without a fiber per source (issue 18): the next item (or the
 * end) of its subscription queues, or a `Signal` (the Turn settled, the preparation was abandoned or ran out of its
 * budget). `Effect.raceFirst` over `Queue.take` and `Deferred.await` forks a fiber per contender and interrupts the
 * losers, about six run slices per wait; a Turn waits at least twice (for `ready`, for its first Run event).
 */
import { Effect, type Queue } from "effect"

/**
 * A one-shot signal whose listeners run synchronously when it fires (as a `Deferred`'s waiters resume), so the
 * fiber waiting on it continues in the step that fired it.
 */
export class Signal {
  private listeners: Set<() => void> | undefined = undefined
  private firedFlag = false

  get fired(): boolean {
    return this.firedFlag
  }

  /** Fires once; later calls do nothing. */
  fire(): void {
    if (this.firedFlag) return
    this.firedFlag = true
    const listeners = this.listeners
    this.listeners = undefined
    if (listeners !== undefined) for (const listener of listeners) listener()
  }

  /** Runs `listener` when the signal fires (at once when it already did); returns its removal. */
  listen(listener: () => void): () => void {
    if (this.firedFlag) {
      listener()
      return noop
    }
    const listeners = (this.listeners ??= new Set())
    listeners.add(listener)
    return () => {
      this.listeners?.delete(listener)
    }
  }
}

const noop = () => {}

type AnyQueue = Queue.Dequeue<unknown, unknown>

/** True when `Queue.takeUnsafe` would answer now: an item is buffered (or offered) or the queue ended. */
export const canTake = (queue: AnyQueue): boolean =>
  queue.state._tag === "Done" || queue.messages.length > 0 || queue.state.offers.size > 0

/**
 * Suspends the calling fiber until one of `queues` can be taken from (`canTake`) or one of `signals` fired; returns at
 * once when one already can. Takes nothing (the caller takes with `Queue.takeUnsafe`), so an interruption never loses
 * an item. On each queue it registers as `Queue.take` does (a `Queue.Taker`, woken when an offer makes it ready and
 * with the queue's end); an interruption or the first wake removes every registration.
 */
export const awaitAny = (queues: ReadonlyArray<AnyQueue>, signals: ReadonlyArray<Signal>): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    for (const queue of queues) if (canTake(queue)) return resume(Effect.void)
    for (const signal of signals) if (signal.fired) return resume(Effect.void)
    let waiting = true
    const takers: Array<Queue.Queue.Taker<unknown>> = []
    const removals: Array<() => void> = []
    const stop = () => {
      waiting = false
      for (let i = 0; i < takers.length; i++) {
        const state = queues[i]!.state
        if (state._tag !== "Done") state.takers.delete(takers[i]!)
      }
      for (const remove of removals) remove()
    }
    const wake = () => {
      if (!waiting) return
      stop()
      resume(Effect.void)
    }
    for (const queue of queues) {
      const taker: Queue.Queue.Taker<unknown> = { ready: () => canTake(queue), resume: wake }
      takers.push(taker)
      if (queue.state._tag !== "Done") queue.state.takers.add(taker)
    }
    for (const signal of signals) removals.push(signal.listen(wake))
    return Effect.sync(stop)
  })
