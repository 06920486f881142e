/**
 * The gateway's shared liveness timer (src/core/LivenessWheel.ts): one fiber checks every connection's deadline
 * to the millisecond (TestClock), a moved deadline is re-checked instead of expiring, a closed scope stops the
 * watch, and a deadline earlier than the one the wheel sleeps to wakes it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Exit, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as LivenessWheel from "../../../src/core/LivenessWheel.js"
import { yieldTimes } from "../../support/coreFakeSession.js"

/** A connection whose deadline is `lastInbound + timeoutMs`; `expired` records when the wheel ended it. */
const connection = (timeoutMs: number) =>
  Effect.gen(function*() {
    const clock = yield* Clock.Clock
    const now = () => clock.currentTimeMillisUnsafe()
    const state = { lastInbound: now(), expiredAt: undefined as number | undefined }
    const watch: LivenessWheel.LivenessWatch = {
      remaining: () => state.lastInbound + timeoutMs - now(),
      expire: Effect.sync(() => {
        state.expiredAt = now()
      })
    }
    return { state, watch, received: () => (state.lastInbound = now()) }
  })

describe("LivenessWheel", () => {
  it.effect("expires each watched connection exactly at its deadline, not a millisecond before", () =>
    Effect.gen(function*() {
      const wheel = yield* LivenessWheel.make
      const a = yield* connection(60_000)
      yield* wheel.watch(a.watch)
      yield* TestClock.adjust("10 seconds")
      const b = yield* connection(60_000)
      yield* wheel.watch(b.watch)
      assert.strictEqual(wheel.size(), 2)
      yield* TestClock.adjust("49999 millis")
      yield* yieldTimes(10)
      assert.isUndefined(a.state.expiredAt)
      yield* TestClock.adjust("1 millis")
      yield* yieldTimes(10)
      assert.strictEqual(a.state.expiredAt, 60_000)
      assert.isUndefined(b.state.expiredAt)
      yield* TestClock.adjust("9999 millis")
      yield* yieldTimes(10)
      assert.isUndefined(b.state.expiredAt)
      yield* TestClock.adjust("1 millis")
      yield* yieldTimes(10)
      assert.strictEqual(b.state.expiredAt, 70_000)
      assert.strictEqual(wheel.size(), 0)
    }))

  it.effect("add watches without a scope until its remove function is called (twice does nothing more)", () =>
    Effect.gen(function*() {
      const wheel = yield* LivenessWheel.make
      const kept = yield* connection(60_000)
      const left = yield* connection(60_000)
      wheel.add(kept.watch)
      const remove = wheel.add(left.watch)
      assert.strictEqual(wheel.size(), 2)
      remove()
      remove()
      assert.strictEqual(wheel.size(), 1)
      yield* TestClock.adjust("60 seconds")
      yield* yieldTimes(10)
      assert.strictEqual(kept.state.expiredAt, 60_000)
      assert.isUndefined(left.state.expiredAt)
      assert.strictEqual(wheel.size(), 0)
    }))

  it.effect("a deadline moved by inbound frames is checked again instead of expiring", () =>
    Effect.gen(function*() {
      const wheel = yield* LivenessWheel.make
      const c = yield* connection(60_000)
      yield* wheel.watch(c.watch)
      yield* TestClock.adjust("30 seconds")
      c.received()
      yield* TestClock.adjust("59999 millis")
      yield* yieldTimes(10)
      assert.isUndefined(c.state.expiredAt)
      yield* TestClock.adjust("1 millis")
      yield* yieldTimes(10)
      assert.strictEqual(c.state.expiredAt, 90_000)
    }))

  it.effect("a closed watch never expires; an earlier deadline wakes a wheel sleeping to a later one", () =>
    Effect.gen(function*() {
      const wheel = yield* LivenessWheel.make
      const long = yield* connection(60_000)
      const scope = yield* Scope.make()
      yield* wheel.watch(long.watch).pipe(Scope.provide(scope))
      yield* yieldTimes(10)
      const short = yield* connection(1_000)
      yield* wheel.watch(short.watch)
      yield* TestClock.adjust("1 second")
      yield* yieldTimes(10)
      assert.strictEqual(short.state.expiredAt, 1_000)
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(wheel.size(), 0)
      yield* TestClock.adjust("2 minutes")
      yield* yieldTimes(10)
      assert.isUndefined(long.state.expiredAt)
    }))
})

describe("LivenessWheel check-ahead", () => {
  it.effect("checks live connections whose check times fall within CheckAheadMs in one pass, and expires none early", () =>
    Effect.gen(function*() {
      const wheel = yield* LivenessWheel.make
      const clock = yield* Clock.Clock
      const checkedAt = new Set<number>()
      const live: Array<{ readonly received: () => void; readonly state: { expiredAt: number | undefined } }> = []
      // 100 connections accepted 10 ms apart (check times spread over one second), each with a 10 s timeout.
      for (let i = 0; i < 100; i++) {
        const c = yield* connection(10_000)
        const remaining = c.watch.remaining
        wheel.add({
          remaining: () => {
            checkedAt.add(clock.currentTimeMillisUnsafe())
            return remaining()
          },
          expire: c.watch.expire
        })
        live.push(c)
        yield* TestClock.adjust("10 millis")
      }
      checkedAt.clear() // (adding reads each deadline once)
      // Every connection hears a frame each second for 30 s: each check finds the deadline moved.
      for (let s = 0; s < 30; s++) {
        for (const c of live) c.received()
        yield* TestClock.adjust("1 second")
        yield* yieldTimes(10)
      }
      assert.isTrue(live.every((c) => c.state.expiredAt === undefined))
      // One check time per connection and deadline period before; now the checks of a second share a pass.
      assert.isAtMost(checkedAt.size, 30)
      // Silent from now on: each expires exactly at its own deadline (the last frame + 10 s).
      const silentFrom = clock.currentTimeMillisUnsafe() - 1000
      yield* TestClock.adjust("8999 millis")
      yield* yieldTimes(10)
      assert.isTrue(live.every((c) => c.state.expiredAt === undefined))
      yield* TestClock.adjust("1 millis")
      yield* yieldTimes(10)
      assert.isTrue(live.every((c) => c.state.expiredAt === silentFrom + 10_000))
    }))
})

describe("LivenessWheel heap order", () => {
  it.effect("many connections with moved deadlines each expire exactly at their own deadline", () =>
    Effect.gen(function*() {
      const wheel = yield* LivenessWheel.make
      // A fixed pseudo-random sequence: timeouts 200-5,199 ms, frames at varied times, so re-armed slots land both
      // within the check-ahead window (put back after the pass) and past it (moved down in place).
      let seed = 7
      const next = (n: number) => (seed = (seed * 16807) % 2147483647) % n
      const all: Array<{ readonly deadline: () => number; readonly state: { lastInbound: number; expiredAt: number | undefined } }> = []
      for (let i = 0; i < 300; i++) {
        const timeoutMs = 200 + next(5_000)
        const c = yield* connection(timeoutMs)
        yield* wheel.watch(c.watch)
        all.push({ deadline: () => c.state.lastInbound + timeoutMs, state: c.state })
      }
      for (let t = 0; t < 8_000; t += 50) {
        for (let k = 0; k < 20; k++) {
          const c = all[next(all.length)]!
          if (c.state.expiredAt === undefined) c.state.lastInbound = t
        }
        yield* TestClock.adjust("50 millis")
        yield* yieldTimes(5)
      }
      yield* TestClock.adjust("10 seconds")
      yield* yieldTimes(10)
      assert.strictEqual(wheel.size(), 0)
      for (const c of all) assert.strictEqual(c.state.expiredAt, c.deadline())
    }))
})
