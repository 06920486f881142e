/**
 * The operator Files API over a real loopback dev Core, with a scripted Runtime on a real WebSocket answering
 * the read-only preparation and the workspace families from an in-memory file table (no daemon: the
 * end-to-end test with the real binary is test/e2e/workspace.live.test.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer, Redacted, Ref } from "effect"
import { createHash } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as DevCore from "../../../src/core/dev/DevCore.js"
import { Ids, type Messages, Transfer } from "../../../src/proto/index.js"
import { allSupported } from "../../support/capabilities.js"
import { dialOk, heartbeat, kind, type ScriptedRuntime } from "../../support/coreScriptedRuntime.js"
import { operatorRequest } from "../../support/operatorRequest.js"

const token = Redacted.make("awop_test-files-token")
const ENV = "5c2f7b7e-1a0b-4e7e-9d55-6b1f0a2c3d4e"
const WORKSPACE = "/srv/workspace"

interface Peer {
  /** Reads of this path are answered only once `release` completes (holds the Session lock meanwhile). */
  readonly slow: Deferred.Deferred<void>
  /** Completes when the slow read arrived, and when a Run started. */
  readonly slowSeen: Deferred.Deferred<void>
  readonly runStarted: Deferred.Deferred<void>
  /** Every workspace_read payload Core sent. */
  readonly reads: Array<Messages.MessageOfType<"workspace_read">["payload"]>
  readonly files: Map<string, Uint8Array>
  /** Every frame type Core sent, in order. */
  readonly seen: Array<string>
  readonly configs: Array<unknown>
}

/** Answers Core's workspace traffic as a daemon bound to ENV would (data only, no filesystem). */
const respond = (runtime: ScriptedRuntime, peer: Peer) =>
  Effect.gen(function* () {
    const writes = new Map<string, { path: string; size: number; chunks: Array<Uint8Array> }>()
    const exports = new Map<string, Uint8Array>()
    let revision = 0
    while (true) {
      const m = yield* runtime.receive
      peer.seen.push(m.type === "workspace_write" || m.type === "workspace_export" ? `${m.type}:${m.payload.step}` : m.type)
      const reply = (message: Messages.RuntimeToCore) => runtime.send(message)
      switch (m.type) {
        case "execution_start":
          yield* reply({
            type: "preparation_status",
            id: m.id,
            payload: { handle: m.payload.handle, executor_id: m.payload.executor_id, revision: ++revision, state: "starting", run_id: m.payload.run_id, expires_at: 4_102_444_800_000 }
          })
          yield* reply({
            type: "preparation_status",
            id: m.id,
            payload: { handle: m.payload.handle, executor_id: m.payload.executor_id, revision: ++revision, state: "started", run_id: m.payload.run_id, expires_at: 4_102_444_800_000 }
          })
          yield* Deferred.succeed(peer.runStarted, undefined)
          break
        case "execution_prepare": {
          peer.configs.push(m.payload.configuration)
          const handle = Ids.unsafeMake.admissionHandle(`h-${m.id}`)
          yield* reply({ type: "preparation_status", id: m.id, payload: { handle, revision: ++revision, state: "preparing" } })
          yield* reply({
            type: "preparation_status",
            id: m.id,
            payload: { handle, revision: ++revision, state: "ready", executor_id: Ids.unsafeMake.executorId("ex-1"), expires_at: 4_102_444_800_000 }
          })
          break
        }
        case "execution_release":
          yield* reply({ type: "preparation_status", id: m.id, payload: { handle: m.payload.handle, revision: ++revision, state: "released" } })
          break
        case "workspace_read": {
          const p = m.payload
          peer.reads.push(p)
          if (p.path === "slow.txt") {
            yield* Deferred.succeed(peer.slowSeen, undefined)
            yield* Deferred.await(peer.slow)
          }
          if (p.operation === "directory") {
            const prefix = p.path === "" ? "" : `${p.path}/`
            const names = [...peer.files.keys()].filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length))
            if (names.length === 0) {
              yield* reply({ type: "workspace_read_result", id: m.id, payload: { outcome: "rejected", error_code: "not_directory" } })
              break
            }
            const entries = [...new Set(names.map((n) => n.split("/")[0]!))].sort().map((n) =>
              names.includes(n)
                ? { name: n, kind: "file" as const, size_bytes: peer.files.get(prefix + n)!.length }
                : { name: n, kind: "directory" as const, size_bytes: null })
            yield* reply({ type: "workspace_read_result", id: m.id, payload: { outcome: "completed", close_acknowledged: true, directory: { entries, truncated: false } } })
            break
          }
          const file = peer.files.get(p.path)
          if (file === undefined) {
            yield* reply({ type: "workspace_read_result", id: m.id, payload: { outcome: "rejected", error_code: "not_found" } })
            break
          }
          const data = file.subarray(0, p.max_bytes)
          yield* reply({
            type: "workspace_read_result",
            id: m.id,
            payload: { outcome: "completed", close_acknowledged: true, data: Transfer.encodeChunkData(data), ...(file.length > p.max_bytes ? { truncated: true } : {}) }
          })
          break
        }
        case "workspace_write": {
          const p = m.payload
          if (p.step === "begin") {
            writes.set(m.id, { path: p.path!, size: p.size_bytes!, chunks: [] })
            yield* reply({ type: "workspace_write_result", id: m.id, payload: { outcome: "ready" } })
          } else if (p.step === "chunk") {
            const w = writes.get(m.id)!
            w.chunks.push(Transfer.decodeChunkData(p.data!)._tag === "Success" ? (Transfer.decodeChunkData(p.data!) as { success: Uint8Array }).success : new Uint8Array())
            yield* reply({ type: "workspace_write_result", id: m.id, payload: { outcome: "received", offset: w.chunks.reduce((n, c) => n + c.length, 0) } })
          } else {
            const w = writes.get(m.id)!
            if (w.path === "crash.txt") {
              // The connection dies after the commit left Core: its outcome is unknown.
              yield* runtime.close(1011, "gone")
              return
            }
            peer.files.set(w.path, Buffer.concat(w.chunks))
            yield* reply({ type: "workspace_write_result", id: m.id, payload: { outcome: "completed", size_bytes: w.size } })
          }
          break
        }
        case "workspace_export": {
          const p = m.payload
          if (p.step === "begin") {
            const archive = Buffer.concat([...peer.files.entries()].map(([k, v]) => Buffer.concat([Buffer.from(`${k}\n`), v])))
            exports.set(m.id, archive)
            yield* reply({ type: "workspace_export_result", id: m.id, payload: { outcome: "chunk", offset: 0, data: Transfer.encodeChunkData(archive.subarray(0, 4)) } })
          } else if (p.step === "next") {
            const archive = exports.get(m.id)!
            const offset = p.offset ?? 0
            yield* reply(
              offset >= archive.length
                ? { type: "workspace_export_result", id: m.id, payload: { outcome: "completed", offset } }
                : { type: "workspace_export_result", id: m.id, payload: { outcome: "chunk", offset, data: Transfer.encodeChunkData(archive.subarray(offset, offset + 4)) } }
            )
          }
          break
        }
        default:
          break
      }
    }
  })

type Call = (method: string, path: string, body?: unknown) => Effect.Effect<{ status: number; body: any; raw: Buffer }>

const withFiles = <A, E>(body: (call: Call, peer: Peer, sessionId: string, runtime: ScriptedRuntime) => Effect.Effect<A, E>) =>
  Effect.scoped(Effect.gen(function* () {
    const dir = mkdtempSync(join(tmpdir(), "agentwire-files-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    const context = yield* Layer.build(DevCore.layer({ dataDir: dir, operatorToken: token }))
    const core = Context.get(context, DevCore.DevCore)
    const request = operatorRequest(core.url, token)
    const call: Call = (method, path, payload) => request(method, path, payload).pipe(Effect.map(({ body, raw, status }) => ({ status, body, raw })))
    const credential = (yield* call("POST", "/devices/dev-1/credential")).body.credential as string
    const session = yield* call("POST", "/sessions", {
      agent_kind: "scripted",
      device_id: "dev-1",
      environment: { type: "self_hosted", id: ENV, workspace_directory: WORKSPACE }
    })
    assert.strictEqual(session.status, 201, JSON.stringify(session.body))
    const runtime = yield* dialOk({ wsUrl: `${core.url.replace(/^http/, "ws")}/api/v1/agent-daemon/ws`, deviceId: "dev-1", credential })
    yield* runtime.send(heartbeat([kind("scripted", { capabilities: allSupported() })]))
    const peer: Peer = { slow: yield* Deferred.make<void>(), slowSeen: yield* Deferred.make<void>(), runStarted: yield* Deferred.make<void>(), reads: [], files: new Map([["README.md", new TextEncoder().encode("hello")], ["src/main.ts", new TextEncoder().encode("x")]]), seen: [], configs: [] }
    yield* Effect.forkScoped(Effect.ignore(respond(runtime, peer)))
    // Wait until the device is online with its declaration.
    const online = Ref.makeUnsafe(false)
    while (!(yield* Ref.get(online))) {
      const device = yield* call("GET", "/devices/dev-1")
      if (device.body.online === true && device.body.declaration !== null) yield* Ref.set(online, true)
    }
    return yield* body(call, peer, session.body.session_id as string, runtime)
  }))

describe("Files API", () => {
  it.effect("lists a directory and reads a file on an idle Session through a released read-only preparation", () =>
    withFiles((call, peer, session) =>
      Effect.gen(function* () {
        const root = yield* call("GET", `/sessions/${session}/files?path=`)
        assert.deepStrictEqual(root, {
          status: 200,
          raw: root.raw,
          body: { entries: [{ name: "README.md", kind: "file", size_bytes: 5 }, { name: "src", kind: "directory", size_bytes: null }], truncated: false }
        })
        assert.deepStrictEqual(peer.seen, ["execution_prepare", "workspace_read", "execution_release"])
        const config = peer.configs[0] as Record<string, unknown>
        assert.strictEqual(config.workspace_read_only, true)
        assert.deepStrictEqual(config.local_environment, { id: ENV, workspace_directory: WORKSPACE, capability_sources: null, network_access: "disabled" })
        const file = yield* call("GET", `/sessions/${session}/files/content?path=README.md&max_bytes=3`)
        assert.deepStrictEqual(file.body, { data: Buffer.from("hel").toString("base64"), size_bytes: 3, truncated: true })
        // Not a directory: an empty page. Missing file: 404 from the Runtime.
        assert.deepStrictEqual((yield* call("GET", `/sessions/${session}/files?path=nope`)).body, { entries: [], truncated: false })
        const missing = yield* call("GET", `/sessions/${session}/files/content?path=nope.txt`)
        assert.deepStrictEqual([missing.status, missing.body.error, missing.body.source], [404, "file_not_found", "runtime"])
      })))

  it.effect("writes a file and reads it back; the 5 MiB bound and bad paths are refused before any Runtime work", () =>
    withFiles((call, peer, session) =>
      Effect.gen(function* () {
        const content = Buffer.alloc(200 * 1024, 7)
        const written = yield* call("PUT", `/sessions/${session}/files/content`, { path: "out/data.bin", data: content.toString("base64") })
        assert.strictEqual(written.status, 200, JSON.stringify(written.body))
        assert.strictEqual(written.body.size_bytes, content.length)
        assert.strictEqual(written.body.sha256, createHash("sha256").update(content).digest("hex"))
        assert.deepStrictEqual(Buffer.from(peer.files.get("out/data.bin")!), content)
        // A completed write is settled by its receipt: an operator cannot settle it again.
        const settle = yield* call("POST", `/sessions/${session}/files/writes/${written.body.write_id}/settle`, { status: "failed" })
        assert.deepStrictEqual([settle.status, settle.body.error], [409, "write_not_unknown"])
        const before = peer.seen.length
        const big = yield* call("PUT", `/sessions/${session}/files/content`, { path: "big.bin", data: Buffer.alloc(5 * 1024 * 1024 + 1).toString("base64") })
        assert.strictEqual(big.status, 400)
        const bad = yield* call("PUT", `/sessions/${session}/files/content`, { path: "../escape", data: "" })
        assert.deepStrictEqual([bad.status, bad.body.source], [400, "core"])
        assert.strictEqual(peer.seen.length, before)
      })))

  it.effect("a write whose commit got no receipt stays unsettled and refuses the Session's next write", () =>
    withFiles((call, _peer, session) =>
      Effect.gen(function* () {
        const lost = yield* call("PUT", `/sessions/${session}/files/content`, { path: "crash.txt", data: Buffer.from("x").toString("base64") })
        assert.deepStrictEqual([lost.status, lost.body.error], [503, "write_unknown"])
        const next = yield* call("PUT", `/sessions/${session}/files/content`, { path: "b.txt", data: "" })
        assert.deepStrictEqual([next.status, next.body.error], [409, "write_unsettled"])
        const writeId = /^write (\S+) has no exact settlement \(unknown\)$/.exec(String(next.body.detail))?.[1]
        assert.isDefined(writeId, String(next.body.detail))
        const settle = (id: string, body: unknown) => call("POST", `/sessions/${session}/files/writes/${id}/settle`, body)
        // Bad bodies and unknown writes are refused before anything changes; the write stays unsettled.
        assert.strictEqual((yield* settle(writeId!, { status: "unknown" })).status, 400)
        assert.strictEqual((yield* settle(writeId!, { status: "failed", extra: 1 })).status, 400)
        const missing = yield* settle("no-such-write", { status: "failed" })
        assert.deepStrictEqual([missing.status, missing.body.error], [404, "not_found"])
        const otherSession = yield* call("POST", `/sessions/no-such-session/files/writes/${writeId}/settle`, { status: "failed" })
        assert.strictEqual(otherSession.status, 404)
        assert.strictEqual((yield* call("GET", `/sessions/${session}/files/writes/${writeId}/settle`)).status, 405)
        assert.strictEqual((yield* call("PUT", `/sessions/${session}/files/content`, { path: "b.txt", data: "" })).body.error, "write_unsettled")
        // The operator looked at the file and settles the write; a second settlement is a conflict.
        const settled = yield* settle(writeId!, { status: "failed" })
        assert.deepStrictEqual([settled.status, settled.body], [200, { write_id: writeId, status: "failed" }])
        const again = yield* settle(writeId!, { status: "completed" })
        assert.deepStrictEqual([again.status, again.body.error], [409, "write_not_unknown"])
        // The Session may write again: what stops this one now is only the lost connection.
        const after = yield* call("PUT", `/sessions/${session}/files/content`, { path: "b.txt", data: "" })
        assert.deepStrictEqual([after.status, after.body.error], [409, "device_offline"])
      })))

  it.effect("downloads the export as a tar stream pulled chunk by chunk", () =>
    withFiles((call, peer, session) =>
      Effect.gen(function* () {
        const res = yield* call("GET", `/sessions/${session}/files/export`)
        assert.strictEqual(res.status, 200)
        const expected = Buffer.concat([...peer.files.entries()].map(([k, v]) => Buffer.concat([Buffer.from(`${k}\n`), v])))
        assert.deepStrictEqual(res.raw, expected)
        assert.deepStrictEqual(peer.seen.filter((t) => t.startsWith("workspace_export")).slice(-1), ["workspace_export:next"])
        assert.isFalse(peer.seen.includes("workspace_export:cancel"))
      })))

  it.effect("a read during a running Turn targets its exact Run; a Turn start waits for nothing and is refused while a Files read holds the Session", () =>
    withFiles((call, peer, session, runtime) =>
      Effect.gen(function* () {
        // An idle read holds the Session's scheduling reservation until the Runtime answers it.
        const slow = yield* Effect.forkChild(call("GET", `/sessions/${session}/files/content?path=slow.txt`))
        yield* Deferred.await(peer.slowSeen)
        const refused = yield* call("POST", `/sessions/${session}/turns`, { input: [{ content: [{ type: "input_text", text: "hi" }] }] })
        assert.deepStrictEqual([refused.status, refused.body.error], [409, "session_busy"])
        yield* Deferred.succeed(peer.slow, undefined)
        assert.strictEqual((yield* Fiber.join(slow)).status, 404)
        // Now a Turn runs; a read targets its Run on the same connection (no preparation, no handle).
        const turn = yield* call("POST", `/sessions/${session}/turns`, { input: [{ content: [{ type: "input_text", text: "hi" }] }] })
        assert.strictEqual(turn.status, 202, JSON.stringify(turn.body))
        yield* Deferred.await(peer.runStarted)
        // The dispatch mark is stored after the start is sent, by the store's worker thread: give it turns of the
        // event loop (`setImmediate`, no timer) until the Turn reads as running and dispatched.
        let running = yield* call("GET", `/turns/${turn.body.turn_id}`)
        for (let i = 0; i < 1000 && running.body.dispatched_at_ms === null; i++) {
          yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
          running = yield* call("GET", `/turns/${turn.body.turn_id}`)
        }
        assert.deepStrictEqual([running.body.status, running.body.dispatched_at_ms === null], ["running", false])
        const during = yield* call("GET", `/sessions/${session}/files/content?path=README.md`)
        assert.strictEqual(during.status, 200, JSON.stringify(during.body))
        const last = peer.reads[peer.reads.length - 1]!
        assert.deepStrictEqual([last.run_id, last.handle], [turn.body.run_id, undefined])
        // Writes and exports need an idle Session.
        const write = yield* call("PUT", `/sessions/${session}/files/content`, { path: "x.txt", data: "" })
        assert.deepStrictEqual([write.status, write.body.error], [409, "turn_active"])
        yield* runtime.send({ type: "done", id: Ids.unsafeMake.runId(turn.body.run_id), payload: { content: "" } })
      })))

  it.effect("a self_hosted Environment needs a device and a canonical UUID", () =>
    withFiles((call) =>
      Effect.gen(function* () {
        const noDevice = yield* call("POST", "/sessions", { agent_kind: "scripted", environment: { type: "self_hosted", id: ENV, workspace_directory: WORKSPACE } })
        assert.strictEqual(noDevice.status, 400)
        const badId = yield* call("POST", "/sessions", {
          agent_kind: "scripted",
          device_id: "dev-1",
          environment: { type: "self_hosted", id: "env-1", workspace_directory: WORKSPACE }
        })
        assert.strictEqual(badId.status, 400)
        const ok = yield* call("POST", "/sessions", {
          agent_kind: "scripted",
          device_id: "dev-1",
          environment: { type: "self_hosted", id: ENV, workspace_directory: WORKSPACE, network_access: "enabled" }
        })
        assert.deepStrictEqual(ok.body.environment, { type: "self_hosted", id: ENV, workspace_directory: WORKSPACE, network_access: "enabled" })
      })))

  it.effect("a Session of Environment type none has no workspace", () =>
    withFiles((call) =>
      Effect.gen(function* () {
        const none = (yield* call("POST", "/sessions", { agent_kind: "scripted" })).body.session_id as string
        const res = yield* call("GET", `/sessions/${none}/files`)
        assert.deepStrictEqual([res.status, res.body.error], [409, "no_workspace"])
        assert.strictEqual((yield* call("GET", `/sessions/nope/files`)).status, 404)
        assert.strictEqual((yield* call("DELETE", `/sessions/${none}/files`)).status, 405)
      })))
})
