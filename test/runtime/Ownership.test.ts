import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Logger, References } from "effect"
import { TestClock } from "effect/testing"
import { closeUntilConfirmed, MaxCauseChars, Ownership, sanitizeCause } from "../../src/runtime/Ownership.js"
import { RuntimePolicy } from "../../src/runtime/RuntimePolicy.js"
import { same, settle } from "../support/runtimeTestWire.js"

const layer = Layer.mergeAll(Ownership.layer, RuntimePolicy.layer())

describe("Ownership", () => {
  it.effect("records a hung attempt at exactly 10 s, retries after 500 ms and 750 ms, and returns only once confirmed", () =>
    Effect.gen(function* () {
      const ownership = yield* Ownership
      yield* ownership.acquire("executor-1", "executor")
      let attempts = 0
      const close = Effect.suspend(() => {
        attempts++
        return attempts === 1 ? Effect.never : attempts === 2 ? Effect.fail("boom") : Effect.void
      })
      const fiber = yield* closeUntilConfirmed("executor-1", close, (e) => e).pipe(Effect.forkChild)
      yield* settle
      same(yield* ownership.owned, [{ resource: "executor-1", kind: "executor", state: { _tag: "Closing" } }])
      yield* TestClock.adjust(9_999)
      same(yield* ownership.unconfirmed, [])
      yield* TestClock.adjust(1)
      same(yield* ownership.unconfirmed, [{ resource: "executor-1", kind: "executor", attempts: 1, last_error: "close attempt timed out" }])
      yield* TestClock.adjust(499)
      assert.strictEqual(attempts, 1)
      yield* TestClock.adjust(1)
      same(yield* ownership.unconfirmed, [{ resource: "executor-1", kind: "executor", attempts: 2, last_error: "boom" }])
      yield* TestClock.adjust(749)
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust(1)
      yield* Fiber.join(fiber)
      assert.strictEqual(attempts, 3)
      same(yield* ownership.owned, [])
    }).pipe(Effect.provide(layer)))

  it.effect("caps the backoff at 5 s and never gives up", () =>
    Effect.gen(function* () {
      const ownership = yield* Ownership
      yield* ownership.acquire("r", "executor")
      let attempts = 0
      const fiber = yield* closeUntilConfirmed("r", Effect.suspend(() => (++attempts < 20 ? Effect.fail("no") : Effect.void)), (e) => e).pipe(
        Effect.forkChild
      )
      yield* TestClock.adjust("1 minute")
      const before = attempts
      yield* TestClock.adjust(5_000)
      assert.strictEqual(attempts, before + 1)
      yield* TestClock.adjust("2 minutes")
      yield* Fiber.join(fiber)
      same(yield* ownership.owned, [])
    }).pipe(Effect.provide(layer)))

  it.effect("an interrupted caller does not abandon the close (it is uninterruptible)", () =>
    Effect.gen(function* () {
      const ownership = yield* Ownership
      yield* ownership.acquire("r", "executor")
      let closed = false
      const fiber = yield* closeUntilConfirmed("r", Effect.andThen(Effect.sleep("1 second"), Effect.sync(() => {
        closed = true
      })), () => "").pipe(Effect.forkChild)
      yield* settle
      const interrupter = yield* Fiber.interrupt(fiber).pipe(Effect.forkChild)
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(interrupter)
      assert.isTrue(closed)
      same(yield* ownership.owned, [])
    }).pipe(Effect.provide(layer)))

  it.effect("records and logs an adapter's close error only sanitized and bounded", () =>
    Effect.gen(function* () {
      const ownership = yield* Ownership
      yield* ownership.acquire("r", "executor")
      const raw = `disk\u0000 full\r\n\u001b[31mred\u202e${"x".repeat(500)}`
      const logged: Array<unknown> = []
      const capture = Logger.make((options) => {
        logged.push(options.message, ...Object.values(options.fiber.getRef(References.CurrentLogAnnotations)))
      })
      let attempts = 0
      const close = Effect.suspend(() => (++attempts === 1 ? Effect.fail(raw) : Effect.void))
      const fiber = yield* closeUntilConfirmed("r", close, (e) => e).pipe(
        Effect.provide(Logger.layer([capture])),
        Effect.forkChild
      )
      yield* settle
      const [record] = yield* ownership.unconfirmed
      const cause = record!.last_error
      assert.strictEqual(Array.from(cause).length, MaxCauseChars)
      assert.isTrue(cause.startsWith("disk full[31mredxxx"))
      assert.isTrue(cause.endsWith("…"))
      assert.notMatch(cause, /[\u0000-\u001f\u202e]/)
      assert.isTrue(logged.includes(cause))
      // The operator's line: cleanup not confirmed, naming the resource (issue #20 "cleanup unconfirmed").
      assert.isTrue(logged.some((v) => Array.isArray(v) && v.includes("cleanup not confirmed; keeping ownership and retrying")))
      assert.isTrue(logged.includes("r"))
      assert.isFalse(logged.some((v) => typeof v === "string" && v.includes("\u0000")))
      yield* TestClock.adjust(500)
      yield* Fiber.join(fiber)
    }).pipe(Effect.provide(layer)))

  it("sanitizeCause keeps short printable text as it is", () => {
    assert.strictEqual(sanitizeCause("process 42 did not exit"), "process 42 did not exit")
    assert.strictEqual(sanitizeCause("é".repeat(MaxCauseChars)), "é".repeat(MaxCauseChars))
    assert.strictEqual(sanitizeCause(""), "")
  })
})
