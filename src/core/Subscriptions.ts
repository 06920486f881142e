/**
 * Subscriptions of one Runtime connection (protocol "Failures, retries and cleanup", "Preparation and
 * execution order"; style guide §7.7): bounded subscribers the read loop pushes into, the Run routes (Run id →
 * subscriber, interaction id → Run) and the preparation routes (request id → subscriber with the per-handle
 * revision rule).
 *
 * Backpressure (issue #17, a fast Turn never fails): a Run subscriber whose buffer is full makes the read loop
 * wait for room (`route` answers "full", then `routeWaiting`), so the connection stops reading from its socket
 * while that Run's consumer catches up. Only a consumer that takes nothing for the stall budget
 * (`GatewayConfig.subscriberStallTimeout`, 60 s) is treated as gone: it fails with `SubscriberOverflow`.
 * Preparation and reply subscribers never make the read loop wait (16 buffered each, bounded by the protocol).
 *
 * What a subscription never does: it never fabricates an `error` or a `done`. It ends successfully only on a
 * real terminal frame (`done` for a Run, a terminal state for a preparation). It fails with `ObservationLost`
 * when the connection ends, with `SubscriberOverflow` when its consumer falls behind its bounded buffer
 * (events buffered before the overflow are still delivered first), and with `ObservationLost("invalid_frame")`
 * when a frame that belongs to it fails decoding.
 *
 * Everything here runs on the read loop: routing is synchronous (a map lookup and a non-blocking offer).
 */
import { type Duration, Effect, type Scope, type Stream } from "effect"
import { Preparation, type Ids, type Messages } from "../proto/index.js"
import { ObservationLost, type SubscriptionRejected } from "./Errors.js"
import * as KeyedRegistry from "./KeyedRegistry.js"
import type { RunEvent } from "./RunEvent.js"
import type { SubscriptionError } from "./Subscriber.js"

export { makeSubscriber, type Subscriber, type SubscriptionError } from "./Subscriber.js"

// ---------------------------------------------------------------------------------------------- Run routes

/** What happened to a routed frame (for the caller's log line). */
export type RouteResult = "delivered" | "delivered_backlogged" | "no_subscriber" | "overflow" | "stale"

/** Run id → subscriber, plus the bounded interaction id → Run map that routes permission_cancel. */
export interface RunRoutes {
  readonly subscribe: (
    runId: Ids.RunId
  ) => Effect.Effect<Stream.Stream<RunEvent, SubscriptionError>, SubscriptionRejected, Scope.Scope>
  /**
   * Routes one decoded Run-scoped frame without waiting. A `done` ends the subscription after delivery.
   * "full": the Run's buffer is full and nothing was delivered; the caller waits with `routeWaiting`.
   */
  readonly route: (event: RunEvent) => RouteResult | "full"
  /** Waits for room in the Run's subscriber (at most `stallBudget` without progress), then routes like `route`. */
  readonly routeWaiting: (event: RunEvent, stallBudget: Duration.Duration) => Effect.Effect<RouteResult>
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
}): RunRoutes => new RunTable(options.maxSubscriptions, options.buffer, options.maxInteractionRoutes)

/** A class, not an object of closures: every connection holds one (issue 18). */
class RunTable implements RunRoutes {
  private readonly runs: KeyedRegistry.KeyedRegistry<RunEvent, undefined>
  // Insertion-ordered: the oldest interaction route is forgotten first when the bound is reached.
  private interactions: Map<string, string> | undefined
  constructor(capacity: number, buffer: number, private readonly maxInteractionRoutes: number) {
    this.runs = KeyedRegistry.make<RunEvent>({ capacity, buffer })
  }

  private remember(interactionId: string, runId: string) {
    const interactions = this.interactions ??= new Map()
    interactions.delete(interactionId)
    interactions.set(interactionId, runId)
    if (interactions.size > this.maxInteractionRoutes) {
      const oldest = interactions.keys().next()
      if (oldest.done !== true) interactions.delete(oldest.value)
    }
  }

  private forgetInteractionsOf(runId: string) {
    if (this.interactions === undefined) return
    for (const [interaction, run] of this.interactions) if (run === runId) this.interactions.delete(interaction)
  }

  /** What follows a delivery: a `done` ends the Run's routes, a permission request is remembered. */
  private after(runId: string, event: RunEvent, result: RouteResult | "full"): RouteResult | "full" {
    if (result !== "delivered" && result !== "delivered_backlogged") return result
    if (event.type === "done") {
      this.runs.end(runId)
      this.forgetInteractionsOf(runId)
      return "delivered"
    }
    if (event.type === "permission_request") this.remember(event.payload.request_id, runId)
    return result
  }

  /** The Run a frame belongs to (permission_cancel through the interaction map); consumes that route. */
  private runOf(event: RunEvent): string | undefined {
    if (event.type !== "permission_cancel") return event.id
    const runId = this.interactions?.get(event.id)
    if (runId !== undefined) this.interactions!.delete(event.id)
    return runId
  }

  subscribe(runId: Ids.RunId): Effect.Effect<Stream.Stream<RunEvent, SubscriptionError>, SubscriptionRejected, Scope.Scope> {
    return Effect.map(this.runs.subscribe(runId, undefined), (subscriber) => subscriber.stream)
  }

  route(event: RunEvent): RouteResult | "full" {
    const runId = event.type === "permission_cancel" ? this.interactions?.get(event.id) : event.id
    if (runId === undefined) return "no_subscriber"
    const result = this.runs.tryDeliver(runId, event)
    // A full buffer leaves everything as it was: the waiting route consumes the interaction route.
    if (result === "full") return result
    if (event.type === "permission_cancel") this.interactions!.delete(event.id)
    return this.after(runId, event, result)
  }

  routeWaiting(event: RunEvent, stallBudget: Duration.Duration): Effect.Effect<RouteResult> {
    return Effect.suspend(() => {
      const runId = this.runOf(event)
      if (runId === undefined) return Effect.succeed("no_subscriber" as const)
      return Effect.map(this.runs.deliverWaiting(runId, event, stallBudget), (result) => {
        if (result === "overflow") this.forgetInteractionsOf(runId)
        return this.after(runId, event, result) as RouteResult
      })
    })
  }

  failFrame(type: string, id: string, error: SubscriptionError): boolean {
    const runId = type === "permission_cancel" ? this.interactions?.get(id) : id
    if (runId === undefined || !this.runs.fail(runId, error)) return false
    this.forgetInteractionsOf(runId)
    return true
  }

  close(lost: ObservationLost): void {
    this.runs.close(lost)
    this.interactions?.clear()
  }

  size(): number {
    return this.runs.size()
  }
}

// ---------------------------------------------------------------------------------------------- preparation routes

export type PreparationStatus = Messages.MessageOfType<"preparation_status">["payload"]

/**
 * Preparation request id → subscriber, applying `Preparation.applyRevision` per request. Kept apart from the
 * Correlator because the revision cursor per request id and the end at a terminal state are routing rules a
 * plain reply waiter does not have (docs/gateway.md); the registry is the same `KeyedRegistry`, with the
 * cursor as its per-key state.
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

/** `failed` with `cleanup_unconfirmed` / `executor_cleanup_unconfirmed`: the Runtime still owns the resource. */
const cleanupPending = (status: PreparationStatus): boolean =>
  status.state === "failed" &&
  (status.error_code === "cleanup_unconfirmed" || status.error_code === "executor_cleanup_unconfirmed")

export const makePreparationRoutes = (options: {
  readonly buffer: number
  readonly maxSubscriptions: number
}): PreparationRoutes =>
  new PreparationTable(
    KeyedRegistry.make<PreparationStatus, Preparation.RevisionCursor | undefined>({
      capacity: options.maxSubscriptions,
      buffer: options.buffer
    })
  )

class PreparationTable implements PreparationRoutes {
  constructor(private readonly requests: KeyedRegistry.KeyedRegistry<PreparationStatus, Preparation.RevisionCursor | undefined>) {}

  subscribe(
    requestId: Ids.PreparationRequestId
  ): Effect.Effect<Stream.Stream<PreparationStatus, SubscriptionError>, SubscriptionRejected, Scope.Scope> {
    return Effect.map(this.requests.subscribe(requestId, undefined), (subscriber) => subscriber.stream)
  }

  route(requestId: Ids.PreparationRequestId, status: PreparationStatus): RouteResult | "invalid" {
    const requests = this.requests
    const entry = requests.get(requestId)
    if (entry === undefined) return "no_subscriber"
    if (Preparation.validateStatus(status)._tag === "Some") {
      requests.fail(requestId, new ObservationLost({ reason: "invalid_frame" }))
      return "invalid"
    }
    const step = Preparation.applyRevision(entry.state, status)
    if (!step.apply) return "stale"
    entry.state = step.cursor
    const result = requests.deliver(requestId, status)
    if (result === "overflow" || result === "no_subscriber") return result
    // A `failed` whose cleanup is unconfirmed is followed by the confirmed release: keep routing.
    if (Preparation.isTerminalState(status.state) && !cleanupPending(status)) requests.end(requestId)
    return "delivered"
  }

  fail(requestId: string, error: SubscriptionError): boolean {
    return this.requests.fail(requestId, error)
  }

  close(lost: ObservationLost): void {
    this.requests.close(lost)
  }

  size(): number {
    return this.requests.size()
  }
}
