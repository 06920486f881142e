/**
 * What a bounded send reports (errors say what is known, issue #12): a write that completed is `Sent`; a frame
 * handed over whose write did not complete within its budget is `Unknown{timeout}`, and one lost with the
 * connection after it was handed over `Unknown{connection_lost}`; a send refused before anything was handed
 * over — the codec refused it, or the connection had already ended — is a definite `NotSent`, never `Unknown`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Logger, References } from "effect"
import { TestClock } from "effect/testing"
import type { Messages } from "../../src/proto/index.js"
import { unsafeMake } from "../../src/proto/Ids.js"
import * as Outbound from "../../src/runtime/Outbound.js"
import { MemoryTransport } from "../support/runtimeMemoryTransport.js"
import { settle } from "../support/runtimeTestWire.js"

const delta = (text: string): Messages.RuntimeToCore => ({ type: "delta", id: unsafeMake.runId("run-1"), payload: { delta: text, sequence: 1 } })

describe("Outbound.sendWithin", () => {
  it.effect("Sent, Unknown at exactly the budget, Unknown on loss after hand-over, NotSent after the end", () =>
    Effect.gen(function* () {
      const core = yield* MemoryTransport.make
      const outbound = Outbound.make(core.transport)
      assert.deepStrictEqual(yield* outbound.sendWithin(delta("a"), Duration.seconds(5)), { _tag: "Sent" })
      yield* core.holdWrites
      const late = yield* Effect.forkChild(outbound.sendWithin(delta("b"), Duration.seconds(5)))
      yield* settle
      yield* TestClock.adjust(4_999)
      assert.isUndefined(late.pollUnsafe())
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(yield* Fiber.join(late), { _tag: "Unknown", reason: "timeout" })
      const lost = yield* Effect.forkChild(outbound.sendWithin(delta("c"), Duration.seconds(5)))
      yield* settle
      yield* core.close(1006)
      yield* core.releaseWrites
      assert.deepStrictEqual(yield* Fiber.join(lost), { _tag: "Unknown", reason: "connection_lost" })
      assert.deepStrictEqual(yield* outbound.sendWithin(delta("d"), Duration.seconds(5)), { _tag: "NotSent", reason: "connection_closed" })
    }))

  it.effect("a frame the codec refuses is NotSent (refused)", () =>
    Effect.gen(function* () {
      const core = yield* MemoryTransport.make
      const outbound = Outbound.make(core.transport)
      const invalid = { type: "delta", id: "run-1", payload: { delta: "x", sequence: -1 } } as unknown as Messages.RuntimeToCore
      assert.deepStrictEqual(yield* outbound.sendWithin(invalid, Duration.seconds(5)), { _tag: "NotSent", reason: "refused" })
    }))
})

describe("Outbound.post", () => {
  it.effect("returns before the write completes, never fails, and logs what is known: NotSent at once, Unknown on a later loss", () =>
    Effect.gen(function* () {
      const lines: Array<{ readonly message: string; readonly outcome: unknown }> = []
      const logger = Logger.make<unknown, void>(({ fiber, message }) => {
        lines.push({ message: String(Array.isArray(message) ? message[0] : message), outcome: fiber.getRef(References.CurrentLogAnnotations)["outcome"] })
      })
      yield* Effect.gen(function* () {
        const core = yield* MemoryTransport.make
        const outbound = Outbound.make(core.transport)
        yield* core.holdWrites
        // Handed over; its write is held, and post does not wait for it.
        yield* outbound.post(delta("a"))
        assert.strictEqual(yield* core.pending, 0)
        yield* core.releaseWrites
        yield* settle
        assert.strictEqual((yield* core.fromRuntime).type, "delta")
        assert.deepStrictEqual(lines, [])
        yield* core.holdWrites
        yield* outbound.post(delta("b"))
        yield* core.close(1006)
        yield* core.releaseWrites
        yield* settle
        assert.deepStrictEqual(lines, [{ message: "frame not confirmed written", outcome: "connection_lost" }])
        yield* outbound.post(delta("c"))
        const invalid = { type: "delta", id: "run-1", payload: { delta: "x", sequence: -1 } } as unknown as Messages.RuntimeToCore
        yield* outbound.post(invalid)
        assert.deepStrictEqual(lines.slice(1), [
          { message: "frame not sent: the connection had already ended", outcome: "not_sent_connection_closed" },
          { message: "own frame refused by the codec; nothing sent", outcome: "not_sent_refused" }
        ])
      }).pipe(Effect.provide(Logger.layer([logger])))
    }))
})
