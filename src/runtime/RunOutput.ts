/**
 * A Run's output buffer (Runs.ts): the frames of its Turn, queued in order by whoever emits them and handed to the
 * Run's single forwarder in batches. It does for this one use what `Queue.bounded(capacity)` with `offerUnsafe`,
 * `offer`, `takeAll` and `end` did, for one consumer, with two arrays that take turns instead of a new one per batch:
 * the queue's bucket array was handed over by each `takeAll` and the next grew from empty again, reallocated at each
 * growth step (issue 18, relay: about 100 of the ≈ 950 bytes allocated per delta). A batch handed over belongs to
 * the consumer until its next `takeAll`, which empties it and fills it again.
 *
 * Bounded: an item is queued synchronously while fewer than `capacity` wait (`offerUnsafe`); otherwise its offer
 * waits, in order with other waiting offers, and is queued when a take makes room (the Turn is slowed, nothing is
 * dropped). After `end`, the items queued are still taken, then `takeAll` fails with `Cause.Done`; an offer after
 * `end` is dropped (as `Queue.offer` answers false), and so is one still waiting at `end`.
 */
import { Cause, Effect } from "effect"
import type { SchedulerDispatcher } from "effect/Scheduler"

export interface RunOutput<A> {
  /** Queues `item` when there is room and no earlier offer waits; otherwise (or after `end`) false. */
  readonly offerUnsafe: (item: A) => boolean
  /** Queues `item`, waiting for room in order with other waiting offers; dropped after `end`. */
  readonly offer: (item: A) => Effect.Effect<void>
  /**
   * Everything queued, in order, waiting while nothing is; fails with `Cause.Done` once ended and drained. The
   * batch is the caller's until its next `takeAll` (one consumer).
   */
  readonly takeAll: Effect.Effect<ReadonlyArray<A>, Cause.Done>
  /** Ends the output: what is queued is still taken, then `takeAll` fails with `Cause.Done`. */
  readonly end: Effect.Effect<void>
}

interface WaitingOffer<A> {
  readonly item: A
  readonly resume: (effect: Effect.Effect<void>) => void
}

/** A Run's output with room for `capacity` items; a waiting take is woken on the making fiber's dispatcher. */
export const make = <A>(capacity: number): Effect.Effect<RunOutput<A>> =>
  Effect.withFiber((fiber) => Effect.succeed(makeWith<A>(capacity, fiber.currentDispatcher)))

const makeWith = <A>(capacity: number, dispatcher: SchedulerDispatcher): RunOutput<A> => {
  let filling: Array<A> = []
  /** The batch handed over last (the consumer's until its next take). */
  let handed: Array<A> = []
  let ended = false
  let taker: ((effect: Effect.Effect<ReadonlyArray<A>, Cause.Done>) => void) | undefined
  const waiting: Array<WaitingOffer<A>> = []
  const done = Cause.done()

  /** Hands over what is queued and moves waiting offers into the room it leaves, oldest first. */
  const takeNow = (): Effect.Effect<ReadonlyArray<A>, Cause.Done> => {
    if (filling.length === 0) return done
    const batch = filling
    // Emptied by `pop`, which keeps the array's room (setting `length` to 0 let it go: a new one per batch again).
    while (handed.length > 0) handed.pop()
    filling = handed
    handed = batch
    while (waiting.length > 0 && filling.length < capacity) {
      const offer = waiting.shift()!
      filling.push(offer.item)
      offer.resume(Effect.void)
    }
    return Effect.succeed(batch)
  }
  // A waiting take is woken by a task on the dispatcher, as `Queue` wakes its takers: the producer goes on queueing
  // until it yields, so the take finds a batch rather than the first item.
  let wakeScheduled = false
  const release = () => {
    wakeScheduled = false
    const resume = taker
    if (resume === undefined) return
    taker = undefined
    resume(Effect.suspend(takeNow))
  }
  const wake = () => {
    if (wakeScheduled) return
    wakeScheduled = true
    dispatcher.scheduleTask(release, 0)
  }
  const takeAll = Effect.suspend((): Effect.Effect<ReadonlyArray<A>, Cause.Done> => {
    if (filling.length > 0 || ended) return takeNow()
    return Effect.callback<ReadonlyArray<A>, Cause.Done>((resume) => {
      taker = resume
      return Effect.sync(() => {
        if (taker === resume) taker = undefined
      })
    })
  })
  const offerUnsafe = (item: A): boolean => {
    if (ended || filling.length >= capacity || waiting.length > 0) return false
    filling.push(item)
    if (taker !== undefined) wake()
    return true
  }
  const offer = (item: A): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (ended || offerUnsafe(item)) return Effect.void
      return Effect.callback<void>((resume) => {
        const entry: WaitingOffer<A> = { item, resume }
        waiting.push(entry)
        return Effect.sync(() => {
          const at = waiting.indexOf(entry)
          if (at >= 0) waiting.splice(at, 1)
        })
      })
    })
  const end = Effect.sync(() => {
    if (ended) return
    ended = true
    for (const offer of waiting.splice(0)) offer.resume(Effect.void)
    wake()
  })
  return { offerUnsafe, offer, takeAll, end }
}
