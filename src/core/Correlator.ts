/**
 * One id → waiter registry for every reply family of a connection (a `KeyedRegistry` keyed by family and key) (protocol "Envelope and identity", "What
 * each acknowledgement proves"), instead of a map, lock and channel per family. A waiter is registered
 * before the request is sent, under `(family, key)`; the read loop delivers each correlated reply to it
 * without waiting (bounded buffer, overflow fails the waiter with `SubscriberOverflow`).
 *
 * Rules:
 * - A duplicate pending key is rejected (`SubscriptionRejected{duplicate}`): there is no transport-wide
 *   deduplication, and a second request under a pending id must not share the first one's receipts.
 * - A reply with no registered waiter, or without the correlation its family requires, establishes nothing:
 *   the caller of `deliver` logs and drops it.
 * - When the connection ends, every waiter fails with the connection's `ObservationLost` and new
 *   registrations are rejected with `connection_closed`.
 * - Waiters are owned by the connection; a caller's scope only owns its registration. Closing that scope
 *   (interruption, timeout, done) unsubscribes and settles nothing.
 */
import { Effect, type Scope, type Stream } from "effect"
import type { ObservationLost, SubscriptionRejected } from "./Errors.js"
import * as KeyedRegistry from "./KeyedRegistry.js"
import type { SubscriptionError } from "./Subscriber.js"

export interface Correlator<Families> {
  /**
   * Registers a waiter for the replies of `family` under `key`, for the lifetime of the caller's scope.
   * Succeeds with the stream of correlated replies in arrival order (several per key when the family has
   * several receipts). The stream fails with `ObservationLost` when the connection ends and with
   * `SubscriberOverflow` when its buffer overflows; it never ends by itself. Fails with
   * `SubscriptionRejected` (duplicate pending key, capacity, connection closed): nothing was registered.
   */
  readonly register: <F extends keyof Families & string>(
    family: F,
    key: string
  ) => Effect.Effect<Stream.Stream<Families[F], SubscriptionError>, SubscriptionRejected, Scope.Scope>
  /** Hands a reply to its waiter without waiting. False when no waiter is registered (or it just overflowed). */
  readonly deliver: <F extends keyof Families & string>(family: F, key: string, reply: Families[F]) => boolean
  /** Fails the waiter of one key (a reply for it failed decoding). */
  readonly failKey: (family: keyof Families & string, key: string, error: SubscriptionError) => boolean
  /** Fails every waiter of a family whose key satisfies `predicate`; returns how many. */
  readonly failWhere: (
    family: keyof Families & string,
    predicate: (key: string) => boolean,
    error: SubscriptionError
  ) => number
  /** Fails every waiter with `lost` and rejects later registrations. Idempotent (the first reason wins). */
  readonly close: (lost: ObservationLost) => void
  readonly size: () => number
}

// The family names are fixed identifiers without NUL, so a NUL separator keeps keys unambiguous.
const slot = (family: string, key: string) => `${family}\u0000${key}`

/**
 * A new, empty registry. `capacity` bounds pending waiters (more are rejected with `capacity`); `buffer`
 * bounds the replies each waiter holds before it fails with `SubscriberOverflow`. (A class: one per
 * connection costs its fields, not an object of closures; issue 18.)
 */
export const make = <Families>(options: {
  readonly capacity: number
  readonly buffer: number
}): Correlator<Families> => new Waiters<Families>(KeyedRegistry.make<unknown>(options))

class Waiters<Families> implements Correlator<Families> {
  constructor(private readonly waiters: KeyedRegistry.KeyedRegistry<unknown, undefined>) {}

  register<F extends keyof Families & string>(
    family: F,
    key: string
  ): Effect.Effect<Stream.Stream<Families[F], SubscriptionError>, SubscriptionRejected, Scope.Scope> {
    return Effect.map(
      this.waiters.subscribe(slot(family, key), undefined),
      (waiter) => waiter.stream as Stream.Stream<Families[F], SubscriptionError>
    )
  }

  deliver<F extends keyof Families & string>(family: F, key: string, reply: Families[F]): boolean {
    const delivered = this.waiters.deliver(slot(family, key), reply)
    return delivered === "delivered" || delivered === "delivered_backlogged"
  }

  failKey(family: keyof Families & string, key: string, error: SubscriptionError): boolean {
    return this.waiters.fail(slot(family, key), error)
  }

  failWhere(family: keyof Families & string, predicate: (key: string) => boolean, error: SubscriptionError): number {
    const prefix = `${family}\u0000`
    let failed = 0
    for (const id of this.waiters.keys()) {
      if (id.startsWith(prefix) && predicate(id.slice(prefix.length)) && this.waiters.fail(id, error)) failed++
    }
    return failed
  }

  close(lost: ObservationLost): void {
    this.waiters.close(lost)
  }

  size(): number {
    return this.waiters.size()
  }
}
