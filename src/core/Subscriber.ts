/**
 * A bounded subscriber (style guide §7.7): the read loop pushes into it and the consumer reads a Stream. It
 * never fabricates an item: it ends only when its owner ends it, and fails with the error its owner gives
 * (`ObservationLost`, or `SubscriberOverflow` for a consumer that fell behind).
 *
 * Two ways to push: `push` never waits (a full buffer fails the subscriber with `SubscriberOverflow`; what was
 * buffered is still delivered first), for small reply and preparation buffers; `tryPush` + `offer` let the
 * producer wait for room instead (the Run routes' backpressure: the read loop stops reading while a Run's
 * consumer catches up, see `Subscriptions.ts`).
 *
 * The stream's chunks are what the consumer finds buffered when it takes (`Queue.takeAll`): every item pushed
 * since its last take, as one array. The read side routes a socket read's frames synchronously, before the
 * consumer's fiber runs again, so a consumer taking arrays (`Stream.runForEachArray`) gets each read's items
 * at once (issue 18: one Effect per read, not per delta; `test/core/gateway/KeyedRegistry.test.ts`).
 */
import { Cause, Effect, Queue, Stream } from "effect"
import { type ObservationLost, SubscriberOverflow } from "./Errors.js"

/** How a subscriber's stream fails. */
export type SubscriptionError = ObservationLost | SubscriberOverflow

/** A bounded subscriber: the producer side is synchronous (or waits for room), the consumer side a Stream. */
export interface Subscriber<A> {
  /**
   * Offers one item without waiting. Returns false when the subscriber already ended; a full buffer fails the
   * subscriber with `SubscriberOverflow` (what was buffered is still delivered) and returns false.
   */
  readonly push: (item: A) => boolean
  /** Offers one item without waiting and without failing: "full" leaves the subscriber as it was. */
  readonly tryPush: (item: A) => "pushed" | "full" | "closed"
  /** Waits for room and offers one item; false when the subscriber ended, failed or was shut down first. */
  readonly offer: (item: A) => Effect.Effect<boolean>
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

/**
 * The queue behind a subscriber's stream, kept on the stream object itself (see `queueOf`). Not a WeakMap: a V8
 * scavenge keeps every entry of an old WeakMap whose key is young, so each subscription's stream and queue
 * outlived its Turn until the next full collection (docs/performance.md, "generators").
 */
const queueKey: unique symbol = Symbol("agentwire/Subscriber/queue")
interface WithQueue {
  [queueKey]?: Queue.Queue<unknown, SubscriptionError | Cause.Done>
}

/**
 * The queue behind a subscriber's `stream`, for a consumer that takes one item at a time on its own fiber (a reply
 * waiter, `core/workspace/internal/replies.ts`) instead of running the stream on a fiber that pumps it: no
 * hand-off between two fibers per item. Taking from it is reading the stream. Undefined for any other stream.
 */
export const queueOf = <A>(stream: Stream.Stream<A, SubscriptionError>): Queue.Queue<A, SubscriptionError | Cause.Done> | undefined =>
  (stream as WithQueue)[queueKey] as Queue.Queue<A, SubscriptionError | Cause.Done> | undefined

/** A subscriber buffering at most `capacity` items. */
export const makeSubscriber = <A>(capacity: number): Effect.Effect<Subscriber<A>> =>
  Effect.map(Queue.bounded<A, SubscriptionError | Cause.Done>(capacity), (queue) => {
    const stream: Stream.Stream<A, SubscriptionError> & WithQueue = Stream.fromQueue(queue)
    stream[queueKey] = queue as Queue.Queue<unknown, SubscriptionError | Cause.Done>
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
      tryPush: (item) => {
        if (queue.state._tag !== "Open") return "closed"
        return Queue.offerUnsafe(queue, item) ? "pushed" : "full"
      },
      offer: (item) => Effect.suspend(() => (queue.state._tag === "Open" ? Queue.offer(queue, item) : Effect.succeed(false))),
      end: () => {
        Queue.endUnsafe(queue)
      },
      fail,
      isOpen: () => queue.state._tag === "Open",
      isBacklogged: () => Queue.sizeUnsafe(queue) * 2 >= capacity,
      shutdown: () => {
        Queue.shutdownUnsafe(queue)
      },
      stream
    }
  })
