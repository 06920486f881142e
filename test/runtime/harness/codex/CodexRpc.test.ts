/**
 * The Codex JSON-RPC client over an in-memory line channel: ids, ordered writes, `written` on flush, definite
 * rejection on a JSON-RPC error, unknown after the deadline (both sides of the boundary, on the TestClock),
 * server requests and notifications in order, malformed lines ignored.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Queue, Schema } from "effect"
import { TestClock } from "effect/testing"
import { RpcNotSent, RpcRejected, RpcUnknown } from "../../../../src/runtime/harness/codex/CodexRpc.js"
import { connected } from "../../../support/codexRpcChannel.js"

const Result = Schema.Struct({ turnId: Schema.String })

describe("CodexRpc", () => {
  it.effect("runs written once after the flush, then decodes the response of the same id", () =>
    Effect.gen(function* () {
      const { ch, rpc } = yield* connected
      let written = 0
      const fiber = yield* Effect.forkChild(rpc.call("turn/steer", { a: 1 }, Result, { timeout: "10 seconds", written: Effect.sync(() => written++) }))
      const sent = yield* Queue.take(ch.written)
      assert.deepStrictEqual(sent, { id: 1, method: "turn/steer", params: { a: 1 } })
      yield* Effect.yieldNow
      assert.strictEqual(written, 1)
      yield* Queue.offer(ch.lines, JSON.stringify({ id: 1, result: { turnId: "t1", extra: true } }))
      assert.deepStrictEqual(yield* Fiber.join(fiber), { turnId: "t1" })
      assert.strictEqual(written, 1)
    }))

  it.effect("a JSON-RPC error is a definite rejection with a bounded message", () =>
    Effect.gen(function* () {
      const { ch, rpc } = yield* connected
      const fiber = yield* Effect.forkChild(rpc.call("turn/steer", {}, Result, { timeout: "10 seconds" }))
      yield* Queue.take(ch.written)
      yield* Queue.offer(ch.lines, JSON.stringify({ id: 1, error: { code: -32600, message: `no active turn${"x".repeat(500)}` } }))
      const exit = yield* Fiber.await(fiber)
      assert.deepStrictEqual(exit, Exit.fail(new RpcRejected({ method: "turn/steer", code: -32600, message: `no active turn${"x".repeat(186)}…` })))
    }))

  it.effect("no response is unknown exactly at the budget, never before", () =>
    Effect.gen(function* () {
      const { ch, rpc } = yield* connected
      const fiber = yield* Effect.forkChild(rpc.call("turn/steer", {}, Result, { timeout: "10 seconds" }))
      yield* Queue.take(ch.written)
      yield* TestClock.adjust("9999 millis")
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Fiber.await(fiber), Exit.fail(new RpcUnknown({ method: "turn/steer", reason: "timeout" })))
    }))

  it.effect("a response just before the budget wins; a late one is ignored", () =>
    Effect.gen(function* () {
      const { ch, rpc } = yield* connected
      const fiber = yield* Effect.forkChild(rpc.call("turn/steer", {}, Result, { timeout: "10 seconds" }))
      yield* Queue.take(ch.written)
      yield* TestClock.adjust("9999 millis")
      yield* Queue.offer(ch.lines, JSON.stringify({ id: 1, result: { turnId: "t1" } }))
      assert.deepStrictEqual(yield* Fiber.join(fiber), { turnId: "t1" })
      yield* Queue.offer(ch.lines, JSON.stringify({ id: 1, result: { turnId: "late" } }))
    }))

  it.effect("a write that fails is not sent and runs no written callback; an undecodable result is unknown", () =>
    Effect.gen(function* () {
      const { ch, rpc } = yield* connected
      ch.breakPipe()
      let written = 0
      const exit = yield* Effect.exit(rpc.call("turn/steer", {}, Result, { timeout: "10 seconds", written: Effect.sync(() => written++) }))
      assert.deepStrictEqual(exit, Exit.fail(new RpcNotSent({ method: "turn/steer" })))
      assert.strictEqual(written, 0)
      const { ch: ch2, rpc: rpc2 } = yield* connected
      const fiber = yield* Effect.forkChild(rpc2.call("turn/steer", {}, Result, { timeout: "10 seconds" }))
      yield* Queue.take(ch2.written)
      yield* Queue.offer(ch2.lines, JSON.stringify({ id: 1, result: { turnId: 7 } }))
      assert.deepStrictEqual(yield* Fiber.await(fiber), Exit.fail(new RpcUnknown({ method: "turn/steer", reason: "invalid_response" })))
    }))

  it.effect("delivers notifications and server requests in order, skipping malformed lines; the end fails pending calls as unknown", () =>
    Effect.gen(function* () {
      const { ch, rpc } = yield* connected
      const fiber = yield* Effect.forkChild(rpc.call("thread/start", {}, Result, { timeout: "30 seconds" }))
      yield* Queue.take(ch.written)
      yield* Queue.offerAll(ch.lines, [
        "not json",
        "[1,2]",
        JSON.stringify({ method: "turn/started", params: { n: 1 } }),
        JSON.stringify({ id: 0, method: "item/tool/call", params: { n: 2 } }),
        JSON.stringify({ id: 99, result: {} })
      ])
      assert.deepStrictEqual(yield* Queue.take(rpc.incoming), { _tag: "Notification", method: "turn/started", params: { n: 1 } })
      assert.deepStrictEqual(yield* Queue.take(rpc.incoming), { _tag: "ServerRequest", id: 0, method: "item/tool/call", params: { n: 2 } })
      yield* rpc.respond(0, { ok: true })
      assert.deepStrictEqual(yield* Queue.take(ch.written), { id: 0, result: { ok: true } })
      yield* Queue.end(ch.lines)
      assert.deepStrictEqual(yield* Fiber.await(fiber), Exit.fail(new RpcUnknown({ method: "thread/start", reason: "exited" })))
    }))
})
