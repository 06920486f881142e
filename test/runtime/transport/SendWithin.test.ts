/**
 * `Transport.sendWithin` over a controlled FrameSocket, on TestClock (issue 18: the budget is the transport's, kept
 * by one `DueOrder` per budget length instead of a race with a sleep on fibers of its own per send): `"written"`
 * when the write completes in time; `"late"` at exactly the budget, the frame still handed over and its 10 s write
 * deadline still applying; each budget counted from its own send; and a budget its `DueOrder` does not take (the
 * clock went back) still ends on time.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import type { Messages } from "../../../src/proto/index.js"
import { TransportClosed } from "../../../src/runtime/transport/Transport.js"
import { fromSocket } from "../../../src/runtime/transport/WebSocketTransport.js"
import { delta, makeSocket, noLiveness, reader } from "../../support/fakeFrameSocket.js"

const budget = Duration.seconds(5)

/** A transport over a controlled socket, one frame sent within `budget` on a fiber, and 4999 ms passed since. */
const sentAlmostBudgetAgo = Effect.gen(function* () {
  const fake = makeSocket()
  const transport = yield* fromSocket(fake.socket, noLiveness)
  const fiber = yield* Effect.forkChild(transport.sendWithin(delta("a"), budget))
  yield* Effect.yieldNow
  yield* TestClock.adjust("4999 millis")
  return { fake, transport, fiber }
})

describe("WebSocketTransport sendWithin", () => {
  it.effect("written when the write completes within the budget; nothing happens at the budget after that", () =>
    Effect.gen(function* () {
      const { fake, fiber } = yield* sentAlmostBudgetAgo
      fake.writes[0]!.written()
      assert.strictEqual(yield* Fiber.join(fiber), "written")
      yield* TestClock.adjust("20 seconds")
      assert.deepStrictEqual(fake.calls, [])
    }))

  it.effect("late at exactly the budget; the frame stays handed over and a write completing later changes nothing", () =>
    Effect.gen(function* () {
      const { fake, fiber, transport } = yield* sentAlmostBudgetAgo
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(yield* Fiber.join(fiber), "late")
      assert.strictEqual(fake.writes.length, 1)
      assert.deepStrictEqual(fake.calls, [])
      fake.writes[0]!.written()
      yield* TestClock.adjust("20 seconds")
      assert.deepStrictEqual(fake.calls, [])
      // The connection goes on.
      const next = yield* Effect.forkChild(transport.sendWithin(delta("b", 2), budget))
      yield* Effect.yieldNow
      fake.writes[1]!.written()
      assert.strictEqual(yield* Fiber.join(next), "written")
    }))

  it.effect("a late frame's 10 s write deadline still applies: at 9999 ms nothing, at 10 s the transport ends", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const next = yield* reader(transport.inbound)
      const fiber = yield* Effect.forkChild(transport.sendAll([delta("x")]).pipe(Effect.andThen(Effect.never), Effect.ignore))
      yield* Effect.yieldNow
      yield* Fiber.interrupt(fiber) // a batch whose wait ended: its deadline no longer applies
      const late = yield* Effect.forkChild(transport.sendWithin(delta("a"), budget))
      yield* Effect.yieldNow
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(yield* Fiber.join(late), "late")
      yield* TestClock.adjust("4999 millis")
      assert.deepStrictEqual(fake.calls, [])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(fake.calls, ["terminate"])
      assert.deepStrictEqual(yield* Effect.flip(next), new TransportClosed({ reason: "write_failed" }))
    }))

  it.effect("each budget counts from its own send, and a shorter budget after a longer one ends first", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const long = yield* Effect.forkChild(transport.sendWithin(delta("long", 1), Duration.seconds(8)))
      yield* Effect.yieldNow
      const first = yield* Effect.forkChild(transport.sendWithin(delta("a", 2), budget))
      yield* Effect.yieldNow
      yield* TestClock.adjust("1 second")
      const second = yield* Effect.forkChild(transport.sendWithin(delta("b", 3), budget))
      yield* Effect.yieldNow
      yield* TestClock.adjust("3999 millis")
      assert.isUndefined(first.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(yield* Fiber.join(first), "late")
      assert.isUndefined(second.pollUnsafe())
      yield* TestClock.adjust("999 millis")
      assert.isUndefined(second.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(yield* Fiber.join(second), "late")
      assert.isUndefined(long.pollUnsafe())
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual(yield* Fiber.join(long), "late")
      assert.deepStrictEqual(fake.calls, [])
    }))

  it.effect("a budget its DueOrder refuses (the clock went back) still ends at the budget", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      yield* TestClock.setTime(2_000)
      const first = yield* Effect.forkChild(transport.sendWithin(delta("a", 1), budget)) // due at 7000
      yield* Effect.yieldNow
      yield* TestClock.setTime(1_000)
      const second = yield* Effect.forkChild(transport.sendWithin(delta("b", 2), budget)) // due at 6000: refused there
      yield* Effect.yieldNow
      yield* TestClock.setTime(5_999)
      assert.isUndefined(second.pollUnsafe())
      yield* TestClock.setTime(6_000)
      assert.strictEqual(yield* Fiber.join(second), "late")
      assert.isUndefined(first.pollUnsafe())
      yield* TestClock.setTime(7_000)
      assert.strictEqual(yield* Fiber.join(first), "late")
    }))

  it.effect("a frame refused by the codec, or sent after the end, fails before anything is handed over", () =>
    Effect.gen(function* () {
      const fake = makeSocket()
      const transport = yield* fromSocket(fake.socket, noLiveness)
      const invalid = { ...delta("x"), payload: { delta: "x", sequence: -1 } } as unknown as Messages.RuntimeToCore
      assert.strictEqual((yield* Effect.flip(transport.sendWithin(invalid, budget)))._tag, "OutgoingFrameRejected")
      fake.end(1000)
      assert.deepStrictEqual(
        yield* Effect.flip(transport.sendWithin(delta("y"), budget)),
        new TransportClosed({ reason: "closed_by_peer", code: 1000, unsent: true })
      )
      assert.strictEqual(fake.writes.length, 0)
    }))
})
