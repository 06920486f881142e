/**
 * The local status API: effect/rpc over a real Unix socket in a temporary profile directory.
 */
import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, FileSystem, Layer, Scope } from "effect"
import { TestClock } from "effect/testing"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import { formatStatus } from "../../../src/bin/commands/status.js"
import { DaemonUnreachable, status } from "../../../src/runtime/control/ControlClient.js"
import * as ControlServer from "../../../src/runtime/control/ControlServer.js"
import { StatusBoard, type StatusSnapshot } from "../../../src/runtime/StatusBoard.js"

const boardLayer = StatusBoard.layer({
  daemonVersion: "0.1.0",
  wireVersion: "0.10.0",
  pid: 4242,
  deviceId: "dev-1",
  coreUrl: "https://core.example"
})

const tempDir = Effect.flatMap(Effect.service(FileSystem.FileSystem), (fs) =>
  fs.makeTempDirectoryScoped({ prefix: "aw" })).pipe(Effect.provide(NodeServices.layer))

/** Leaves a stale socket file behind: a process listens on it and is killed before it can clean up. */
const staleSocket = (path: string) =>
  Effect.callback<void>((resume) => {
    const child = spawn(process.execPath, [
      "-e",
      `require("net").createServer().listen(${JSON.stringify(path)}, () => process.kill(process.pid, "SIGKILL"))`
    ])
    child.on("exit", () => resume(Effect.void))
  })

const serve = (path: string) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(ControlServer.layer(path).pipe(Layer.provideMerge(boardLayer)), scope)
    return { scope, context }
  })

describe("control socket", () => {
  it.effect("serves the StatusBoard snapshot over the Unix socket (mode 0600)", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const path = `${dir}/agentwire.sock`
      const { context, scope } = yield* serve(path)
      const board = yield* Effect.provide(Effect.service(StatusBoard), Layer.succeedContext(context))
      yield* board.setConnection({
        state: "connected",
        device_id: "dev-1",
        core_url: "https://core.example",
        connection_number: 2,
        since_ms: 1000
      })
      yield* board.setKinds([{ kind: "scripted", available: true, supported: ["streaming"] }])
      assert.strictEqual(Fs.statSync(path).mode & 0o777, 0o600)
      const snapshot = yield* status(path)
      assert.deepStrictEqual(snapshot, yield* board.snapshot)
      assert.strictEqual(snapshot.connection.connection_number, 2)
      yield* Scope.close(scope, Exit.void)
      assert.isFalse(Fs.existsSync(path))
    }))

  it.effect("removes a stale socket file left by a daemon that died", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const path = `${dir}/agentwire.sock`
      yield* staleSocket(path)
      assert.isTrue(Fs.lstatSync(path).isSocket())
      const { scope } = yield* serve(path)
      assert.strictEqual((yield* status(path)).pid, 4242)
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("refuses to take over a socket another live daemon answers on, or a path that is not a socket", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const path = `${dir}/agentwire.sock`
      const other = Net.createServer()
      yield* Effect.callback<void>((resume) => {
        other.listen(path, () => resume(Effect.void))
      })
      const inUse = yield* Effect.flip(serve(path))
      assert.deepStrictEqual(inUse, new ControlServer.ControlSocketUnavailable({ path, reason: "in_use" }))
      assert.include(inUse.message, "another agentwire daemon is running")
      yield* Effect.callback<void>((resume) => {
        other.close(() => resume(Effect.void))
      })
      Fs.writeFileSync(path, "not a socket")
      assert.deepStrictEqual(
        yield* Effect.flip(serve(path)),
        new ControlServer.ControlSocketUnavailable({ path, reason: "not_a_socket" })
      )
    }))

  it.effect("the client reports a missing daemon clearly", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const path = `${dir}/agentwire.sock`
      const error = yield* Effect.flip(status(path))
      assert.deepStrictEqual(error, new DaemonUnreachable({ path, reason: "no_socket" }))
      assert.strictEqual(error.message, `no agentwire daemon is running for this profile (no socket at ${path})`)
      yield* staleSocket(path)
      assert.deepStrictEqual(yield* Effect.flip(status(path)), new DaemonUnreachable({ path, reason: "not_answering" }))
    }))
})

describe("control client budget", () => {
  it.effect("waits 5 s for a daemon that accepted the connection but does not answer, then reports a timeout", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const path = `${dir}/agentwire.sock`
      // A listener that reads the request and never answers.
      const received = yield* Deferred.make<void>()
      const server = Net.createServer((socket) => socket.on("data", () => Deferred.doneUnsafe(received, Exit.void)))
      yield* Effect.acquireRelease(
        Effect.callback<void>((resume) => void server.listen(path, () => resume(Effect.void))),
        () => Effect.callback<void>((resume) => void server.close(() => resume(Effect.void)))
      )
      const fiber = yield* Effect.forkChild(status(path))
      yield* TestClock.withLive(Deferred.await(received).pipe(Effect.timeout("5 seconds")))
      yield* TestClock.adjust("4999 millis")
      assert.isUndefined(fiber.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Fiber.await(fiber), Exit.fail(new DaemonUnreachable({ path, reason: "timeout" })))
    }))
})

describe("agentwire status output", () => {
  it("summarises connection, kinds, admissions, executors, runs and unconfirmed cleanups", () => {
    const snapshot: StatusSnapshot = {
      daemon_version: "0.1.0",
      wire_version: "0.10.0",
      pid: 7,
      connection: {
        state: "backoff",
        device_id: "dev-1",
        core_url: "https://core.example",
        connection_number: 3,
        since_ms: 0,
        last_error: "bootstrap failed (network: ECONNREFUSED)",
        next_attempt_ms: 1_700_000_000_000
      },
      suspension: { state: "suspended", environment_id: "env-1", suspend_id: "suspend-7" },
      kinds: [
        { kind: "scripted", available: true, version: "0.1.0", supported: ["streaming", "usage"] },
        { kind: "codex", available: false, unavailable_reason: "codex binary not found on PATH", supported: [] }
      ],
      active_runs: 1,
      admissions: [
        { request_id: "req-1", handle: "h-1", state: "ready", revision: 2, executor_id: "ex-1" },
        { request_id: "req-0", handle: "h-0", state: "finished", revision: 4, executor_id: "ex-1", run_id: "run-0" }
      ],
      executors: [{ executor_id: "ex-1", session_id: "s-1", kind: "scripted", state: "idle" }],
      runs: [
        { run_id: "run-1", request_id: "req-2", kind: "scripted", state: "running" },
        { run_id: "run-9", kind: "scripted", state: "running" }
      ],
      unconfirmed: [{ resource: "ex-2", kind: "executor", attempts: 3, last_error: "close failed" }]
    }
    assert.strictEqual(
      formatStatus(snapshot),
      [
        "agentwire daemon 0.1.0 (wire 0.10.0), pid 7",
        "connection: backoff (#3) since -",
        "  core:   https://core.example",
        "  device: dev-1",
        "  next attempt: 2023-11-14T22:13:20.000Z",
        "  last error: bootstrap failed (network: ECONNREFUSED)",
        "suspension: suspended (fenced until the matching environment_resume), environment env-1, suspend id suspend-7",
        "kinds: ",
        "  scripted 0.1.0: available, 2 capabilities supported",
        "  codex: unavailable (codex binary not found on PATH), 0 capabilities supported",
        "active runs: 1",
        "admissions: 2 (1 live, 1 ended)",
        "  h-1 (request req-1) ready rev 2 executor ex-1",
        "  h-0 (request req-0) finished rev 4 executor ex-1 run run-0",
        "executors: 1",
        "  ex-1 scripted idle (session s-1)",
        "runs: 2",
        "  run-1 (turn request req-2) scripted running",
        "  run-9 (direct) scripted running",
        "cleanup unconfirmed: 1",
        "  executor ex-2: 3 attempts, last error: close failed"
      ].join("\n")
    )
    assert.include(formatStatus({ ...snapshot, suspension: { state: "open" } }), "\nsuspension: open\n")
  })
})
