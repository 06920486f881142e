import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Queue } from "effect"
import { awaitAny, canTake, Signal } from "../../../src/core/internal/turnWait.js"

/** The id the next forked fiber gets: ids count up by one per fiber made. */
const nextFiberId = Effect.map(Effect.forkChild(Effect.void), (fiber) => fiber.id + 1)

describe("turnWait.awaitAny", () => {
  it.effect("returns at once, taking nothing and forking nothing, when a queue already has an item", () =>
    Effect.gen(function*() {
      const queue = yield* Queue.bounded<number, Cause.Done>(4)
      Queue.offerUnsafe(queue, 1)
      const before = yield* nextFiberId
      yield* awaitAny([queue], [new Signal()])
      assert.strictEqual(yield* nextFiberId, before + 1) // only the probe itself
      assert.deepStrictEqual(Queue.takeUnsafe(queue), Exit.succeed(1))
    }))

  it.effect("wakes on an offer to either queue, and leaves no registration behind", () =>
    Effect.gen(function*() {
      const a = yield* Queue.bounded<number, Cause.Done>(4)
      const b = yield* Queue.bounded<string, Cause.Done>(4)
      const settled = new Signal()
      const waiter = yield* Effect.forkChild(awaitAny([a, b], [settled]))
      yield* Effect.yieldNow
      assert.isUndefined(waiter.pollUnsafe())
      yield* Queue.offer(b, "x")
      yield* Fiber.join(waiter)
      assert.isTrue(canTake(b))
      assert.isFalse(canTake(a))
      assert.strictEqual(a.state._tag === "Done" ? -1 : a.state.takers.size, 0)
      assert.strictEqual(b.state._tag === "Done" ? -1 : b.state.takers.size, 0)
      settled.fire() // no listener left: nothing runs
      assert.deepStrictEqual(Queue.takeUnsafe(b), Exit.succeed("x"))
    }))

  it.effect("wakes when a signal fires, and when a queue ends", () =>
    Effect.gen(function*() {
      const queue = yield* Queue.bounded<number, Cause.Done>(4)
      const signal = new Signal()
      const bySignal = yield* Effect.forkChild(awaitAny([queue], [signal]))
      yield* Effect.yieldNow
      assert.isUndefined(bySignal.pollUnsafe())
      signal.fire()
      assert.isTrue(Exit.isSuccess(yield* Fiber.await(bySignal)))
      assert.isFalse(canTake(queue))

      const byEnd = yield* Effect.forkChild(awaitAny([queue], [new Signal()]))
      yield* Effect.yieldNow
      assert.isUndefined(byEnd.pollUnsafe())
      yield* Queue.end(queue)
      yield* Fiber.join(byEnd)
      assert.isTrue(canTake(queue))
      const exit = Queue.takeUnsafe(queue)
      assert.isTrue(exit !== undefined && Exit.isFailure(exit))
    }))

  it.effect("an interrupted wait removes its taker and listener; the next item still reaches a taker", () =>
    Effect.gen(function*() {
      const queue = yield* Queue.bounded<number, Cause.Done>(4)
      const signal = new Signal()
      let woken = 0
      const waiter = yield* Effect.forkChild(Effect.andThen(awaitAny([queue], [signal]), Effect.sync(() => woken++)))
      yield* Effect.yieldNow
      yield* Fiber.interrupt(waiter)
      assert.strictEqual(queue.state._tag === "Done" ? -1 : queue.state.takers.size, 0)
      signal.fire()
      const taker = yield* Effect.forkChild(Queue.take(queue))
      yield* Effect.yieldNow
      yield* Queue.offer(queue, 7)
      assert.strictEqual(yield* Fiber.join(taker), 7)
      assert.strictEqual(woken, 0)
    }))
})
