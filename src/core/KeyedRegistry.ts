/**
 * One keyed registry of bounded subscribers, shared by the Correlator (reply waiters) and the Run and
 * preparation route tables of a connection (style guide §7.7). It owns the rules the three had in common:
 *
 * - `subscribe` registers under a key for the lifetime of the caller's scope, and rejects with
 *   `SubscriptionRejected` a duplicate pending key (`duplicate`), one past `capacity` (`capacity`) and any
 *   key once the connection closed (`connection_closed`): nothing is registered then.
 * - Closing the caller's scope unregisters (only its own entry) and drops what was buffered; it settles nothing.
 * - `deliver` never waits: a full buffer fails that subscriber with `SubscriberOverflow` and removes it.
 * - `tryDeliver` + `deliverWaiting` (the Run routes' backpressure) leave a full subscriber registered and wait
 *   for room, at most `stallBudget`: a consumer that takes nothing for that long is gone, and fails with
 *   `SubscriberOverflow` as above.
 * - `close` fails every subscriber with the connection's `ObservationLost` (the first reason wins).
 *
 * Everything runs on the read loop: each operation is a map lookup and a non-blocking offer.
 */
import { type Duration, Effect, Scope } from "effect"
import { FreshMap } from "../proto/FreshMap.js"
import { type ObservationLost, SubscriberOverflow, SubscriptionRejected } from "./Errors.js"
import { makeSubscriber, type Subscriber, type SubscriptionError } from "./Subscriber.js"

/** A registered subscriber with the per-key routing state its table keeps (a revision cursor, …). */
export interface Entry<A, S> {
  readonly subscriber: Subscriber<A>
  state: S
}

/** What `deliver` did (the caller logs it). */
export type Delivered = "delivered" | "delivered_backlogged" | "no_subscriber" | "overflow"

export interface KeyedRegistry<A, S> {
  readonly subscribe: (key: string, state: S) => Effect.Effect<Subscriber<A>, SubscriptionRejected, Scope.Scope>
  readonly get: (key: string) => Entry<A, S> | undefined
  /** Offers one item to the key's subscriber without waiting; an overflow removes it. */
  readonly deliver: (key: string, item: A) => Delivered
  /** Like `deliver`, but a full buffer answers "full" and leaves the subscriber as it was. */
  readonly tryDeliver: (key: string, item: A) => Delivered | "full"
  /**
   * Waits for room in the key's subscriber and delivers (after `tryDeliver` answered "full"). A subscriber
   * that takes nothing within `stallBudget` fails with `SubscriberOverflow` and is removed ("overflow").
   */
  readonly deliverWaiting: (key: string, item: A, stallBudget: Duration.Duration) => Effect.Effect<Delivered>
  /** Ends the key's stream after what it buffered and removes it (a terminal item was delivered). */
  readonly end: (key: string) => void
  /** Fails the key's subscriber and removes it; false when none is registered. */
  readonly fail: (key: string, error: SubscriptionError) => boolean
  readonly keys: () => ReadonlyArray<string>
  /** Fails every subscriber with `lost` and rejects later registrations. Idempotent. */
  readonly close: (lost: ObservationLost) => void
  readonly isClosed: () => boolean
  readonly size: () => number
}

/**
 * A new, empty registry; `capacity` bounds registrations, `buffer` each subscriber's items. A class, not an
 * object of closures: a connection holds three of them, and an idle one costs only its fields (issue 18);
 * the map is created on the first registration.
 */
export const make = <A, S = undefined>(options: { readonly capacity: number; readonly buffer: number }): KeyedRegistry<A, S> =>
  new Registry<A, S>(options.capacity, options.buffer)

class Registry<A, S> implements KeyedRegistry<A, S> {
  /** A `FreshMap`: a connection lives long and its entries come and go per request (src/proto/FreshMap.ts). */
  private entries: FreshMap<string, Entry<A, S>> | undefined
  private closed: ObservationLost | undefined
  constructor(private readonly capacity: number, private readonly buffer: number) {}

  subscribe(key: string, state: S): Effect.Effect<Subscriber<A>, SubscriptionRejected, Scope.Scope> {
    return Effect.suspend(() => {
      if (this.closed !== undefined) return Effect.fail(new SubscriptionRejected({ reason: "connection_closed" }))
      if (this.entries?.has(key) === true) return Effect.fail(new SubscriptionRejected({ reason: "duplicate" }))
      if (this.size() >= this.capacity) return Effect.fail(new SubscriptionRejected({ reason: "capacity" }))
      return Effect.flatMap(makeSubscriber<A>(this.buffer), (subscriber) => {
        const entry: Entry<A, S> = { subscriber, state }
        const entries = this.entries ??= new FreshMap()
        entries.set(key, entry)
        // On the caller's scope itself (`Scope.addFinalizer`): `Effect.addFinalizer` would run it under the
        // registering fiber's context, a copy of the whole context map per subscription (issue 18, "tmain").
        return Effect.flatMap(Effect.scope, (scope) =>
          Effect.as(
            Scope.addFinalizer(scope, Effect.sync(() => {
              if (entries.get(key) === entry) entries.delete(key)
              subscriber.shutdown()
            })),
            subscriber
          ))
      })
    })
  }

  get(key: string): Entry<A, S> | undefined {
    return this.entries?.get(key)
  }

  deliver(key: string, item: A): Delivered {
    const entry = this.entries?.get(key)
    if (entry === undefined) return "no_subscriber"
    if (!entry.subscriber.push(item)) {
      this.entries!.delete(key)
      return "overflow"
    }
    return entry.subscriber.isBacklogged() ? "delivered_backlogged" : "delivered"
  }

  tryDeliver(key: string, item: A): Delivered | "full" {
    const entry = this.entries?.get(key)
    if (entry === undefined) return "no_subscriber"
    switch (entry.subscriber.tryPush(item)) {
      case "pushed":
        return entry.subscriber.isBacklogged() ? "delivered_backlogged" : "delivered"
      case "full":
        return "full"
      case "closed":
        this.entries!.delete(key)
        return "no_subscriber"
    }
  }

  deliverWaiting(key: string, item: A, stallBudget: Duration.Duration): Effect.Effect<Delivered> {
    return Effect.suspend(() => {
      const entry = this.entries?.get(key)
      if (entry === undefined) return Effect.succeed("no_subscriber" as const)
      return entry.subscriber.offer(item).pipe(
        Effect.map((offered): Delivered => (offered ? "delivered_backlogged" : "no_subscriber")),
        Effect.timeoutOrElse({
          duration: stallBudget,
          orElse: () =>
            Effect.sync((): Delivered => {
              if (this.entries?.get(key) === entry) this.entries.delete(key)
              entry.subscriber.fail(new SubscriberOverflow({ capacity: this.buffer }))
              return "overflow"
            })
        })
      )
    })
  }

  end(key: string): void {
    const entry = this.entries?.get(key)
    if (entry === undefined) return
    this.entries!.delete(key)
    entry.subscriber.end()
  }

  fail(key: string, error: SubscriptionError): boolean {
    const entry = this.entries?.get(key)
    if (entry === undefined) return false
    this.entries!.delete(key)
    entry.subscriber.fail(error)
    return true
  }

  keys(): ReadonlyArray<string> {
    return this.entries === undefined ? [] : [...this.entries.keys()]
  }

  close(lost: ObservationLost): void {
    if (this.closed !== undefined) return
    this.closed = lost
    if (this.entries === undefined) return
    for (const entry of this.entries.values()) entry.subscriber.fail(lost)
    this.entries.clear()
  }

  isClosed(): boolean {
    return this.closed !== undefined
  }

  size(): number {
    return this.entries?.size ?? 0
  }
}
