/**
 * The workspace drivers against the gateway's real DeviceSession over an in-memory socket (scripted Runtime
 * frames, TestClock): exact frames, routing by operation id, validation, capacities, budgets before and after
 * their boundary, and what each stop proves.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Option } from "effect"
import { TestClock } from "effect/testing"
import { createHash } from "node:crypto"
import { ReadRejected } from "../../../src/core/workspace/WorkspaceErrors.js"
import * as WorkspaceExport from "../../../src/core/workspace/WorkspaceExport.js"
import * as WorkspaceRead from "../../../src/core/workspace/WorkspaceRead.js"
import * as WorkspaceWrite from "../../../src/core/workspace/WorkspaceWrite.js"
import { Ids, type Messages, Transfer } from "../../../src/proto/index.js"
import { makeReal, RealLayer } from "../../support/coreFakeSession.js"
import { advance, receive, started } from "../../support/workspaceDriverSteps.js"

const ENV = "5c2f7b7e-1a0b-4e7e-9d55-6b1f0a2c3d4e"
const SESSION = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
const HANDLE = Ids.unsafeMake.admissionHandle("h-31")
const op = (n: number) => Ids.unsafeMake.operationId(`c0ffee00-1234-4abc-9def-${String(n).padStart(12, "0")}`)

const bytesRead = (n: number, extra: Partial<WorkspaceRead.ReadRequest> = {}): WorkspaceRead.ReadRequest => ({
  operationId: op(n),
  target: { handle: HANDLE },
  environmentId: ENV,
  path: "README.md",
  kind: { _tag: "Bytes", maxBytes: 16 },
  ...extra
})

const readResult = (
  id: string,
  payload: Messages.MessageOfType<"workspace_read_result">["payload"]
): Messages.MessageOfType<"workspace_read_result"> => ({ type: "workspace_read_result", id: Ids.unsafeMake.operationId(id), payload })
const writeResult = (
  id: string,
  payload: Messages.MessageOfType<"workspace_write_result">["payload"]
): Messages.MessageOfType<"workspace_write_result"> => ({ type: "workspace_write_result", id: Ids.unsafeMake.operationId(id), payload })
const exportResult = (
  id: string,
  payload: Messages.MessageOfType<"workspace_export_result">["payload"]
): Messages.MessageOfType<"workspace_export_result"> => ({ type: "workspace_export_result", id: Ids.unsafeMake.operationId(id), payload })

const b64 = (s: string | Uint8Array) => Transfer.encodeChunkData(typeof s === "string" ? new TextEncoder().encode(s) : s)
const errorOf = <A, E>(exit: Exit.Exit<A, E> | undefined): unknown =>
  exit === undefined ? "pending" : Exit.isSuccess(exit) ? "success" : Option.getOrUndefined(Exit.findErrorOption(exit))

const real = makeReal()

describe("WorkspaceRead", () => {
  it.effect("registers before sending the exact byte read, and returns the bytes after an acknowledged close", () =>
    Effect.gen(function*() {
      const h = yield* real
      const { fiber, sent } = yield* started(h, WorkspaceRead.read(h.session, bytesRead(1)))
      assert.deepStrictEqual(sent, {
        type: "workspace_read",
        id: op(1),
        payload: { handle: HANDLE, environment_id: ENV, path: "README.md", max_bytes: 16 }
      })
      assert.deepStrictEqual((yield* h.calls).slice(0, 2), [
        { op: "expectReplies", family: "workspace_read_result", key: op(1) },
        { op: "send", type: "workspace_read", id: op(1) }
      ])
      yield* h.emit(readResult(op(1), { outcome: "completed", data: b64("hello"), close_acknowledged: true }))
      const done = yield* Fiber.join(fiber)
      assert.strictEqual(done._tag, "Bytes")
      if (done._tag === "Bytes") {
        assert.strictEqual(new TextDecoder().decode(done.data), "hello")
        assert.isFalse(done.truncated)
      }
    }).pipe(Effect.provide(RealLayer)))

  it.effect("reads one directory level on a Run target and keeps explicit truncation", () =>
    Effect.gen(function*() {
      const h = yield* real
      const request = bytesRead(2, { target: { run_id: Ids.unsafeMake.runId("run-7") }, path: "", kind: { _tag: "Directory", maxEntries: 2 } })
      const { fiber, sent } = yield* started(h, WorkspaceRead.read(h.session, request))
      assert.deepStrictEqual(sent.payload, { run_id: Ids.unsafeMake.runId("run-7"), environment_id: ENV, path: "", max_bytes: 0, operation: "directory", max_entries: 2 })
      const entries = [{ name: "main.ts", kind: "file" as const, size_bytes: 12 }, { name: "lib", kind: "directory" as const, size_bytes: null }]
      yield* h.emit(readResult(op(2), { outcome: "completed", close_acknowledged: true, directory: { entries, truncated: true } }))
      assert.deepStrictEqual(yield* Fiber.join(fiber), { _tag: "Directory", entries, truncated: true })
    }).pipe(Effect.provide(RealLayer)))

  it.effect("a reply for another operation id never reaches the waiter", () =>
    Effect.gen(function*() {
      const h = yield* real
      const { fiber } = yield* started(h, WorkspaceRead.read(h.session, bytesRead(3)))
      yield* h.emit(readResult(op(99), { outcome: "completed", data: b64("other"), close_acknowledged: true }))
      assert.isUndefined(fiber.pollUnsafe())
      yield* h.emit(readResult(op(3), { outcome: "rejected", error_code: "not_found" }))
      assert.deepStrictEqual(errorOf(yield* Fiber.await(fiber)), new ReadRejected({ code: "not_found" }))
    }).pipe(Effect.provide(RealLayer)))

  it.effect("maps unknown to ReadUnknown(runtime_unconfirmed) and an invalid result to ReadUnknown(invalid_receipt)", () =>
    Effect.gen(function*() {
      const h = yield* real
      const a = yield* started(h, WorkspaceRead.read(h.session, bytesRead(4)))
      yield* h.emit(readResult(op(4), { outcome: "unknown", error_code: "read_unconfirmed" }))
      assert.strictEqual((errorOf(yield* Fiber.await(a.fiber)) as { reason: string }).reason, "runtime_unconfirmed")
      // completed without close_acknowledged: not a valid result
      const b = yield* started(h, WorkspaceRead.read(h.session, bytesRead(5)))
      yield* h.emit(readResult(op(5), { outcome: "completed", data: b64("x") }))
      assert.strictEqual((errorOf(yield* Fiber.await(b.fiber)) as { reason: string }).reason, "invalid_receipt")
      // more bytes than max_bytes
      const c = yield* started(h, WorkspaceRead.read(h.session, bytesRead(6, { kind: { _tag: "Bytes", maxBytes: 2 } })))
      yield* h.emit(readResult(op(6), { outcome: "completed", data: b64("xyz"), close_acknowledged: true }))
      assert.strictEqual((errorOf(yield* Fiber.await(c.fiber)) as { reason: string }).reason, "invalid_receipt")
    }).pipe(Effect.provide(RealLayer)))

  it.effect("waits 17 s: a result 1 ms before the deadline completes, none at the deadline is unknown", () =>
    Effect.gen(function*() {
      const h = yield* real
      const a = yield* started(h, WorkspaceRead.read(h.session, bytesRead(7)))
      yield* TestClock.adjust("16999 millis")
      assert.isUndefined(a.fiber.pollUnsafe())
      yield* h.emit(readResult(op(7), { outcome: "completed", data: b64("ok"), close_acknowledged: true }))
      assert.strictEqual((yield* Fiber.join(a.fiber))._tag, "Bytes")
      const b = yield* started(h, WorkspaceRead.read(h.session, bytesRead(8)))
      yield* advance(h, 16_999)
      assert.isUndefined(b.fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      const error = errorOf(yield* Fiber.await(b.fiber)) as { _tag: string; reason: string }
      assert.deepStrictEqual([error._tag, error.reason], ["ReadUnknown", "budget_exceeded"])
    }).pipe(Effect.provide(RealLayer)))

  it.effect("allows 4 reads per connection: the fifth is refused before sending, a freed slot admits again", () =>
    Effect.gen(function*() {
      const h = yield* real
      const fibers = []
      for (let i = 10; i < 14; i++) fibers.push((yield* started(h, WorkspaceRead.read(h.session, bytesRead(i)))).fiber)
      const fifth = errorOf(yield* Effect.exit(WorkspaceRead.read(h.session, bytesRead(14)))) as { _tag: string; family: string; reason: string }
      assert.deepStrictEqual([fifth._tag, fifth.family, fifth.reason], ["WorkspaceRefused", "read", "capacity"])
      assert.isTrue(Option.isNone(yield* h.poll))
      yield* h.emit(readResult(op(10), { outcome: "rejected", error_code: "not_found" }))
      yield* Fiber.await(fibers[0]!)
      const again = yield* started(h, WorkspaceRead.read(h.session, bytesRead(15)))
      assert.strictEqual((again.sent as { id?: string }).id, op(15))
    }).pipe(Effect.provide(RealLayer)))

  it.effect("refuses an invalid request and a duplicate pending id before sending", () =>
    Effect.gen(function*() {
      const h = yield* real
      for (const bad of [bytesRead(20, { path: "../etc" }), bytesRead(21, { kind: { _tag: "Bytes", maxBytes: 0 } }), bytesRead(22, { path: "" })]) {
        const e = errorOf(yield* Effect.exit(WorkspaceRead.read(h.session, bad))) as { _tag: string; reason: string }
        assert.deepStrictEqual([e._tag, e.reason], ["WorkspaceRefused", "invalid_request"])
      }
      yield* started(h, WorkspaceRead.read(h.session, bytesRead(23)))
      const dup = errorOf(yield* Effect.exit(WorkspaceRead.read(h.session, bytesRead(23)))) as { _tag: string; reason: string }
      assert.deepStrictEqual([dup._tag, dup.reason], ["WorkspaceRefused", "waiter_rejected"])
      assert.isTrue(Option.isNone(yield* h.poll))
    }).pipe(Effect.provide(RealLayer)))

  it.effect("a lost connection leaves the read unknown and nothing is resent", () =>
    Effect.gen(function*() {
      const h = yield* real
      const a = yield* started(h, WorkspaceRead.read(h.session, bytesRead(30)))
      yield* h.disconnect
      const e = errorOf(yield* Fiber.await(a.fiber)) as { _tag: string; reason: string }
      assert.deepStrictEqual([e._tag, e.reason], ["ReadUnknown", "connection_lost"])
      assert.deepStrictEqual((yield* h.calls).filter((c) => c.op === "send").length, 1)
    }).pipe(Effect.provide(RealLayer)))
})


// ---------------------------------------------------------------------------------------------- write

const body = (n: number) => {
  const out = new Uint8Array(n)
  for (let i = 0; i < n; i++) out[i] = (i * 31 + 7) & 0xff
  return out
}
const writeRequest = (n: number, data: Uint8Array): WorkspaceWrite.WriteRequest => ({
  operationId: op(n),
  environmentId: ENV,
  sessionId: SESSION,
  path: "notes/hello.txt",
  body: data
})

describe("WorkspaceWrite", () => {
  it.effect("sends begin, acknowledged 64 KiB chunks at exact offsets and commit; completed proves the install", () =>
    Effect.gen(function*() {
      const h = yield* real
      const data = body(150 * 1024)
      const sha = createHash("sha256").update(data).digest("hex")
      let committedHook = false
      const { fiber, sent } = yield* started(h, WorkspaceWrite.write(h.session, writeRequest(40, data), {
        beforeCommit: Effect.sync(() => void (committedHook = true))
      }))
      assert.deepStrictEqual(sent, {
        type: "workspace_write",
        id: op(40),
        payload: { step: "begin", environment_id: ENV, session_id: SESSION, path: "notes/hello.txt", size_bytes: data.length, sha256: sha }
      })
      yield* h.emit(writeResult(op(40), { outcome: "ready" }))
      const received: Array<Uint8Array> = []
      for (const [offset, length] of [[0, 65536], [65536, 65536], [131072, 22528]] as const) {
        const chunk = yield* receive(h)
        assert.strictEqual(chunk.type, "workspace_write")
        const p = chunk.payload as { step: string; offset: number; data: string }
        assert.deepStrictEqual([p.step, p.offset], ["chunk", offset])
        const decoded = Transfer.decodeChunkData(p.data)
        assert.isTrue(decoded._tag === "Success" && decoded.success.length === length)
        if (decoded._tag === "Success") received.push(decoded.success)
        assert.isFalse(committedHook)
        yield* h.emit(writeResult(op(40), { outcome: "received", offset: offset + length }))
      }
      const commit = yield* receive(h)
      assert.deepStrictEqual(commit, { type: "workspace_write", id: op(40), payload: { step: "commit" } })
      assert.isTrue(committedHook)
      assert.deepStrictEqual(Buffer.concat(received), Buffer.from(data))
      yield* h.emit(writeResult(op(40), { outcome: "completed", size_bytes: data.length }))
      assert.deepStrictEqual(yield* Fiber.join(fiber), { size_bytes: data.length, sha256: sha })
    }).pipe(Effect.provide(RealLayer)))

  it.effect("an empty body commits right after ready", () =>
    Effect.gen(function*() {
      const h = yield* real
      const { fiber } = yield* started(h, WorkspaceWrite.write(h.session, writeRequest(41, new Uint8Array(0))))
      yield* h.emit(writeResult(op(41), { outcome: "ready" }))
      assert.deepStrictEqual((yield* receive(h)).payload, { step: "commit" })
      yield* h.emit(writeResult(op(41), { outcome: "completed", size_bytes: 0 }))
      assert.strictEqual((yield* Fiber.join(fiber)).size_bytes, 0)
    }).pipe(Effect.provide(RealLayer)))

  it.effect("an exact rejection is definite and keeps its reason", () =>
    Effect.gen(function*() {
      const h = yield* real
      const { fiber } = yield* started(h, WorkspaceWrite.write(h.session, writeRequest(42, body(3))))
      yield* h.emit(writeResult(op(42), { outcome: "rejected", error_code: "write_rejected", reason: "destination_directory" }))
      const e = errorOf(yield* Fiber.await(fiber)) as { _tag: string; code: string; stage: string; reason: string }
      assert.deepStrictEqual([e._tag, e.code, e.stage, e.reason], ["WriteRejected", "write_rejected", "begin", "destination_directory"])
    }).pipe(Effect.provide(RealLayer)))

  it.effect("a wrong receipt before commit stops with WriteFailed and never sends commit", () =>
    Effect.gen(function*() {
      const h = yield* real
      const { fiber } = yield* started(h, WorkspaceWrite.write(h.session, writeRequest(43, body(10))))
      yield* h.emit(writeResult(op(43), { outcome: "ready" }))
      yield* receive(h) // the chunk
      yield* h.emit(writeResult(op(43), { outcome: "received", offset: 9 }))
      const e = errorOf(yield* Fiber.await(fiber)) as { _tag: string; stage: string; reason: string }
      assert.deepStrictEqual([e._tag, e.stage, e.reason], ["WriteFailed", "chunk", "invalid_receipt"])
      assert.isTrue(Option.isNone(yield* h.poll))
    }).pipe(Effect.provide(RealLayer)))

  it.effect("195 s overall: pending 1 ms before; at the deadline before commit it failed, after commit it is unknown", () =>
    Effect.gen(function*() {
      const h = yield* real
      const a = yield* started(h, WorkspaceWrite.write(h.session, writeRequest(44, body(1))))
      yield* advance(h, 194_999)
      assert.isUndefined(a.fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      const e1 = errorOf(yield* Fiber.await(a.fiber)) as { _tag: string; stage: string; reason: string }
      assert.deepStrictEqual([e1._tag, e1.stage, e1.reason], ["WriteFailed", "begin", "budget_exceeded"])

      const b = yield* started(h, WorkspaceWrite.write(h.session, writeRequest(45, body(1))))
      yield* h.emit(writeResult(op(45), { outcome: "ready" }))
      yield* receive(h)
      yield* h.emit(writeResult(op(45), { outcome: "received", offset: 1 }))
      yield* receive(h) // commit
      yield* advance(h, 194_999)
      assert.isUndefined(b.fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      const e2 = errorOf(yield* Fiber.await(b.fiber)) as { _tag: string; reason: string }
      assert.deepStrictEqual([e2._tag, e2.reason], ["WriteUnknown", "budget_exceeded"])
    }).pipe(Effect.provide(RealLayer)))

  it.effect("one write per connection; a lost connection after commit is unknown (never replayed)", () =>
    Effect.gen(function*() {
      const h = yield* real
      const a = yield* started(h, WorkspaceWrite.write(h.session, writeRequest(46, body(1))))
      const second = errorOf(yield* Effect.exit(WorkspaceWrite.write(h.session, writeRequest(47, body(1))))) as { _tag: string; reason: string }
      assert.deepStrictEqual([second._tag, second.reason], ["WorkspaceRefused", "capacity"])
      yield* h.emit(writeResult(op(46), { outcome: "ready" }))
      yield* receive(h)
      yield* h.emit(writeResult(op(46), { outcome: "received", offset: 1 }))
      yield* receive(h) // commit
      yield* h.disconnect
      const e = errorOf(yield* Fiber.await(a.fiber)) as { _tag: string; reason: string }
      assert.deepStrictEqual([e._tag, e.reason], ["WriteUnknown", "connection_lost"])
      assert.strictEqual((yield* h.calls).filter((c) => c.op === "send").length, 3)
    }).pipe(Effect.provide(RealLayer)))

  it.effect("refuses an invalid destination or a non-UUID Session before sending", () =>
    Effect.gen(function*() {
      const h = yield* real
      for (const bad of [{ ...writeRequest(48, body(1)), path: "/abs" }, { ...writeRequest(49, body(1)), sessionId: "session-1" }]) {
        const e = errorOf(yield* Effect.exit(WorkspaceWrite.write(h.session, bad))) as { _tag: string; reason: string }
        assert.deepStrictEqual([e._tag, e.reason], ["WorkspaceRefused", "invalid_request"])
      }
      assert.isTrue(Option.isNone(yield* h.poll))
    }).pipe(Effect.provide(RealLayer)))
})

// ---------------------------------------------------------------------------------------------- export

const exportRequest = (n: number): WorkspaceExport.ExportRequest => ({ operationId: op(n), handle: HANDLE, environmentId: ENV })

describe("WorkspaceExport", () => {
  it.effect("pulls each next chunk at the exact offset after the consumer took the previous one; completed ends it", () =>
    Effect.gen(function*() {
      const h = yield* real
      const got: Array<string> = []
      const { fiber, sent } = yield* started(h, WorkspaceExport.exportTo(h.session, exportRequest(60), (bytes) =>
        Effect.sync(() => void got.push(new TextDecoder().decode(bytes)))))
      assert.deepStrictEqual(sent, { type: "workspace_export", id: op(60), payload: { step: "begin", handle: HANDLE, environment_id: ENV } })
      yield* h.emit(exportResult(op(60), { outcome: "chunk", offset: 0, data: b64("abc") }))
      assert.deepStrictEqual((yield* receive(h)).payload, { step: "next", offset: 3 })
      yield* h.emit(exportResult(op(60), { outcome: "chunk", offset: 3, data: b64("de") }))
      assert.deepStrictEqual((yield* receive(h)).payload, { step: "next", offset: 5 })
      yield* h.emit(exportResult(op(60), { outcome: "completed", offset: 5 }))
      assert.deepStrictEqual(yield* Fiber.join(fiber), { size_bytes: 5 })
      assert.deepStrictEqual(got, ["abc", "de"])
      assert.isTrue(Option.isNone(yield* h.poll)) // no cancel after completed
    }).pipe(Effect.provide(RealLayer)))

  it.effect("an offset that is not Core's count stops the export as unknown and sends cancel", () =>
    Effect.gen(function*() {
      const h = yield* real
      const { fiber } = yield* started(h, WorkspaceExport.exportTo(h.session, exportRequest(61), () => Effect.void))
      yield* h.emit(exportResult(op(61), { outcome: "chunk", offset: 0, data: b64("abc") }))
      yield* receive(h)
      yield* h.emit(exportResult(op(61), { outcome: "chunk", offset: 2, data: b64("zz") }))
      const e = errorOf(yield* Fiber.await(fiber)) as { _tag: string; reason: string; offset: number }
      assert.deepStrictEqual([e._tag, e.reason, e.offset], ["ExportUnknown", "invalid_receipt", 3])
      assert.deepStrictEqual((yield* receive(h)).payload, { step: "cancel" })
    }).pipe(Effect.provide(RealLayer)))

  it.effect("a rejection and a failure are definite; a failing consumer cancels", () =>
    Effect.gen(function*() {
      const h = yield* real
      const a = yield* started(h, WorkspaceExport.exportTo(h.session, exportRequest(62), () => Effect.void))
      yield* h.emit(exportResult(op(62), { outcome: "rejected", offset: 0, error_code: "resource_unavailable" }))
      assert.strictEqual((errorOf(yield* Fiber.await(a.fiber)) as { _tag: string })._tag, "ExportRejected")
      const b = yield* started(h, WorkspaceExport.exportTo(h.session, exportRequest(63), () => Effect.void))
      yield* h.emit(exportResult(op(63), { outcome: "failed", offset: 0, error_code: "export_failed" }))
      assert.strictEqual((errorOf(yield* Fiber.await(b.fiber)) as { _tag: string })._tag, "ExportFailed")
      assert.isTrue(Option.isNone(yield* h.poll))
      const c = yield* started(h, WorkspaceExport.exportTo(h.session, exportRequest(64), () => Effect.fail("disk full" as const)))
      yield* h.emit(exportResult(op(64), { outcome: "chunk", offset: 0, data: b64("a") }))
      assert.strictEqual(errorOf(yield* Fiber.await(c.fiber)), "disk full")
      assert.deepStrictEqual((yield* receive(h)).payload, { step: "cancel" })
    }).pipe(Effect.provide(RealLayer)))

  it.effect("180 s for the whole export: pending 1 ms before, unknown at the deadline; one export per connection", () =>
    Effect.gen(function*() {
      const h = yield* real
      const a = yield* started(h, WorkspaceExport.exportTo(h.session, exportRequest(65), () => Effect.void))
      const second = errorOf(yield* Effect.exit(WorkspaceExport.exportTo(h.session, exportRequest(66), () => Effect.void))) as { reason: string }
      assert.strictEqual(second.reason, "capacity")
      yield* advance(h, 179_999)
      assert.isUndefined(a.fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      const e = errorOf(yield* Fiber.await(a.fiber)) as { _tag: string; reason: string }
      assert.deepStrictEqual([e._tag, e.reason], ["ExportUnknown", "budget_exceeded"])
      assert.deepStrictEqual((yield* receive(h)).payload, { step: "cancel" })
    }).pipe(Effect.provide(RealLayer)))
})
