/**
 * The one reply registry: registration, correlation, duplicates, capacity, closing, and the bounded
 * non-blocking subscriber it is built on.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Option, Stream } from "effect"
import * as Correlator from "../../../src/core/Correlator.js"
import { ObservationLost, SubscriberOverflow, SubscriptionRejected } from "../../../src/core/Errors.js"
import { makeSubscriber } from "../../../src/core/Subscriptions.js"
import { collect } from "./helpers.js"

interface Families {
  readonly ack: string
  readonly result: number
}

const make = (options: { readonly capacity?: number; readonly buffer?: number } = {}) =>
  Correlator.make<Families>({ capacity: options.capacity ?? 8, buffer: options.buffer ?? 4 })

describe("Correlator", () => {
  it.effect("delivers a reply only to the waiter of its family and key", () =>
    Effect.gen(function*() {
      const correlator = make()
      const acks = yield* correlator.register("ack", "k1")
      const results = yield* correlator.register("result", "k1")
      assert.isFalse(correlator.deliver("ack", "k2", "nobody"))
      assert.isTrue(correlator.deliver("ack", "k1", "first"))
      assert.isTrue(correlator.deliver("result", "k1", 7))
      assert.isTrue(correlator.deliver("ack", "k1", "second"))
      assert.deepStrictEqual(yield* Stream.runCollect(Stream.take(acks, 2)), ["first", "second"])
      assert.deepStrictEqual(Option.getOrThrow(yield* Stream.runHead(results)), 7)
    }))

  it.effect("rejects a duplicate pending key and accepts it again after the first registration's scope closed", () =>
    Effect.gen(function*() {
      const correlator = make()
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Effect.asVoid(correlator.register("ack", "k1"))
        assert.deepStrictEqual(
          yield* Effect.flip(correlator.register("ack", "k1")),
          new SubscriptionRejected({ reason: "duplicate" })
        )
      }))
      assert.strictEqual(correlator.size(), 0)
      assert.isFalse(correlator.deliver("ack", "k1", "after unsubscribe"))
      yield* Effect.asVoid(correlator.register("ack", "k1"))
    }))

  it.effect("bounds pending waiters", () =>
    Effect.gen(function*() {
      const correlator = make({ capacity: 2 })
      yield* Effect.asVoid(correlator.register("ack", "k1"))
      yield* Effect.asVoid(correlator.register("ack", "k2"))
      assert.deepStrictEqual(
        yield* Effect.flip(correlator.register("ack", "k3")),
        new SubscriptionRejected({ reason: "capacity" })
      )
    }))

  it.effect("fails every waiter with the connection's ObservationLost when it closes, and refuses later ones", () =>
    Effect.gen(function*() {
      const correlator = make()
      const acks = yield* correlator.register("ack", "k1")
      const results = yield* correlator.register("result", "k2")
      correlator.deliver("ack", "k1", "before")
      correlator.close(new ObservationLost({ reason: "replaced" }))
      correlator.close(new ObservationLost({ reason: "disconnected" }))
      assert.deepStrictEqual(yield* collect(acks), {
        items: ["before"],
        exit: Exit.fail(new ObservationLost({ reason: "replaced" }))
      })
      assert.deepStrictEqual((yield* collect(results)).exit, Exit.fail(new ObservationLost({ reason: "replaced" })))
      assert.deepStrictEqual(
        yield* Effect.flip(correlator.register("ack", "k3")),
        new SubscriptionRejected({ reason: "connection_closed" })
      )
    }))

  it.effect("a caller's interruption only unsubscribes", () =>
    Effect.gen(function*() {
      const correlator = make()
      const waiting = yield* Effect.scoped(Effect.flatMap(correlator.register("ack", "k1"), Stream.runHead)).pipe(
        Effect.forkChild
      )
      yield* Effect.yieldNow
      assert.strictEqual(correlator.size(), 1)
      yield* Fiber.interrupt(waiting)
      assert.strictEqual(correlator.size(), 0)
      const other = yield* correlator.register("ack", "k2")
      assert.isTrue(correlator.deliver("ack", "k2", "still works"))
      assert.deepStrictEqual(Option.getOrThrow(yield* Stream.runHead(other)), "still works")
    }))

  it.effect("fails the waiters a predicate selects", () =>
    Effect.gen(function*() {
      const correlator = make()
      const a = yield* correlator.register("ack", "run-1\u0000in-1")
      const b = yield* correlator.register("ack", "run-2\u0000in-1")
      const failed = correlator.failWhere("ack", (key) => key.startsWith("run-1\u0000"), new ObservationLost({ reason: "invalid_frame" }))
      assert.strictEqual(failed, 1)
      assert.deepStrictEqual((yield* collect(a)).exit, Exit.fail(new ObservationLost({ reason: "invalid_frame" })))
      assert.isTrue(correlator.deliver("ack", "run-2\u0000in-1", "ok"))
      assert.deepStrictEqual(Option.getOrThrow(yield* Stream.runHead(b)), "ok")
    }))
})

describe("Subscriber", () => {
  it.effect("never waits: a full buffer fails it with SubscriberOverflow after the buffered items", () =>
    Effect.gen(function*() {
      const subscriber = yield* makeSubscriber<number>(2)
      assert.isTrue(subscriber.push(1))
      assert.isTrue(subscriber.push(2))
      assert.isFalse(subscriber.push(3))
      assert.isFalse(subscriber.push(4))
      assert.isFalse(subscriber.isOpen())
      assert.deepStrictEqual(yield* collect(subscriber.stream), {
        items: [1, 2],
        exit: Exit.fail(new SubscriberOverflow({ capacity: 2 }))
      })
    }))

  it.effect("the first end or failure wins", () =>
    Effect.gen(function*() {
      const subscriber = yield* makeSubscriber<number>(4)
      subscriber.push(1)
      subscriber.end()
      subscriber.fail(new ObservationLost({ reason: "disconnected" }))
      assert.deepStrictEqual(yield* collect(subscriber.stream), { items: [1], exit: Exit.void })
    }))
})
