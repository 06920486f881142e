/**
 * The keyed registry the Correlator and both route tables share: subscribe, duplicate, capacity, per-key
 * state, delivery and overflow, release with the caller's scope, close.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Scope, Stream } from "effect"
import { ObservationLost, SubscriberOverflow, SubscriptionRejected } from "../../../src/core/Errors.js"
import * as KeyedRegistry from "../../../src/core/KeyedRegistry.js"

const registry = (capacity = 2, buffer = 2) => KeyedRegistry.make<string, number>({ capacity, buffer })

describe("KeyedRegistry", () => {
  it.effect("rejects a duplicate pending key and one past capacity, registering nothing", () =>
    Effect.gen(function*() {
      const r = registry(2)
      yield* r.subscribe("a", 0)
      assert.deepStrictEqual(yield* Effect.flip(r.subscribe("a", 0)), new SubscriptionRejected({ reason: "duplicate" }))
      yield* r.subscribe("b", 0)
      assert.deepStrictEqual(yield* Effect.flip(r.subscribe("c", 0)), new SubscriptionRejected({ reason: "capacity" }))
      assert.deepStrictEqual(r.keys(), ["a", "b"])
    }).pipe(Effect.scoped))

  it.effect("keeps per-key state and delivers in order; an overflow fails that subscriber and removes it", () =>
    Effect.gen(function*() {
      const r = registry(2, 2)
      const sub = yield* r.subscribe("a", 7)
      const entry = r.get("a")!
      entry.state = 8
      assert.strictEqual(r.get("a")?.state, 8)
      assert.strictEqual(r.deliver("a", "x"), "delivered_backlogged") // half the buffer taken
      assert.strictEqual(r.deliver("a", "y"), "delivered_backlogged")
      assert.strictEqual(r.deliver("a", "z"), "overflow")
      assert.strictEqual(r.deliver("a", "w"), "no_subscriber")
      assert.strictEqual(r.size(), 0)
      const exit = yield* Effect.exit(Stream.runCollect(sub.stream))
      assert.deepStrictEqual(exit, Exit.fail(new SubscriberOverflow({ capacity: 2 })))
    }).pipe(Effect.scoped))

  it.effect("ends a key's stream after what it buffered, and unregisters when the caller's scope closes", () =>
    Effect.gen(function*() {
      const r = registry(2, 4)
      const sub = yield* r.subscribe("a", 0)
      assert.strictEqual(r.deliver("a", "x"), "delivered")
      r.end("a")
      assert.deepStrictEqual(yield* Stream.runCollect(sub.stream), ["x"])
      const scope = yield* Scope.make()
      yield* Scope.provide(r.subscribe("b", 0), scope)
      assert.strictEqual(r.size(), 1)
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(r.size(), 0)
      // the key is free again
      yield* r.subscribe("b", 0)
    }).pipe(Effect.scoped))

  it.effect("close fails every subscriber with the connection's reason and rejects later registrations", () =>
    Effect.gen(function*() {
      const r = registry(2, 4)
      const sub = yield* r.subscribe("a", 0)
      const lost = new ObservationLost({ reason: "replaced" })
      r.close(lost)
      r.close(new ObservationLost({ reason: "disconnected" })) // the first reason wins
      assert.isTrue(r.isClosed())
      assert.deepStrictEqual(yield* Effect.exit(Stream.runCollect(sub.stream)), Exit.fail(lost))
      assert.deepStrictEqual(yield* Effect.flip(r.subscribe("b", 0)), new SubscriptionRejected({ reason: "connection_closed" }))
      assert.isFalse(r.fail("a", lost))
    }).pipe(Effect.scoped))

  it.effect("hands the consumer what was delivered since its last take as one array (a socket read's events, one Effect)", () =>
    Effect.gen(function*() {
      const r = registry(1, 64)
      const sub = yield* r.subscribe("a", 0)
      const arrays: Array<ReadonlyArray<string>> = []
      const consumer = yield* Effect.forkChild(Stream.runForEachArray(sub.stream, (items) => Effect.sync(() => void arrays.push(items))))
      yield* Effect.yieldNow
      // One read's frames are routed synchronously, before the consumer runs.
      for (const item of ["a1", "a2", "a3"]) assert.strictEqual(r.tryDeliver("a", item), "delivered")
      yield* Effect.yieldNow
      for (const item of ["b1", "b2"]) assert.strictEqual(r.tryDeliver("a", item), "delivered")
      r.end("a")
      yield* Fiber.join(consumer)
      assert.deepStrictEqual(arrays, [["a1", "a2", "a3"], ["b1", "b2"]])
    }).pipe(Effect.scoped))
})
