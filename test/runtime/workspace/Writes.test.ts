/**
 * `workspace_write`, Runtime side (issue #13), over a real temporary workspace: begin/ready, acknowledged chunks
 * at exact offsets, commit with SHA-256 verification, atomic install (the old file intact on every refusal, no
 * staging file left), `write_rejected` reasons, capacity 1, admission exclusions, execution excluded while a
 * write is in progress, the begin's traceparent on every reply (never a malformed one), and the 120 s budget
 * (TestClock, just before and at the boundary). Faults injected through
 * `WorkspaceFs`: a failed staging removal keeps the write's slot and ownership; a failure before the rename is
 * `write_rejected` with the old file intact; a failed directory fsync after the rename is `write_unconfirmed`.
 */
import * as Fs from "node:fs"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, type Duration, Effect } from "effect"
import type { Messages } from "../../../src/proto/index.js"
import { StatusBoard } from "../../../src/runtime/StatusBoard.js"
import type { NativeStaging, WorkspaceFsShape } from "../../../src/runtime/workspace/WorkspaceFs.js"
import { adjust, connect, next, prepareFrame, processLayer, promptFrame, same, script, settle, silent, text, until } from "../../support/runtimeTestWire.js"
import { boundTo, type Core, workspaceAndOutside, writeResult } from "../../support/workspaceDaemon.js"
import { tempWorkspace, type TempWorkspace } from "../../support/workspaceDir.js"
import { writeBegin, writeChunk, writeCommit } from "../../support/workspaceFrames.js"

const result = writeResult

/** No staging file anywhere in the workspace. */
const noStaging = (ws: TempWorkspace) =>
  assert.deepStrictEqual((Fs.readdirSync(ws.root, { recursive: true }) as Array<string>).filter((n) => n.includes(".agentwire-write-")), [])

/** A `WorkspaceFs` whose staging files are replaced by `f` of the real one (fault injection). */
const staged = (f: (s: NativeStaging) => NativeStaging) => (fs: WorkspaceFsShape): WorkspaceFsShape => ({
  ...fs,
  openStaging: (path, tempName) => Effect.map(fs.openStaging(path, tempName), f)
})

/**
 * Waits until the board's unconfirmed cleanups satisfy `done`: each round moves the TestClock by `step` (the
 * cleanup retries' backoff) and gives real filesystem calls (a retried removal) a turn of the event loop (`setImmediate`: no timer).
 */
const boardUntil = (board: StatusBoard["Service"], done: (u: ReadonlyArray<unknown>) => boolean, step: Duration.Input) =>
  Effect.gen(function* () {
    for (let i = 0; i < 5000 && !done((yield* board.snapshot).unconfirmed); i++) {
      yield* adjust(step)
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    }
  })

/** Runs a full transfer of `body` in 64 KiB chunks and returns the commit's reply. */
const transfer = (core: Core, ws: TempWorkspace, id: string, path: string, body: Buffer) =>
  Effect.gen(function* () {
    yield* core.toRuntime(writeBegin(id, ws.local.id, path, body))
    same(yield* result(core), [id, { outcome: "ready" }])
    for (let offset = 0; offset < body.length; offset += 65536) {
      const part = body.subarray(offset, offset + 65536)
      yield* core.toRuntime(writeChunk(id, offset, part))
      same(yield* result(core), [id, { outcome: "received", offset: offset + part.length }])
    }
    yield* core.toRuntime(writeCommit(id))
    return (yield* result(core))[1]
  })

describe("workspace_write", () => {
  it.effect("installs a body in acknowledged chunks, atomically replacing the old file and keeping its mode", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      Fs.mkdirSync(ws.at("notes"))
      Fs.writeFileSync(ws.at("notes/old.txt"), "old content", { mode: 0o640 })
      Fs.chmodSync(ws.at("notes/old.txt"), 0o640)
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        const body = Buffer.from(Array.from({ length: 200_000 }, (_, i) => i % 251))
        same(yield* transfer(core, ws, "w-1", "deep/new/file.bin", body), { outcome: "completed", size_bytes: 200_000 })
        assert.isTrue(Buffer.compare(Fs.readFileSync(ws.at("deep/new/file.bin")), body) === 0)
        same(yield* transfer(core, ws, "w-2", "notes/old.txt", Buffer.from("new content")), { outcome: "completed", size_bytes: 11 })
        same(Fs.readFileSync(ws.at("notes/old.txt"), "utf8"), "new content")
        same(Fs.statSync(ws.at("notes/old.txt")).mode & 0o777, 0o640)
        same(yield* transfer(core, ws, "w-3", "empty.txt", Buffer.alloc(0)), { outcome: "completed", size_bytes: 0 })
        same(Fs.readFileSync(ws.at("empty.txt")).length, 0)
        noStaging(ws)
        assert.isTrue(yield* silent(core))
      }).pipe(boundTo(ws))
    }))

  it.effect("every reply of a write carries its begin's valid traceparent; a malformed one is never echoed", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        const trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        const body = Buffer.from(Array.from({ length: 70_000 }, (_, i) => i % 251))
        const traced = (m: Messages.CoreToRuntime, t: string | undefined) => (t === undefined ? m : { ...m, trace: t })
        const replies = (id: string, beginTrace: string) =>
          Effect.gen(function* () {
            const traces: Array<[string, string | undefined]> = []
            const take = Effect.map(next(core, "workspace_write_result"), (f) => traces.push([f.payload.outcome, f.trace]))
            yield* core.toRuntime(traced(writeBegin(id, ws.local.id, "traced.bin", body), beginTrace))
            yield* take
            // Chunks and the commit carry no trace of their own: their receipts take the begin's.
            yield* core.toRuntime(writeChunk(id, 0, body.subarray(0, 65536)))
            yield* take
            yield* core.toRuntime(writeChunk(id, 65536, body.subarray(65536)))
            yield* take
            yield* core.toRuntime(writeCommit(id))
            yield* take
            return traces
          })
        same(yield* replies("t-1", trace), [["ready", trace], ["received", trace], ["received", trace], ["completed", trace]])
        const bad = trace.toUpperCase()
        same(yield* replies("t-2", bad), [["ready", undefined], ["received", undefined], ["received", undefined], ["completed", undefined]])
        assert.isTrue(yield* silent(core))
      }).pipe(boundTo(ws))
    }))

  it.effect("a digest mismatch, short body, wrong offset or oversize chunk is invalid_request; the old file stays intact", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      Fs.writeFileSync(ws.at("keep.txt"), "keep me")
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        const invalid = { outcome: "rejected", error_code: "invalid_request" }
        // Digest mismatch at commit.
        yield* core.toRuntime(writeBegin("d-1", ws.local.id, "keep.txt", "abcd", { sha256: "0".repeat(64) }))
        same(yield* result(core), ["d-1", { outcome: "ready" }])
        yield* core.toRuntime(writeChunk("d-1", 0, "abcd"))
        same(yield* result(core), ["d-1", { outcome: "received", offset: 4 }])
        yield* core.toRuntime(writeCommit("d-1"))
        same(yield* result(core), ["d-1", invalid])
        // Short body.
        yield* core.toRuntime(writeBegin("d-2", ws.local.id, "keep.txt", "abcd"))
        same(yield* result(core), ["d-2", { outcome: "ready" }])
        yield* core.toRuntime(writeChunk("d-2", 0, "ab"))
        same(yield* result(core), ["d-2", { outcome: "received", offset: 2 }])
        yield* core.toRuntime(writeCommit("d-2"))
        same(yield* result(core), ["d-2", invalid])
        // Wrong offset ends the write; a later frame for it is invalid_request too.
        yield* core.toRuntime(writeBegin("d-3", ws.local.id, "keep.txt", "abcd"))
        same(yield* result(core), ["d-3", { outcome: "ready" }])
        yield* core.toRuntime(writeChunk("d-3", 2, "ab"))
        same(yield* result(core), ["d-3", invalid])
        yield* core.toRuntime(writeChunk("d-3", 0, "ab"))
        same(yield* result(core), ["d-3", invalid])
        // More than declared.
        yield* core.toRuntime(writeBegin("d-4", ws.local.id, "keep.txt", "ab"))
        same(yield* result(core), ["d-4", { outcome: "ready" }])
        yield* core.toRuntime(writeChunk("d-4", 0, "abc"))
        same(yield* result(core), ["d-4", invalid])
        same(Fs.readFileSync(ws.at("keep.txt"), "utf8"), "keep me")
        yield* adjust(0)
        noStaging(ws)
      }).pipe(boundTo(ws))
    }))

  it.effect("write_rejected with destination_directory or unsafe_destination; nothing is created outside the root", () =>
    Effect.gen(function* () {
      const { ws, out } = yield* workspaceAndOutside
      Fs.mkdirSync(ws.at("dir"))
      Fs.writeFileSync(ws.at("file"), "x")
      Fs.symlinkSync(ws.at("file"), ws.at("link"))
      Fs.symlinkSync(out.root, ws.at("out"))
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        const cases: Array<[string, string]> = [
          ["dir", "destination_directory"],
          ["file/below", "destination_directory"],
          ["link", "unsafe_destination"],
          ["out/escaped.txt", "unsafe_destination"]
        ]
        for (const [i, [path, reason]] of cases.entries()) {
          yield* core.toRuntime(writeBegin(`r-${i}`, ws.local.id, path, "x"))
          same(yield* result(core), [`r-${i}`, { outcome: "rejected", error_code: "write_rejected", reason }], path)
        }
        same(Fs.readdirSync(out.root), [])
        same(Fs.readlinkSync(ws.at("link")), ws.at("file"))
      }).pipe(boundTo(ws))
    }))

  it.effect("one write at a time; begin refused while anything else is live; execution excluded during a write", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(writeBegin("a-1", "f4b2c1d0-9f8e-4a7b-b6c5-d4e3f2a1b0c9", "x.txt", "x"))
        same(yield* result(core), ["a-1", { outcome: "rejected", error_code: "resource_unavailable" }])
        yield* core.toRuntime(writeBegin("a-2", ws.local.id, "x.txt", "xy"))
        same(yield* result(core), ["a-2", { outcome: "ready" }])
        yield* core.toRuntime(writeBegin("a-2", ws.local.id, "x.txt", "xy"))
        yield* core.toRuntime(writeBegin("a-3", ws.local.id, "y.txt", "y"))
        same(yield* result(core), ["a-3", { outcome: "rejected", error_code: "write_capacity" }])
        // Execution is excluded while the write is received.
        yield* core.toRuntime(prepareFrame("prep-1"))
        same((yield* next(core, "preparation_status")).payload, {
          revision: 0, state: "rejected", operation: "execution_prepare", error_code: "resource_unavailable"
        })
        yield* core.toRuntime(promptFrame("run-1", text("x")))
        same((yield* until(core, "done")).map((f) => f.type), ["error", "done"])
        yield* core.toRuntime(writeChunk("a-2", 0, "xy"))
        same(yield* result(core), ["a-2", { outcome: "received", offset: 2 }])
        yield* core.toRuntime(writeCommit("a-2"))
        same(yield* result(core), ["a-2", { outcome: "completed", size_bytes: 2 }])
        // A live Run refuses a begin.
        yield* core.toRuntime(promptFrame("run-2", script([{ hang: true }])))
        yield* adjust(0)
        yield* core.toRuntime(writeBegin("a-4", ws.local.id, "z.txt", "z"))
        same(yield* result(core), ["a-4", { outcome: "rejected", error_code: "resource_unavailable" }])
      }).pipe(boundTo(ws))
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(writeBegin("u-1", ws.local.id, "x.txt", "x"))
        same(yield* result(core), ["u-1", { outcome: "rejected", error_code: "resource_unavailable" }])
      }).pipe(Effect.provide(processLayer()))
    }))

  it.effect("the 120 s transfer budget: nothing at 119.999 s, invalid_request at 120 s, staging removed, destination untouched", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      Fs.writeFileSync(ws.at("slow.txt"), "before")
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(writeBegin("t-1", ws.local.id, "slow.txt", "abcdef"))
        same(yield* result(core), ["t-1", { outcome: "ready" }])
        yield* core.toRuntime(writeChunk("t-1", 0, "abc"))
        same(yield* result(core), ["t-1", { outcome: "received", offset: 3 }])
        yield* adjust("119999 millis")
        assert.isTrue(yield* silent(core))
        yield* adjust("1 millis")
        same(yield* result(core), ["t-1", { outcome: "rejected", error_code: "invalid_request" }])
        yield* core.toRuntime(writeChunk("t-1", 3, "def"))
        same(yield* result(core), ["t-1", { outcome: "rejected", error_code: "invalid_request" }])
        same(Fs.readFileSync(ws.at("slow.txt"), "utf8"), "before")
        yield* adjust(0)
        noStaging(ws)
        // The write ended: a new one may begin.
        same(yield* transfer(core, ws, "t-2", "slow.txt", Buffer.from("after")), { outcome: "completed", size_bytes: 5 })
      }).pipe(boundTo(ws))
    }))

  it.effect("a failed staging removal: the reply waits 1 s, then the write keeps its slot and ownership until the removal is confirmed", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      Fs.writeFileSync(ws.at("keep.txt"), "keep me")
      let failing = true
      const failingRemoval = staged((s) => ({ ...s, discard: Effect.suspend(() => (failing ? Effect.fail("io" as const) : s.discard)) }))
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        const board = yield* StatusBoard
        yield* core.toRuntime(writeBegin("s-1", ws.local.id, "keep.txt", "abcd", { sha256: "0".repeat(64) }))
        same(yield* result(core), ["s-1", { outcome: "ready" }])
        yield* core.toRuntime(writeChunk("s-1", 0, "abcd"))
        same(yield* result(core), ["s-1", { outcome: "received", offset: 4 }])
        yield* core.toRuntime(writeCommit("s-1"))
        // The commit ended the write: its first removal attempt failed (recorded on the board) and the end now
        // waits up to 1 s for the removal before it replies anyway.
        yield* boardUntil(board, (u) => u.length > 0, 0)
        yield* adjust("999 millis")
        assert.isTrue(yield* silent(core))
        yield* adjust("1 millis")
        same(yield* result(core), ["s-1", { outcome: "rejected", error_code: "invalid_request" }])
        same((yield* board.snapshot).unconfirmed.map((u) => [u.resource, u.kind]), [["write:s-1", "workspace"]])
        // The slot is kept while the removal is unconfirmed (also long after the reply).
        yield* adjust("30 seconds")
        yield* core.toRuntime(writeBegin("s-2", ws.local.id, "other.txt", "x"))
        same(yield* result(core), ["s-2", { outcome: "rejected", error_code: "write_capacity" }])
        assert.isAbove(Fs.readdirSync(ws.root).filter((n) => n.includes(".agentwire-write-")).length, 0)
        // Once a retry confirms the removal, ownership ends and the slot is free.
        failing = false
        yield* boardUntil(board, (u) => u.length === 0, "1 minute")
        same((yield* board.snapshot).unconfirmed, [])
        noStaging(ws)
        same(yield* transfer(core, ws, "s-3", "keep.txt", Buffer.from("replaced")), { outcome: "completed", size_bytes: 8 })
        same(Fs.readFileSync(ws.at("keep.txt"), "utf8"), "replaced")
      }).pipe(boundTo(ws, failingRemoval))
    }))

  it.effect("a failed chunk write, fsync or rename is write_rejected with the old file intact; the slot is freed", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      Fs.writeFileSync(ws.at("keep.txt"), "keep me")
      let fail: "write" | "sync" | "rename" | undefined
      const failing = staged((s) => ({
        ...s,
        write: (data, offset) => (fail === "write" ? Effect.fail("io" as const) : s.write(data, offset)),
        sync: Effect.suspend(() => (fail === "sync" ? Effect.fail("io" as const) : s.sync)),
        rename: Effect.suspend(() => (fail === "rename" ? Effect.fail("permission_denied" as const) : s.rename))
      }))
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        const rejected = { outcome: "rejected", error_code: "write_rejected" }
        fail = "write"
        yield* core.toRuntime(writeBegin("f-1", ws.local.id, "keep.txt", "abcd"))
        same(yield* result(core), ["f-1", { outcome: "ready" }])
        yield* core.toRuntime(writeChunk("f-1", 0, "abcd"))
        same(yield* result(core), ["f-1", rejected])
        for (const step of ["sync", "rename"] as const) {
          fail = step
          same(yield* transfer(core, ws, `f-${step}`, "keep.txt", Buffer.from("abcd")), rejected, step)
          same(Fs.readFileSync(ws.at("keep.txt"), "utf8"), "keep me", step)
        }
        yield* adjust(0)
        noStaging(ws)
        fail = undefined
        same(yield* transfer(core, ws, "f-ok", "keep.txt", Buffer.from("abcd")), { outcome: "completed", size_bytes: 4 })
      }).pipe(boundTo(ws, failing))
    }))

  it.effect("a chunk's received follows its staging write; the next chunk is written without waiting for that receipt's local write", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      const events: Array<string> = []
      let gate: Deferred.Deferred<void> | undefined
      const slow = staged((s) => ({
        ...s,
        write: (data, offset) =>
          Effect.andThen(
            gate === undefined ? Effect.void : Deferred.await(gate),
            Effect.tap(s.write(data, offset), () => Effect.sync(() => events.push(`written ${offset}`)))
          )
      }))
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(writeBegin("o-1", ws.local.id, "order.bin", "abcdefghijkl"))
        same(yield* result(core), ["o-1", { outcome: "ready" }])
        // The staging write has not completed: no receipt may be handed over.
        gate = yield* Deferred.make<void>()
        yield* core.toRuntime(writeChunk("o-1", 0, "abcd"))
        assert.isTrue(yield* silent(core))
        same(events, [])
        yield* Deferred.succeed(gate, undefined)
        same(yield* result(core), ["o-1", { outcome: "received", offset: 4 }])
        same(events, ["written 0"])
        gate = undefined
        // The receipts' local writes are held: the next chunks are still written, and their receipts follow in order.
        yield* core.holdWrites
        yield* core.toRuntime(writeChunk("o-1", 4, "efgh"))
        yield* core.toRuntime(writeChunk("o-1", 8, "ijkl"))
        for (let i = 0; i < 100 && events.length < 3; i++) yield* settle
        same(events, ["written 0", "written 4", "written 8"])
        assert.isTrue(yield* silent(core))
        yield* core.releaseWrites
        same(yield* result(core), ["o-1", { outcome: "received", offset: 8 }])
        same(yield* result(core), ["o-1", { outcome: "received", offset: 12 }])
        yield* core.toRuntime(writeCommit("o-1"))
        same(yield* result(core), ["o-1", { outcome: "completed", size_bytes: 12 }])
        same(Fs.readFileSync(ws.at("order.bin"), "utf8"), "abcdefghijkl")
      }).pipe(boundTo(ws, slow))
    }))

  it.effect("an ambiguous final step (renamed, directory fsync failed) is unknown / write_unconfirmed; nothing is left staged", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      Fs.writeFileSync(ws.at("keep.txt"), "old")
      const failing = staged((s) => ({ ...s, syncDirectory: Effect.andThen(s.syncDirectory, Effect.fail("io" as const)) }))
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        same(yield* transfer(core, ws, "u-1", "keep.txt", Buffer.from("new body")), { outcome: "unknown", error_code: "write_unconfirmed" })
        // The rename happened: the new body is in place; only its durability is unproven.
        same(Fs.readFileSync(ws.at("keep.txt"), "utf8"), "new body")
        yield* adjust(0)
        noStaging(ws)
        // The write ended: the slot is free for the next one (nothing is replayed).
        yield* core.toRuntime(writeBegin("u-2", ws.local.id, "keep.txt", "x"))
        same(yield* result(core), ["u-2", { outcome: "ready" }])
      }).pipe(boundTo(ws, failing))
    }))
})
