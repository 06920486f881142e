/**
 * DueOrder (one timer for entries that fall due in insertion order) on TestClock: each entry is handed to `fire` at
 * its due time with that time, one `fire` adds again keeps coming every interval, an entry due before the latest one
 * is refused, and nothing is taken once the scope closed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as DueOrder from "../../src/proto/DueOrder.js"

/** An order made in a scope of its own (the test closes it), handing each entry that fires to `fired`. */
const inOwnScope = (fired: Array<string>) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const order = yield* DueOrder.make<string>((entry) => fired.push(entry)).pipe(Scope.provide(scope))
    return { order, scope }
  })

describe("DueOrder", () => {
  it.effect("fires each entry at its due time; an entry fire adds again comes back; an earlier one is refused", () =>
    Effect.gen(function* () {
      const fired: Array<[string, number]> = []
      const order: DueOrder.DueOrder<string> = yield* DueOrder.make<string>((entry, now) => {
        fired.push([entry, now])
        if (entry === "again") order.add(entry, now + 1_000)
      })
      assert.isTrue(order.add("again", 1_000))
      assert.isTrue(order.add("once", 1_500))
      assert.isFalse(order.add("early", 1_200))
      yield* TestClock.adjust("999 millis")
      assert.deepStrictEqual(fired, [])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(fired, [["again", 1_000]])
      yield* TestClock.adjust("500 millis")
      assert.deepStrictEqual(fired, [["again", 1_000], ["once", 1_500]])
      yield* TestClock.adjust("1500 millis")
      assert.deepStrictEqual(fired.slice(2), [["again", 2_000], ["again", 3_000]])
      order.remove("again")
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(fired.length, 4)
      // Idle: the next entry wakes the timer.
      assert.isTrue(order.add("late", 9_000))
      yield* TestClock.adjust("999 millis")
      assert.strictEqual(fired.length, 4)
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(fired[4], ["late", 9_000])
    }).pipe(Effect.scoped))

  it.effect("entries added again while a tick fires many come back (many more than the map's copy interval)", () =>
    Effect.gen(function* () {
      // 100 entries due at once; `fire` adds the second half again. The tick deletes all of them while it iterates,
      // which would make its map copy itself (src/proto/FreshMap.ts) before the first one is added again: were copies
      // not held off during an iteration, the tick would not meet them and the timer would idle with them in.
      const fired: Array<[number, number]> = []
      const order: DueOrder.DueOrder<number> = yield* DueOrder.make<number>((entry, now) => {
        fired.push([entry, now])
        if (entry >= 50 && now < 3_000) order.add(entry, now + 1_000)
      })
      for (let i = 0; i < 100; i++) assert.isTrue(order.add(i, 1_000))
      yield* TestClock.adjust("1 second")
      assert.strictEqual(fired.length, 100)
      yield* TestClock.adjust("999 millis")
      assert.strictEqual(fired.length, 100)
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(fired.length, 150)
      assert.deepStrictEqual(fired.slice(100, 102), [[50, 2_000], [51, 2_000]])
      yield* TestClock.adjust("1 second")
      assert.strictEqual(fired.length, 200)
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(fired.length, 200)
    }).pipe(Effect.scoped))

  it.effect("takes nothing once the scope that made it closed", () =>
    Effect.gen(function* () {
      const fired: Array<string> = []
      const { order, scope } = yield* inOwnScope(fired)
      assert.isTrue(order.add("before", 1_000))
      yield* Scope.close(scope, Exit.void)
      assert.isFalse(order.add("after", 2_000))
      yield* TestClock.adjust("5 seconds")
      assert.deepStrictEqual(fired, [])
    }))

  it.effect("arm takes what add refuses: an earlier entry fires at its own time from a sleep, and remove disarms it", () =>
    Effect.gen(function* () {
      const fired: Array<[string, number]> = []
      const order = yield* DueOrder.make<string>((entry, now) => fired.push([entry, now]))
      order.arm("in order", 2_000)
      order.arm("earlier", 1_500)
      order.arm("disarmed", 1_000)
      order.remove("disarmed")
      yield* TestClock.adjust("1499 millis")
      assert.deepStrictEqual(fired, [])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(fired, [["earlier", 1_500]])
      yield* TestClock.adjust("500 millis")
      assert.deepStrictEqual(fired, [["earlier", 1_500], ["in order", 2_000]])
    }).pipe(Effect.scoped))

  it.effect("arm after the scope closed still fires, on a sleep of its own", () =>
    Effect.gen(function* () {
      const fired: Array<string> = []
      const { order, scope } = yield* inOwnScope(fired)
      yield* Scope.close(scope, Exit.void)
      order.arm("after", 1_000)
      yield* TestClock.adjust("999 millis")
      assert.deepStrictEqual(fired, [])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(fired, ["after"])
    }))
})
