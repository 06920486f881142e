/**
 * A bounded, non-blocking subscriber (style guide §7.7): the read loop pushes into it synchronously and never
 * waits; the consumer reads a Stream. It never fabricates an item: it ends only when its owner ends it, and
 * fails with `SubscriberOverflow` when the consumer falls behind its buffer (what was buffered is still
 * delivered first) or with the error its owner gives (`ObservationLost`).
 */
import { Cause, Effect, Queue, Stream } from "effect"
import { type ObservationLost, SubscriberOverflow } from "./Errors.js"

/** How a subscriber's stream fails. */
export type SubscriptionError = ObservationLost | SubscriberOverflow

/** A bounded, non-blocking subscriber: the producer side is synchronous, the consumer side a Stream. */
export interface Subscriber<A> {
  /**
   * Offers one item without waiting. Returns false when the subscriber already ended; a full buffer fails the
   * subscriber with `SubscriberOverflow` (what was buffered is still delivered) and returns false.
   */
  readonly push: (item: A) => boolean
  /** Ends the stream successfully after the buffered items. Idempotent. */
  readonly end: () => void
  /** Fails the stream after the buffered items. Idempotent; the first end or failure wins. */
  readonly fail: (error: SubscriptionError) => void
  /** True until the subscriber ended, failed or was shut down. */
  readonly isOpen: () => boolean
  /** True when at least half of the buffer is taken: the consumer is falling behind. */
  readonly isBacklogged: () => boolean
  /** The consumer left: drops buffered items. Idempotent. */
  readonly shutdown: () => void
  readonly stream: Stream.Stream<A, SubscriptionError>
}

/** A subscriber buffering at most `capacity` items. */
export const makeSubscriber = <A>(capacity: number): Effect.Effect<Subscriber<A>> =>
  Effect.map(Queue.dropping<A, SubscriptionError | Cause.Done>(capacity), (queue) => {
    const fail = (error: SubscriptionError) => {
      Queue.failCauseUnsafe(queue, Cause.fail(error))
    }
    return {
      push: (item) => {
        if (queue.state._tag !== "Open") return false
        if (Queue.offerUnsafe(queue, item)) return true
        fail(new SubscriberOverflow({ capacity }))
        return false
      },
      end: () => {
        Queue.endUnsafe(queue)
      },
      fail,
      isOpen: () => queue.state._tag === "Open",
      isBacklogged: () => Queue.sizeUnsafe(queue) * 2 >= capacity,
      shutdown: () => {
        Queue.shutdownUnsafe(queue)
      },
      stream: Stream.fromQueue(queue)
    }
  })
