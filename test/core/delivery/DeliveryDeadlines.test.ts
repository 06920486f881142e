/**
 * One timer for many preparation budgets (DeliveryDeadlines.ts) on TestClock: budgets fire at their due time in
 * order, a disarmed or out-of-scope one never fires, one due before an armed one is not taken (its caller falls
 * back to a timer fiber), a budget armed there starts no fiber. A prepared Turn's budgets on shared deadlines (10 min,
 * and 60 s after a cleanup-unconfirmed failure) are tested with the other budget tests in Delivery.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { TestClock } from "effect/testing"
import { armDeadline, makeDeadlines } from "../../../src/core/DeliveryDeadlines.js"
import { Signal } from "../../../src/core/internal/turnWait.js"

describe("DeliveryDeadlines", () => {
  it.effect("fires each armed budget at its due time, in order; a disarmed one never; an earlier one is not taken", () =>
    Effect.gen(function* () {
      const deadlines = yield* makeDeadlines
      const a = new Signal()
      const b = new Signal()
      const c = new Signal()
      assert.isDefined(deadlines.arm(10_000, a))
      assert.isDefined(deadlines.arm(15_000, b))
      const disarmC = deadlines.arm(15_000, c)
      assert.isDefined(disarmC)
      // Due before the latest armed: not taken here (the caller keeps its own timer).
      assert.isUndefined(deadlines.arm(12_000, new Signal()))
      disarmC!()
      yield* TestClock.adjust("9999 millis")
      assert.deepStrictEqual([a.fired, b.fired, c.fired], [false, false, false])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual([a.fired, b.fired, c.fired], [true, false, false])
      yield* TestClock.adjust("5 seconds")
      assert.deepStrictEqual([a.fired, b.fired, c.fired], [true, true, false])
      yield* TestClock.adjust("1 minute")
      assert.isFalse(c.fired)
      // Idle, the ticker is woken by the next budget.
      const d = new Signal()
      assert.isDefined(deadlines.arm(80_000, d))
      yield* TestClock.adjust("4999 millis")
      assert.isFalse(d.fired)
      yield* TestClock.adjust("1 millis")
      assert.isTrue(d.fired)
    }).pipe(Effect.scoped))

  it.effect("a budget armed on shared deadlines starts no fiber and is disarmed with its scope; without them it runs on a fiber", () =>
    Effect.gen(function* () {
      const deadlines = yield* makeDeadlines
      // Fiber ids are sequential: a probe fork before and after shows how many fibers arming made.
      const probe = Effect.map(Effect.forkChild(Effect.void), (fiber) => fiber.id)
      const shared = new Signal()
      const scope = yield* Scope.make()
      const before = yield* probe
      // Its stop effect is not used: closing the scope is what must disarm it.
      yield* Effect.asVoid(armDeadline(deadlines, 10_000, shared).pipe(Scope.provide(scope)))
      assert.strictEqual((yield* probe) - before, 1)
      yield* Scope.close(scope, Exit.void)
      yield* TestClock.adjust("1 minute")
      assert.isFalse(shared.fired)
      const alone = new Signal()
      const start = yield* probe
      const stop = yield* armDeadline(undefined, 70_000, alone)
      assert.strictEqual((yield* probe) - start, 2)
      yield* TestClock.adjust("10 seconds")
      assert.isTrue(alone.fired)
      yield* stop
    }).pipe(Effect.scoped))
})
