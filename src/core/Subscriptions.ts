/**
 * Subscriptions of one Runtime connection (protocol "Failures, retries and cleanup", "Preparation and
 * execution order"; style guide §7.7): bounded subscribers the read loop pushes into without ever waiting,
 * the Run routes (Run id → subscriber, interaction id → Run) and the preparation routes (request id →
 * subscriber with the per-handle revision rule).
 *
 * What a subscription never does: it never fabricates an `error` or a `done`. It ends successfully only on a
 * real terminal frame (`done` for a Run, a terminal state for a preparation). It fails with `ObservationLost`
 * when the connection ends, with `SubscriberOverflow` when its consumer falls behind its bounded buffer
 * (events buffered before the overflow are still delivered first), and with `ObservationLost("invalid_frame")`
 * when a frame that belongs to it fails decoding.
 *
 * Everything here runs on the read loop: routing is synchronous (a map lookup and a non-blocking offer).
 */
import { Cause, Effect, Queue, Scope, Stream } from "effect"
import { Preparation, type Ids, type Messages } from "../proto/index.js"
import type { RunEvent } from "./RunEvent.js"
import { ObservationLost, SubscriberOverflow, SubscriptionRejected } from "./Errors.js"

// ---------------------------------------------------------------------------------------------- subscriber

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

// ---------------------------------------------------------------------------------------------- Run routes

/** What happened to a routed frame (for the caller's log line). */
export type RouteResult = "delivered" | "delivered_backlogged" | "no_subscriber" | "overflow" | "stale"

/** Run id → subscriber, plus the bounded interaction id → Run map that routes permission_cancel. */
export interface RunRoutes {
  readonly subscribe: (
    runId: Ids.RunId
  ) => Effect.Effect<Stream.Stream<RunEvent, SubscriptionError>, SubscriptionRejected, Scope.Scope>
  /** Routes one decoded Run-scoped frame. A `done` ends the subscription after delivery. */
  readonly route: (event: RunEvent) => RouteResult
  /** Fails the subscriber of the Run a frame names (Envelope.id of a Run frame, or an interaction id). */
  readonly failFrame: (type: string, id: string, error: SubscriptionError) => boolean
  /** Fails every subscriber and rejects new subscriptions. */
  readonly close: (lost: ObservationLost) => void
  readonly size: () => number
}

export const makeRunRoutes = (options: {
  readonly buffer: number
  readonly maxSubscriptions: number
  readonly maxInteractionRoutes: number
}): RunRoutes => {
  const subscribers = new Map<string, Subscriber<RunEvent>>()
  // Insertion-ordered: the oldest interaction route is forgotten first when the bound is reached.
  const interactions = new Map<string, string>()
  let closed: ObservationLost | undefined

  const remember = (interactionId: string, runId: string) => {
    interactions.delete(interactionId)
    interactions.set(interactionId, runId)
    if (interactions.size > options.maxInteractionRoutes) {
      const oldest = interactions.keys().next()
      if (oldest.done !== true) interactions.delete(oldest.value)
    }
  }

  const removeIfSame = (runId: string, subscriber: Subscriber<RunEvent>) => {
    if (subscribers.get(runId) === subscriber) subscribers.delete(runId)
  }

  const forgetInteractionsOf = (runId: string) => {
    for (const [interaction, run] of interactions) if (run === runId) interactions.delete(interaction)
  }

  const deliver = (runId: string, event: RunEvent): RouteResult => {
    const subscriber = subscribers.get(runId)
    if (subscriber === undefined) return "no_subscriber"
    if (!subscriber.push(event)) {
      subscribers.delete(runId)
      return "overflow"
    }
    if (event.type === "done") {
      subscriber.end()
      subscribers.delete(runId)
      forgetInteractionsOf(runId)
      return "delivered"
    }
    return subscriber.isBacklogged() ? "delivered_backlogged" : "delivered"
  }

  return {
    subscribe: (runId) =>
      Effect.gen(function*() {
        if (closed !== undefined) return yield* new SubscriptionRejected({ reason: "connection_closed" })
        if (subscribers.has(runId)) return yield* new SubscriptionRejected({ reason: "duplicate" })
        if (subscribers.size >= options.maxSubscriptions) {
          return yield* new SubscriptionRejected({ reason: "capacity" })
        }
        const subscriber = yield* makeSubscriber<RunEvent>(options.buffer)
        subscribers.set(runId, subscriber)
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            removeIfSame(runId, subscriber)
            subscriber.shutdown()
          })
        )
        return subscriber.stream
      }),
    route: (event) => {
      if (event.type === "permission_cancel") {
        const runId = interactions.get(event.id)
        if (runId === undefined) return "no_subscriber"
        interactions.delete(event.id)
        return deliver(runId, event)
      }
      const result = deliver(event.id, event)
      if ((result === "delivered" || result === "delivered_backlogged") && event.type === "permission_request") {
        remember(event.payload.request_id, event.id)
      }
      return result
    },
    failFrame: (type, id, error) => {
      const runId = type === "permission_cancel" ? interactions.get(id) : id
      if (runId === undefined) return false
      const subscriber = subscribers.get(runId)
      if (subscriber === undefined) return false
      subscriber.fail(error)
      subscribers.delete(runId)
      forgetInteractionsOf(runId)
      return true
    },
    close: (lost) => {
      if (closed !== undefined) return
      closed = lost
      for (const subscriber of subscribers.values()) subscriber.fail(lost)
      subscribers.clear()
      interactions.clear()
    },
    size: () => subscribers.size
  }
}

// ---------------------------------------------------------------------------------------------- preparation routes

export type PreparationStatus = Messages.MessageOfType<"preparation_status">["payload"]

/**
 * Preparation request id → subscriber, applying `Preparation.applyRevision` per request. Kept apart from the
 * Correlator because the revision cursor per request id and the end at a terminal state are routing rules a
 * plain reply waiter does not have (docs/gateway.md); the subscriber is the same `makeSubscriber`.
 */
export interface PreparationRoutes {
  readonly subscribe: (
    requestId: Ids.PreparationRequestId
  ) => Effect.Effect<Stream.Stream<PreparationStatus, SubscriptionError>, SubscriptionRejected, Scope.Scope>
  /**
   * Routes one status: dropped for an unknown request id ("no_subscriber") and when the revision rule
   * ignores it ("stale"); a status whose shape is wrong for its state fails the subscriber with
   * `ObservationLost("invalid_frame")`; a terminal state ends the subscription after delivery.
   */
  readonly route: (requestId: Ids.PreparationRequestId, status: PreparationStatus) => RouteResult | "invalid"
  readonly fail: (requestId: string, error: SubscriptionError) => boolean
  readonly close: (lost: ObservationLost) => void
  readonly size: () => number
}

interface PreparationEntry {
  readonly subscriber: Subscriber<PreparationStatus>
  cursor: Preparation.RevisionCursor | undefined
}

export const makePreparationRoutes = (options: {
  readonly buffer: number
  readonly maxSubscriptions: number
}): PreparationRoutes => {
  const entries = new Map<string, PreparationEntry>()
  let closed: ObservationLost | undefined
  return {
    subscribe: (requestId) =>
      Effect.gen(function*() {
        if (closed !== undefined) return yield* new SubscriptionRejected({ reason: "connection_closed" })
        if (entries.has(requestId)) return yield* new SubscriptionRejected({ reason: "duplicate" })
        if (entries.size >= options.maxSubscriptions) return yield* new SubscriptionRejected({ reason: "capacity" })
        const subscriber = yield* makeSubscriber<PreparationStatus>(options.buffer)
        const entry: PreparationEntry = { subscriber, cursor: undefined }
        entries.set(requestId, entry)
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            if (entries.get(requestId) === entry) entries.delete(requestId)
            subscriber.shutdown()
          })
        )
        return subscriber.stream
      }),
    route: (requestId, status) => {
      const entry = entries.get(requestId)
      if (entry === undefined) return "no_subscriber"
      if (Preparation.validateStatus(status)._tag === "Some") {
        entry.subscriber.fail(new ObservationLost({ reason: "invalid_frame" }))
        entries.delete(requestId)
        return "invalid"
      }
      const step = Preparation.applyRevision(entry.cursor, status)
      if (!step.apply) return "stale"
      entry.cursor = step.cursor
      if (!entry.subscriber.push(status)) {
        entries.delete(requestId)
        return "overflow"
      }
      if (Preparation.isTerminalState(status.state)) {
        entry.subscriber.end()
        entries.delete(requestId)
      }
      return "delivered"
    },
    fail: (requestId, error) => {
      const entry = entries.get(requestId)
      if (entry === undefined) return false
      entry.subscriber.fail(error)
      entries.delete(requestId)
      return true
    },
    close: (lost) => {
      if (closed !== undefined) return
      closed = lost
      for (const entry of entries.values()) entry.subscriber.fail(lost)
      entries.clear()
    },
    size: () => entries.size
  }
}
