/**
 * `workspace_read`, Runtime side (issue #13): bytes and directory reads from a read-only preparation or a
 * running Run of the bound Environment, over a real temporary workspace; capacity 4; the 12 s native bound
 * (TestClock, just before and at the boundary); an unconfirmed read stops further reads on its owner and keeps
 * its capacity; a failed close keeps ownership (`workspace` cleanup unconfirmed) and the handle's `released`
 * waits for the confirmed close.
 */
import * as Fs from "node:fs"
import { execFileSync } from "node:child_process"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { WorkspaceFsShape } from "../../../src/runtime/workspace/WorkspaceFs.js"
import { StatusBoard } from "../../../src/runtime/StatusBoard.js"
import { ScriptedSignals } from "../../../src/runtime/harness/scripted/ScriptedSignals.js"
import { adjust, adjustUntilSent, connect, next, processLayer, promptFrame, releaseFrame, same, script, silent, startFrame, until } from "../../support/runtimeTestWire.js"
import { boundTo, readResult, readyReadOnly } from "../../support/workspaceDaemon.js"
import { tempWorkspace, type TempWorkspace } from "../../support/workspaceDir.js"
import { bytesRead, dirRead, readFrame } from "../../support/workspaceFrames.js"

const b64 = (s: string) => Buffer.from(s).toString("base64")

const fill = (ws: TempWorkspace) => {
  Fs.writeFileSync(ws.at("hello.txt"), "hello, workspace")
  Fs.mkdirSync(ws.at("src"))
  Fs.writeFileSync(ws.at("src/main.ts"), "x".repeat(1204))
  Fs.symlinkSync("hello.txt", ws.at("link"))
  execFileSync("mkfifo", [ws.at("pipe")])
}

const result = readResult

describe("workspace_read", () => {
  it.effect("bytes: complete, explicitly truncated, empty; refusals carry no bytes; a FIFO does not hang", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      fill(ws)
      Fs.writeFileSync(ws.at("empty"), "")
      const env = ws.local.id
      yield* Effect.gen(function* () {
        const { core } = yield* readyReadOnly(ws)
        const cases: Array<[string, number, unknown]> = [
          ["hello.txt", 1 << 20, { outcome: "completed", data: b64("hello, workspace"), close_acknowledged: true }],
          ["hello.txt", 16, { outcome: "completed", data: b64("hello, workspace"), close_acknowledged: true }],
          ["hello.txt", 5, { outcome: "completed", data: b64("hello"), truncated: true, close_acknowledged: true }],
          ["empty", 10, { outcome: "completed", close_acknowledged: true }],
          ["missing.txt", 10, { outcome: "rejected", error_code: "not_found" }],
          ["link", 10, { outcome: "rejected", error_code: "permission_denied" }],
          ["pipe", 10, { outcome: "rejected", error_code: "permission_denied" }],
          ["src", 10, { outcome: "rejected", error_code: "permission_denied" }],
          ["hello.txt/x", 10, { outcome: "rejected", error_code: "not_found" }]
        ]
        for (const [i, [path, max, expected]] of cases.entries()) {
          yield* core.toRuntime(bytesRead(`r-${i}`, env, path, max))
          same(yield* result(core), [`r-${i}`, expected], path)
        }
      }).pipe(boundTo(ws))
    }))

  it.effect("directory: one level, symlinks listed not followed, explicit truncation, not_directory", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      fill(ws)
      const env = ws.local.id
      yield* Effect.gen(function* () {
        const { core } = yield* readyReadOnly(ws)
        yield* core.toRuntime(dirRead("d-root", env, "", 1024))
        same(yield* result(core), ["d-root", {
          outcome: "completed",
          close_acknowledged: true,
          directory: {
            entries: [
              { name: "hello.txt", kind: "file", size_bytes: 16 },
              { name: "link", kind: "symlink", size_bytes: null },
              { name: "pipe", kind: "other", size_bytes: null },
              { name: "src", kind: "directory", size_bytes: null }
            ],
            truncated: false
          }
        }])
        yield* core.toRuntime(dirRead("d-src", env, "src", 1))
        same(yield* result(core), ["d-src", {
          outcome: "completed", close_acknowledged: true, directory: { entries: [{ name: "main.ts", kind: "file", size_bytes: 1204 }], truncated: false }
        }])
        yield* core.toRuntime(dirRead("d-trunc", env, "", 2))
        const truncated = yield* result(core)
        same(truncated[1].directory?.truncated, true)
        same(truncated[1].directory?.entries.length, 2)
        for (const path of ["hello.txt", "link", "missing", "missing/deeper"]) {
          yield* core.toRuntime(dirRead(`nd-${path}`, env, path, 10))
          same(yield* result(core), [`nd-${path}`, { outcome: "rejected", error_code: "not_directory" }], path)
        }
      }).pipe(boundTo(ws))
    }))

  it.effect("invalid requests, unknown targets, another Environment and an unbound daemon are refused", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      fill(ws)
      const env = ws.local.id
      yield* Effect.gen(function* () {
        const { core } = yield* readyReadOnly(ws)
        const cases: Array<[ReturnType<typeof readFrame>, string]> = [
          [bytesRead("i-1", env, "../hello.txt", 10), "invalid_request"],
          [bytesRead("i-2", env, "/etc/passwd", 10), "invalid_request"],
          [bytesRead("i-3", env, "hello.txt", 0), "invalid_request"],
          [bytesRead("i-4", env, "hello.txt", (1 << 20) + 1), "invalid_request"],
          [bytesRead("i-5", env, "a\\b", 10), "invalid_request"],
          [dirRead("i-6", env, "", 1025), "invalid_request"],
          [readFrame("i-7", { handle: "handle-1", run_id: "run-1", environment_id: env, path: "hello.txt", max_bytes: 5 } as never), "invalid_request"],
          [bytesRead("u-1", env, "hello.txt", 10, { handle: "handle-9" }), "resource_unavailable"],
          [bytesRead("u-2", env, "hello.txt", 10, { run_id: "run-9" }), "resource_unavailable"],
          [bytesRead("u-3", "f4b2c1d0-9f8e-4a7b-b6c5-d4e3f2a1b0c9", "hello.txt", 10), "resource_unavailable"]
        ]
        for (const [frame, code] of cases) {
          yield* core.toRuntime(frame)
          same(yield* result(core), ["id" in frame ? frame.id : "", { outcome: "rejected", error_code: code }])
        }
        // The read-only handle cannot start, and after its release it is no read target any more.
        yield* core.toRuntime(startFrame("prep-ro", "executor-1", "handle-1", "run-1", script([])))
        same((yield* next(core, "preparation_status")).payload.error_code, "read_only_preparation")
        yield* core.toRuntime(releaseFrame("prep-ro", "handle-1"))
        same((yield* next(core, "preparation_status")).payload.state, "released")
        yield* core.toRuntime(bytesRead("u-4", env, "hello.txt", 10))
        same(yield* result(core), ["u-4", { outcome: "rejected", error_code: "resource_unavailable" }])
      }).pipe(boundTo(ws))
      // Unbound: nothing to read.
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(bytesRead("n-1", env, "hello.txt", 10))
        same(yield* result(core), ["n-1", { outcome: "rejected", error_code: "resource_unavailable" }])
      }).pipe(Effect.provide(processLayer()))
    }))

  it.effect("reads target the exact running Run of the Environment", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      fill(ws)
      const env = ws.local.id
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        // The delta after the write says the file is on disk (the write is real I/O: no clock step waits for it).
        const prompt = promptFrame("run-1", script([{ write_file: { path: "out.txt", text: "made by the turn" } }, { delta: "written" }, { wait: "go" }]))
        if (prompt.type !== "prompt_request") throw new Error("unreachable")
        const { disable_execution_environment: _, ...payload } = prompt.payload
        yield* core.toRuntime({ ...prompt, payload: { ...payload, local_environment: ws.local } })
        yield* until(core, "delta")
        yield* core.toRuntime(bytesRead("run-read", env, "out.txt", 100, { run_id: "run-1" }))
        same(yield* result(core), ["run-read", { outcome: "completed", data: b64("made by the turn"), close_acknowledged: true }])
        const signals = yield* ScriptedSignals
        yield* signals.fire("go")
        assert.strictEqual((yield* next(core, "done")).id, "run-1")
        yield* core.toRuntime(bytesRead("after", env, "out.txt", 100, { run_id: "run-1" }))
        same(yield* result(core), ["after", { outcome: "rejected", error_code: "resource_unavailable" }])
      }).pipe(boundTo(ws))
    }))

  it.effect("a hung read: capacity 4 is kept, the reply is unknown at 12 s (not before), and the owner takes no more reads", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      fill(ws)
      const env = ws.local.id
      const hanging = (fs: WorkspaceFsShape): WorkspaceFsShape => ({
        ...fs,
        openFile: (path) => Effect.map(fs.openFile(path), (f) => path === "hello.txt" ? { ...f, readPrefix: () => Effect.never } : f)
      })
      yield* Effect.gen(function* () {
        const { core } = yield* readyReadOnly(ws)
        for (let i = 0; i < 4; i++) yield* core.toRuntime(bytesRead(`h-${i}`, env, "hello.txt", 10))
        yield* core.toRuntime(bytesRead("h-4", env, "src/main.ts", 10))
        same(yield* result(core), ["h-4", { outcome: "rejected", error_code: "read_capacity" }])
        yield* core.toRuntime(bytesRead("h-0", env, "src/main.ts", 10))
        yield* adjust("11999 millis")
        assert.isTrue(yield* silent(core))
        yield* adjust("1 millis")
        const ids = new Set<string>()
        for (let i = 0; i < 4; i++) {
          const [id, payload] = yield* result(core)
          same(payload, { outcome: "unknown", error_code: "read_unconfirmed" })
          ids.add(id)
        }
        same([...ids].sort(), ["h-0", "h-1", "h-2", "h-3"])
        // The native reads never finished: they keep their capacity slots.
        yield* core.toRuntime(bytesRead("h-5", env, "src/main.ts", 10))
        same(yield* result(core), ["h-5", { outcome: "rejected", error_code: "read_capacity" }])
        assert.isTrue(yield* silent(core))
      }).pipe(boundTo(ws, hanging))
    }))

  it.effect("an unconfirmed read stops reads on its owner; a failed close keeps ownership until confirmed, then released", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      fill(ws)
      const env = ws.local.id
      let failures = 2
      const failingClose = (fs: WorkspaceFsShape): WorkspaceFsShape => ({
        ...fs,
        openFile: (path) =>
          Effect.map(fs.openFile(path), (f) => ({
            ...f,
            close: Effect.suspend(() => (failures-- > 0 ? Effect.fail("io" as const) : f.close))
          }))
      })
      yield* Effect.gen(function* () {
        const { core } = yield* readyReadOnly(ws)
        yield* core.toRuntime(bytesRead("c-1", env, "hello.txt", 10))
        same(yield* result(core), ["c-1", { outcome: "unknown", error_code: "read_unconfirmed" }])
        yield* core.toRuntime(bytesRead("c-2", env, "src/main.ts", 10))
        same(yield* result(core), ["c-2", { outcome: "rejected", error_code: "resource_unavailable" }])
        yield* core.toRuntime(dirRead("c-3", env, "", 10))
        same(yield* result(core), ["c-3", { outcome: "rejected", error_code: "resource_unavailable" }])
        const board = yield* StatusBoard
        const unconfirmed = (yield* board.snapshot).unconfirmed
        same(unconfirmed.map((u) => [u.resource, u.kind]), [["read:c-1", "workspace"]])
        // The release waits for the confirmed close (retried with the cleanup backoff), then publishes released.
        yield* core.toRuntime(releaseFrame("prep-ro", "handle-1"))
        assert.isTrue(yield* silent(core))
        // The retries close a real file between sleeps: the clock moves a second at a time, letting that I/O end.
        yield* adjustUntilSent(core, "1 minute")
        same((yield* next(core, "preparation_status")).payload.state, "released")
        same((yield* board.snapshot).unconfirmed, [])
      }).pipe(boundTo(ws, failingClose))
    }))

  it.effect("a duplicate pending id gets no reply", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      fill(ws)
      const env = ws.local.id
      const hanging = (fs: WorkspaceFsShape): WorkspaceFsShape => ({
        ...fs,
        openFile: (path) => Effect.map(fs.openFile(path), (f) => ({ ...f, readPrefix: () => Effect.never }))
      })
      yield* Effect.gen(function* () {
        const { core } = yield* readyReadOnly(ws)
        yield* core.toRuntime(bytesRead("dup", env, "hello.txt", 10))
        yield* core.toRuntime(bytesRead("dup", env, "hello.txt", 10))
        assert.isTrue(yield* silent(core))
        yield* adjust("12 seconds")
        same(yield* result(core), ["dup", { outcome: "unknown", error_code: "read_unconfirmed" }])
        assert.isTrue(yield* silent(core))
      }).pipe(boundTo(ws, hanging))
    }))
})
