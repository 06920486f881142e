/**
 * Core's runtime_prepare driver against the gateway's real DeviceSession over an in-memory socket (scripted Runtime
 * frames, TestClock): the exact frames, a receipt awaited before every next frame, each receipt checked with the
 * proto validator (an invalid one is unknown at any step), one transfer per connection, 195 s before and at the
 * boundary, and nothing resent after a lost connection.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Option } from "effect"
import { TestClock } from "effect/testing"
import { createHash } from "node:crypto"
import * as RuntimePrepare from "../../../src/core/prepare/RuntimePrepare.js"
import { Ids, type Messages, Transfer } from "../../../src/proto/index.js"
import { makeReal, RealLayer } from "../../support/coreFakeSession.js"
import { advance, receive, started } from "../../support/workspaceDriverSteps.js"

const ENV = "5c2f7b7e-1a0b-4e7e-9d55-6b1f0a2c3d4e"
const SESSION = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
const tid = (n: number) => Ids.unsafeMake.transferId(`0b7e2a52-4c1d-4c36-9a53-${String(n).padStart(12, "0")}`)

const result = (id: string, payload: Messages.MessageOfType<"runtime_prepare_result">["payload"]): Messages.MessageOfType<"runtime_prepare_result"> =>
  ({ type: "runtime_prepare_result", id: Ids.unsafeMake.transferId(id), payload })

const body = (n: number) => Uint8Array.from({ length: n }, (_, i) => i % 251)
const fileRequest = (n: number, data: Uint8Array, path = "/workspace/notes/hello.txt"): RuntimePrepare.PrepareRequest => ({
  transferId: tid(n),
  environmentId: ENV,
  sessionId: SESSION,
  step: { action: "file", path, body: data }
})
const setupRequest = (n: number): RuntimePrepare.PrepareRequest => ({
  transferId: tid(n),
  environmentId: ENV,
  sessionId: SESSION,
  step: { action: "initialize", initialization: { action: "setup", network: "disabled", cwd: "/workspace", command: "make" } }
})

const errorOf = <A, E>(exit: Exit.Exit<A, E> | undefined): unknown =>
  exit === undefined ? "pending" : Exit.isSuccess(exit) ? "success" : Option.getOrUndefined(Exit.findErrorOption(exit))
const fields = (e: unknown, keys: ReadonlyArray<string>) => keys.map((k) => (e as Record<string, unknown>)[k])

const real = makeReal()

describe("RuntimePrepare", () => {
  it.effect("sends begin, waits for each receipt before the next 64 KiB chunk, then commit; reports progress", () =>
    Effect.gen(function*() {
      const h = yield* real
      const data = body(100 * 1024)
      const progress: Array<number> = []
      const { fiber, sent } = yield* started(h, RuntimePrepare.prepare(h.session, fileRequest(1, data), {
        onProgress: (bytes) => Effect.sync(() => void progress.push(bytes))
      }))
      assert.deepStrictEqual(sent, {
        type: "runtime_prepare",
        id: tid(1),
        payload: {
          step: "begin", environment_id: ENV, session_id: SESSION, action: "file", file: { path: "/workspace/notes/hello.txt" },
          size_bytes: data.length, sha256: createHash("sha256").update(data).digest("hex")
        }
      })
      // Nothing more before ready.
      assert.isTrue(Option.isNone(yield* h.poll))
      yield* h.emit(result(tid(1), { outcome: "ready" }))
      for (const [offset, length] of [[0, 65536], [65536, 36864]] as const) {
        const chunk = yield* receive(h)
        const p = chunk.payload as { step: string; offset?: number; data: string }
        assert.deepStrictEqual([p.step, p.offset ?? 0], ["chunk", offset])
        const decoded = Transfer.decodeChunkData(p.data)
        assert.isTrue(decoded._tag === "Success" && decoded.success.length === length)
        assert.isTrue(Option.isNone(yield* h.poll))
        yield* h.emit(result(tid(1), { outcome: "received", offset: offset + length }))
      }
      assert.deepStrictEqual((yield* receive(h)).payload, { step: "commit" })
      yield* h.emit(result(tid(1), { outcome: "completed", size_bytes: data.length }))
      assert.deepStrictEqual(yield* Fiber.join(fiber), { size_bytes: data.length })
      assert.deepStrictEqual(progress, [65536, data.length])
    }).pipe(Effect.provide(RealLayer)))

  it.effect("an initialization commits right after ready; failed keeps its exit code; rejected is definite", () =>
    Effect.gen(function*() {
      const h = yield* real
      const a = yield* started(h, RuntimePrepare.prepare(h.session, setupRequest(2)))
      assert.strictEqual((a.sent.payload as { action: string }).action, "initialize")
      yield* h.emit(result(tid(2), { outcome: "ready" }))
      assert.deepStrictEqual((yield* receive(h)).payload, { step: "commit" })
      yield* h.emit(result(tid(2), { outcome: "failed", error_code: "runtime_preparation_failed", exit_code: 2 }))
      assert.deepStrictEqual(fields(errorOf(yield* Fiber.await(a.fiber)), ["_tag", "stage", "reason", "exit_code"]), ["PrepareFailed", "commit", "runtime_failed", 2])

      const b = yield* started(h, RuntimePrepare.prepare(h.session, setupRequest(3)))
      yield* h.emit(result(tid(3), { outcome: "rejected", error_code: "runtime_preparation_capacity" }))
      assert.deepStrictEqual(fields(errorOf(yield* Fiber.await(b.fiber)), ["_tag", "code", "stage"]), ["PrepareRejected", "runtime_preparation_capacity", "begin"])

      const c = yield* started(h, RuntimePrepare.prepare(h.session, setupRequest(4)))
      yield* h.emit(result(tid(4), { outcome: "ready" }))
      yield* receive(h)
      yield* h.emit(result(tid(4), { outcome: "unknown", error_code: "runtime_preparation_unconfirmed" }))
      assert.deepStrictEqual(fields(errorOf(yield* Fiber.await(c.fiber)), ["_tag", "reason"]), ["PrepareUnknown", "runtime_unconfirmed"])
    }).pipe(Effect.provide(RealLayer)))

  it.effect("an invalid receipt is unknown at any step, and nothing more is sent", () =>
    Effect.gen(function*() {
      const h = yield* real
      const cases: ReadonlyArray<[number, Messages.MessageOfType<"runtime_prepare_result">["payload"]]> = [
        [5, { outcome: "received", offset: 1 }], // received answering begin
        [6, { outcome: "rejected", error_code: "runtime_preparation_failed" }], // a failed code on rejected
        [7, { outcome: "ready", exit_code: 1 }] // exit code outside failed
      ]
      for (const [n, payload] of cases) {
        const { fiber } = yield* started(h, RuntimePrepare.prepare(h.session, fileRequest(n, body(3))))
        yield* h.emit(result(tid(n), payload))
        assert.deepStrictEqual(fields(errorOf(yield* Fiber.await(fiber)), ["_tag", "stage", "reason"]), ["PrepareUnknown", "begin", "invalid_receipt"])
        assert.isTrue(Option.isNone(yield* h.poll))
      }
      const { fiber } = yield* started(h, RuntimePrepare.prepare(h.session, fileRequest(8, body(3))))
      yield* h.emit(result(tid(8), { outcome: "ready" }))
      yield* receive(h)
      yield* h.emit(result(tid(8), { outcome: "received", offset: 2 }))
      assert.deepStrictEqual(fields(errorOf(yield* Fiber.await(fiber)), ["_tag", "stage", "reason"]), ["PrepareUnknown", "chunk", "invalid_receipt"])
      assert.isTrue(Option.isNone(yield* h.poll))
    }).pipe(Effect.provide(RealLayer)))

  it.effect("195 s overall: pending 1 ms before; at the deadline before commit it failed, after commit unknown", () =>
    Effect.gen(function*() {
      const h = yield* real
      const a = yield* started(h, RuntimePrepare.prepare(h.session, fileRequest(9, body(1))))
      yield* advance(h, 194_999)
      assert.isUndefined(a.fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(fields(errorOf(yield* Fiber.await(a.fiber)), ["_tag", "stage", "reason"]), ["PrepareFailed", "begin", "budget_exceeded"])

      const b = yield* started(h, RuntimePrepare.prepare(h.session, setupRequest(10)))
      yield* h.emit(result(tid(10), { outcome: "ready" }))
      yield* receive(h) // commit
      yield* advance(h, 194_999)
      assert.isUndefined(b.fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(fields(errorOf(yield* Fiber.await(b.fiber)), ["_tag", "stage", "reason"]), ["PrepareUnknown", "commit", "budget_exceeded"])
    }).pipe(Effect.provide(RealLayer)))

  it.effect("one transfer per connection; a lost connection after commit is unknown and nothing is resent", () =>
    Effect.gen(function*() {
      const h = yield* real
      const a = yield* started(h, RuntimePrepare.prepare(h.session, fileRequest(11, body(1))))
      const second = errorOf(yield* Effect.exit(RuntimePrepare.prepare(h.session, fileRequest(12, body(1)))))
      assert.deepStrictEqual(fields(second, ["_tag", "reason"]), ["PrepareRefused", "capacity"])
      yield* h.emit(result(tid(11), { outcome: "ready" }))
      yield* receive(h)
      yield* h.emit(result(tid(11), { outcome: "received", offset: 1 }))
      yield* receive(h) // commit
      yield* h.disconnect
      assert.deepStrictEqual(fields(errorOf(yield* Fiber.await(a.fiber)), ["_tag", "reason"]), ["PrepareUnknown", "connection_lost"])
      assert.strictEqual((yield* h.calls).filter((c) => c.op === "send").length, 3)
    }).pipe(Effect.provide(RealLayer)))

  it.effect("refuses an invalid header before sending", () =>
    Effect.gen(function*() {
      const h = yield* real
      for (const bad of [fileRequest(13, body(1), "/etc/passwd"), { ...fileRequest(14, body(1)), sessionId: "session-1" }]) {
        assert.deepStrictEqual(fields(errorOf(yield* Effect.exit(RuntimePrepare.prepare(h.session, bad))), ["_tag", "reason"]), ["PrepareRefused", "invalid_request"])
      }
      assert.isTrue(Option.isNone(yield* h.poll))
    }).pipe(Effect.provide(RealLayer)))
})
