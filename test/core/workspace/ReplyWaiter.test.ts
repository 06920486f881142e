/**
 * The drivers' reply waiter (TestClock): replies in arrival order, one budget for the whole operation, a reply
 * routed before the deadline still taken after it, and the end of the reply stream as a typed wait end.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Fiber, Queue, Result, Stream } from "effect"
import { TestClock } from "effect/testing"
import { ObservationLost, SubscriberOverflow } from "../../../src/core/Errors.js"
import type { SubscriptionError } from "../../../src/core/Subscriber.js"
import { waiterOver } from "../../../src/core/workspace/internal/replies.js"

const source = Effect.gen(function*() {
  const queue = yield* Queue.unbounded<{ readonly payload: number }, SubscriptionError | Cause.Done>()
  const waiter = yield* waiterOver(Stream.fromQueue(queue), (m) => m.payload)
  const deliver = (n: number) => Effect.andThen(Queue.offer(queue, { payload: n }), Effect.yieldNow)
  return { queue, waiter, deliver }
})

describe("reply waiter", () => {
  it.effect("takes replies in order and ends the wait at the operation's deadline, not per reply", () =>
    Effect.scoped(Effect.gen(function*() {
      const { deliver, waiter } = yield* source
      yield* waiter.startBudget("100 millis")
      yield* TestClock.adjust("60 millis")
      yield* deliver(1)
      yield* deliver(2)
      assert.deepStrictEqual(yield* waiter.next, Result.succeed(1))
      assert.deepStrictEqual(yield* waiter.next, Result.succeed(2))
      // 60 ms more would be within a fresh per-reply timeout, but past the operation's budget.
      const pending = yield* Effect.forkChild(waiter.next)
      yield* TestClock.adjust("60 millis")
      assert.deepStrictEqual(yield* Fiber.join(pending), Result.fail("budget_exceeded" as const))
    })))

  it.effect("a reply routed before the deadline fired is taken after it; then the budget ends the wait", () =>
    Effect.scoped(Effect.gen(function*() {
      const { queue, waiter } = yield* source
      yield* waiter.startBudget("100 millis")
      yield* TestClock.adjust("99 millis")
      // Routed (in the Correlator's buffer) when the deadline fires, not yet moved to the waiter.
      yield* Queue.offer(queue, { payload: 7 })
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* waiter.next, Result.succeed(7))
      assert.deepStrictEqual(yield* waiter.next, Result.fail("budget_exceeded" as const))
    })))

  it.effect("the reply stream's failure ends the wait: connection lost or receipt overflow", () =>
    Effect.scoped(Effect.gen(function*() {
      const a = yield* source
      yield* Queue.fail(a.queue, new ObservationLost({ reason: "disconnected" }))
      assert.deepStrictEqual(yield* a.waiter.next, Result.fail("connection_lost" as const))
      const b = yield* source
      yield* b.deliver(3)
      yield* Queue.fail(b.queue, new SubscriberOverflow({ capacity: 1 }))
      assert.deepStrictEqual(yield* b.waiter.next, Result.succeed(3))
      assert.deepStrictEqual(yield* b.waiter.next, Result.fail("receipt_overflow" as const))
    })))
})
