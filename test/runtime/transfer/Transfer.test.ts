/**
 * `runtime_prepare`, Runtime side (issue #14), over a real temporary workspace: file transfers installed
 * atomically at their logical path, skills extracted into `.agentwire/skills/<name>`, plugins into their slot,
 * initialization (`configure` + `setup` with a real shell, a failing command's exit code, the network policy) and
 * `finalize`. Nothing is installed from a short, mismatched, out-of-order or expired transfer, and the staging
 * area is always removed; one transfer per connection; live work blocks begin; an active transfer blocks new
 * work; the 120 s budget on TestClock, just before and at the boundary.
 */
import * as Fs from "node:fs"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { adjust, connect, next, prepareFrame, processLayer, same, settle, silent } from "../../support/runtimeTestWire.js"
import { tempWorkspace, type TempWorkspace } from "../../support/workspaceDir.js"
import {
  fileBegin,
  finalizeBegin,
  initializeBegin,
  pluginBegin,
  prepareChunk,
  prepareCommit,
  type PrepareFrame,
  skillBegin
} from "../../support/prepareFrames.js"
import { buildZip, skillZip } from "../../support/zipWriter.js"
import type { WorkspaceFsShape } from "../../../src/runtime/workspace/WorkspaceFs.js"

type Core = Effect.Success<ReturnType<typeof connect>>["core"]

const result = (core: Core) => Effect.map(next(core, "runtime_prepare_result"), (f) => [f.id, f.payload] as const)

/** Nothing staged is left anywhere in the workspace. */
const noStaging = (ws: TempWorkspace) => {
  const names = Fs.readdirSync(ws.root, { recursive: true }) as Array<string>
  assert.deepStrictEqual(names.filter((n) => n.includes(".agentwire-prepare-") || /staging\/./.test(n)), [])
}

/** begin → ready, every chunk → received, commit → its reply. */
const transfer = (core: Core, begin: PrepareFrame, body: Uint8Array) =>
  Effect.gen(function* () {
    const id = begin.id
    yield* core.toRuntime(begin)
    same(yield* result(core), [id, { outcome: "ready" }])
    for (let offset = 0; offset < body.length; offset += 65536) {
      const part = body.subarray(offset, offset + 65536)
      yield* core.toRuntime(prepareChunk(id, offset, part))
      same(yield* result(core), [id, { outcome: "received", offset: offset + part.length }])
    }
    yield* core.toRuntime(prepareCommit(id))
    return (yield* result(core))[1]
  })

const run = (core: Core, begin: PrepareFrame) =>
  Effect.gen(function* () {
    yield* core.toRuntime(begin)
    same(yield* result(core), [begin.id, { outcome: "ready" }])
    yield* core.toRuntime(prepareCommit(begin.id))
    return (yield* result(core))[1]
  })

const invalid = { outcome: "rejected", error_code: "invalid_request" }
const refused = { outcome: "rejected", error_code: "runtime_preparation_rejected" }

describe("runtime_prepare file", () => {
  it.effect("installs a file at its logical path in acknowledged chunks, atomically", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        const body = Buffer.from(Array.from({ length: 150_000 }, (_, i) => i % 253))
        same(yield* transfer(core, fileBegin("t-1", ws.local.id, "/workspace/notes/deep/data.bin", body), body), { outcome: "completed", size_bytes: 150_000 })
        assert.isTrue(Buffer.compare(Fs.readFileSync(ws.at("notes/deep/data.bin")), body) === 0)
        same(yield* transfer(core, fileBegin("t-2", ws.local.id, "/workspace/empty.txt", ""), Buffer.alloc(0)), { outcome: "completed" })
        noStaging(ws)
        assert.isTrue(yield* silent(core))
      }).pipe(Effect.provide(processLayer({ environment: ws.binding })))
    }))

  it.effect("a file goes through the process's WorkspaceFs staging: a failed rename is a rejection, a failed directory sync unknown", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      Fs.writeFileSync(ws.at("keep.txt"), "keep me")
      const fail = { rename: false, syncDirectory: false }
      const staged: Array<string> = []
      const wrap = (fs: WorkspaceFsShape): WorkspaceFsShape => ({
        ...fs,
        openStaging: (path, tempName) =>
          Effect.map(fs.openStaging(path, tempName), (s) => {
            staged.push(path)
            return {
              ...s,
              rename: fail.rename ? Effect.fail("io" as const) : s.rename,
              syncDirectory: Effect.andThen(s.syncDirectory, fail.syncDirectory ? Effect.fail("io" as const) : Effect.void)
            }
          })
      })
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        fail.rename = true
        same(yield* transfer(core, fileBegin("w-1", ws.local.id, "/workspace/keep.txt", "new"), Buffer.from("new")), refused)
        same(Fs.readFileSync(ws.at("keep.txt"), "utf8"), "keep me")
        fail.rename = false
        fail.syncDirectory = true
        same(yield* transfer(core, fileBegin("w-2", ws.local.id, "/workspace/keep.txt", "new"), Buffer.from("new")), {
          outcome: "unknown",
          error_code: "runtime_preparation_unconfirmed"
        })
        same(Fs.readFileSync(ws.at("keep.txt"), "utf8"), "new")
        assert.deepStrictEqual(staged, ["keep.txt", "keep.txt"])
        yield* settle
        noStaging(ws)
      }).pipe(Effect.provide(processLayer({ environment: ws.binding, wrapWorkspaceFs: wrap })))
    }))

  it.effect("nothing is installed from a mismatched, short, out-of-order or oversized transfer", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      Fs.writeFileSync(ws.at("keep.txt"), "keep me")
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        const path = "/workspace/keep.txt"
        // Digest mismatch.
        yield* core.toRuntime(fileBegin("d-1", ws.local.id, path, "abcd", { sha256: "0".repeat(64) }))
        same(yield* result(core), ["d-1", { outcome: "ready" }])
        yield* core.toRuntime(prepareChunk("d-1", 0, "abcd"))
        same(yield* result(core), ["d-1", { outcome: "received", offset: 4 }])
        yield* core.toRuntime(prepareCommit("d-1"))
        same(yield* result(core), ["d-1", invalid])
        // Short body.
        yield* core.toRuntime(fileBegin("d-2", ws.local.id, path, "abcd"))
        same(yield* result(core), ["d-2", { outcome: "ready" }])
        yield* core.toRuntime(prepareChunk("d-2", 0, "ab"))
        same(yield* result(core), ["d-2", { outcome: "received", offset: 2 }])
        yield* core.toRuntime(prepareCommit("d-2"))
        same(yield* result(core), ["d-2", invalid])
        // Wrong offset ends the transfer; a later frame for it is invalid_request too.
        yield* core.toRuntime(fileBegin("d-3", ws.local.id, path, "abcd"))
        same(yield* result(core), ["d-3", { outcome: "ready" }])
        yield* core.toRuntime(prepareChunk("d-3", 2, "ab"))
        same(yield* result(core), ["d-3", invalid])
        yield* core.toRuntime(prepareChunk("d-3", 0, "ab"))
        same(yield* result(core), ["d-3", invalid])
        // More than declared.
        yield* core.toRuntime(fileBegin("d-4", ws.local.id, path, "ab"))
        same(yield* result(core), ["d-4", { outcome: "ready" }])
        yield* core.toRuntime(prepareChunk("d-4", 0, "abc"))
        same(yield* result(core), ["d-4", invalid])
        // A chunk over 64 KiB.
        const big = Buffer.alloc(65537)
        yield* core.toRuntime(fileBegin("d-5", ws.local.id, path, big))
        same(yield* result(core), ["d-5", { outcome: "ready" }])
        yield* core.toRuntime(prepareChunk("d-5", 0, big))
        same(yield* result(core), ["d-5", invalid])
        same(Fs.readFileSync(ws.at("keep.txt"), "utf8"), "keep me")
        yield* settle
        noStaging(ws)
      }).pipe(Effect.provide(processLayer({ environment: ws.binding })))
    }))

  it.effect("a directory or symlink destination is runtime_preparation_rejected; an invalid path invalid_request", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      const out = yield* tempWorkspace
      Fs.mkdirSync(ws.at("dir"))
      Fs.symlinkSync(out.root, ws.at("out"))
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        for (const [i, path] of ["/workspace/dir", "/workspace/out/x.txt"].entries()) {
          yield* core.toRuntime(fileBegin(`r-${i}`, ws.local.id, path, "x"))
          same(yield* result(core), [`r-${i}`, refused], path)
        }
        for (const [i, path] of ["/workspace/../etc/x", "/etc/passwd", "/workspace"].entries()) {
          yield* core.toRuntime(fileBegin(`p-${i}`, ws.local.id, path, "x"))
          same(yield* result(core), [`p-${i}`, invalid], path)
        }
        same(Fs.readdirSync(out.root), [])
      }).pipe(Effect.provide(processLayer({ environment: ws.binding })))
    }))

  it.effect("one transfer per connection; live work blocks begin; an active transfer blocks new work", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(fileBegin("a-1", "f4b2c1d0-9f8e-4a7b-b6c5-d4e3f2a1b0c9", "/workspace/x.txt", "x"))
        same(yield* result(core), ["a-1", { outcome: "rejected", error_code: "resource_unavailable" }])
        yield* core.toRuntime(fileBegin("a-2", ws.local.id, "/workspace/x.txt", "xy"))
        same(yield* result(core), ["a-2", { outcome: "ready" }])
        // A duplicate begin gets no reply; another begin is capacity.
        yield* core.toRuntime(fileBegin("a-2", ws.local.id, "/workspace/x.txt", "xy"))
        yield* core.toRuntime(fileBegin("a-3", ws.local.id, "/workspace/y.txt", "y"))
        same(yield* result(core), ["a-3", { outcome: "rejected", error_code: "runtime_preparation_capacity" }])
        // The active transfer blocks new work.
        yield* core.toRuntime(prepareFrame("prep-1"))
        same((yield* next(core, "preparation_status")).payload, {
          revision: 0, state: "rejected", operation: "execution_prepare", error_code: "resource_unavailable"
        })
        yield* core.toRuntime(prepareChunk("a-2", 0, "xy"))
        same(yield* result(core), ["a-2", { outcome: "received", offset: 2 }])
        yield* core.toRuntime(prepareCommit("a-2"))
        same(yield* result(core), ["a-2", { outcome: "completed", size_bytes: 2 }])
        // Live work (a prepared Executor) blocks begin.
        yield* core.toRuntime(prepareFrame("prep-2"))
        same((yield* next(core, "preparation_status")).payload.state, "preparing")
        same((yield* next(core, "preparation_status")).payload.state, "ready")
        yield* core.toRuntime(fileBegin("a-4", ws.local.id, "/workspace/z.txt", "z"))
        same(yield* result(core), ["a-4", { outcome: "rejected", error_code: "resource_unavailable" }])
      }).pipe(Effect.provide(processLayer({ environment: ws.binding })))
    }))

  it.effect("without a binding every begin is resource_unavailable", () =>
    Effect.gen(function* () {
      const { core } = yield* connect()
      yield* core.toRuntime(fileBegin("u-1", "e4b2c1d0-9f8e-4a7b-b6c5-d4e3f2a1b0c9", "/workspace/x.txt", "x"))
      same(yield* result(core), ["u-1", { outcome: "rejected", error_code: "resource_unavailable" }])
    }).pipe(Effect.provide(processLayer())))

  it.effect("the 120 s budget: a chunk just before it is received; at it the transfer ends, nothing installed", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(fileBegin("b-1", ws.local.id, "/workspace/late.txt", "abcd"))
        same(yield* result(core), ["b-1", { outcome: "ready" }])
        yield* adjust("119999 millis")
        yield* core.toRuntime(prepareChunk("b-1", 0, "ab"))
        same(yield* result(core), ["b-1", { outcome: "received", offset: 2 }])
        yield* adjust("1 millis")
        same(yield* result(core), ["b-1", invalid])
        yield* core.toRuntime(prepareChunk("b-1", 2, "cd"))
        same(yield* result(core), ["b-1", invalid])
        assert.isFalse(Fs.existsSync(ws.at("late.txt")))
        noStaging(ws)
      }).pipe(Effect.provide(processLayer({ environment: ws.binding })))
    }))
})

describe("runtime_prepare skill and plugin", () => {
  it.effect("extracts a skill into .agentwire/skills/<name>; a mismatched or unsafe archive changes nothing", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        const zip = skillZip("demo", "A demo skill.", { root: "bundle", extra: [{ name: "bundle/ref/notes.md", data: "notes\n" }] })
        same(yield* transfer(core, skillBegin("s-1", ws.local.id, "demo", "A demo skill.", zip), zip), { outcome: "completed", size_bytes: zip.length })
        assert.include(Fs.readFileSync(ws.at(".agentwire/skills/demo/SKILL.md"), "utf8"), "name: demo")
        same(Fs.readFileSync(ws.at(".agentwire/skills/demo/ref/notes.md"), "utf8"), "notes\n")
        // Front matter that does not match the metadata.
        const other = skillZip("demo", "A demo skill.", { frontName: "other" })
        same(yield* transfer(core, skillBegin("s-2", ws.local.id, "demo", "A demo skill.", other), other), refused)
        // A symlink entry.
        const link = buildZip([{ name: "demo/SKILL.md", data: "---\nname: demo\ndescription: A demo skill.\n---\n" }, { name: "demo/l", data: "/etc/passwd", mode: 0o120777 }])
        same(yield* transfer(core, skillBegin("s-3", ws.local.id, "demo", "A demo skill.", link), link), refused)
        // A name outside the grammar is refused at begin.
        yield* core.toRuntime(skillBegin("s-4", ws.local.id, "Bad Name", "x", zip))
        same(yield* result(core), ["s-4", refused])
        // An archive declared over 5 MiB is refused at begin.
        yield* core.toRuntime(skillBegin("s-5", ws.local.id, "demo", "A demo skill.", zip, { size_bytes: 5 * 1024 * 1024 + 1 }))
        same(yield* result(core), ["s-5", refused])
        // The installed skill is unchanged.
        same(Fs.readdirSync(ws.at(".agentwire/skills")), ["demo"])
        same(Fs.readFileSync(ws.at(".agentwire/skills/demo/ref/notes.md"), "utf8"), "notes\n")
        yield* settle
        noStaging(ws)
      }).pipe(Effect.provide(processLayer({ environment: ws.binding })))
    }))

  it.effect("installs a plugin into its slot, replacing the previous one", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        const plugin = (version: string) =>
          buildZip([{ name: "p/.codex-plugin/plugin.json", data: JSON.stringify({ name: "tools", version }) }, { name: "p/README.md", data: version }])
        const v1 = plugin("1")
        same(yield* transfer(core, pluginBegin("p-1", ws.local.id, 3, "tools", v1), v1), { outcome: "completed", size_bytes: v1.length })
        const v2 = plugin("2")
        same(yield* transfer(core, pluginBegin("p-2", ws.local.id, 3, "tools", v2), v2), { outcome: "completed", size_bytes: v2.length })
        same(Fs.readFileSync(ws.at(".agentwire/plugins/3/README.md"), "utf8"), "2")
        const wrong = plugin("3")
        same(yield* transfer(core, pluginBegin("p-3", ws.local.id, 4, "other", wrong), wrong), refused)
        assert.isFalse(Fs.existsSync(ws.at(".agentwire/plugins/4")))
      }).pipe(Effect.provide(processLayer({ environment: ws.binding })))
    }))
})

describe("runtime_prepare initialize and finalize", () => {
  it.effect("configure then setup runs a real command in its cwd with the configured environment", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      Fs.mkdirSync(ws.at("app"))
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        same(yield* run(core, initializeBegin("i-1", ws.local.id, { action: "configure", env: { GREETING: "hello" } })), { outcome: "completed" })
        same(
          yield* run(core, initializeBegin("i-2", ws.local.id, { action: "setup", network: "disabled", cwd: "/workspace/app", command: "printf '%s' \"$GREETING\" > out.txt; pwd > where.txt" })),
          { outcome: "completed" }
        )
        same(Fs.readFileSync(ws.at("app/out.txt"), "utf8"), "hello")
        same(Fs.readFileSync(ws.at("app/where.txt"), "utf8").trim(), ws.at("app"))
        same(
          yield* run(core, initializeBegin("i-3", ws.local.id, { action: "setup", network: "disabled", cwd: "/workspace", command: "exit 3" })),
          { outcome: "failed", error_code: "runtime_preparation_failed", exit_code: 3 }
        )
        // The daemon's own variables never reach the command (only the allowlist and `configure`).
        same(
          yield* run(core, initializeBegin("i-4", ws.local.id, { action: "setup", network: "disabled", cwd: "/workspace", command: "env > env.txt" })),
          { outcome: "completed" }
        )
        assert.notInclude(Fs.readFileSync(ws.at("env.txt"), "utf8"), "AGENTWIRE_")
        // A cwd that does not exist is refused; network enabled on a disabled binding is refused at begin.
        same(yield* run(core, initializeBegin("i-5", ws.local.id, { action: "setup", network: "disabled", cwd: "/workspace/missing", command: "true" })), refused)
        yield* core.toRuntime(initializeBegin("i-6", ws.local.id, { action: "npm", network: "enabled", packages: ["typescript"] }))
        same(yield* result(core), ["i-6", refused])
        // A chunk for an initialization ends it.
        yield* core.toRuntime(initializeBegin("i-7", ws.local.id, { action: "setup", network: "disabled", cwd: "/workspace", command: "touch never" }))
        same(yield* result(core), ["i-7", { outcome: "ready" }])
        yield* core.toRuntime(prepareChunk("i-7", 0, "x"))
        same(yield* result(core), ["i-7", invalid])
        assert.isFalse(Fs.existsSync(ws.at("never")))
      }).pipe(Effect.provide(processLayer({ environment: ws.binding, childEnv: { PATH: process.env["PATH"], AGENTWIRE_CREDENTIAL: "secret-x" } })))
    }))

  it.effect("finalize records the frozen sources; a missing skill is refused; nothing is added after it", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      Fs.mkdirSync(ws.at("tools"))
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        const zip = skillZip("demo", "A demo skill.")
        same(yield* transfer(core, skillBegin("f-1", ws.local.id, "demo", "A demo skill.", zip), zip), { outcome: "completed", size_bytes: zip.length })
        const missing = { skills: [{ type: "inline" as const, name: "absent", description: "x" }] }
        same(yield* run(core, finalizeBegin("f-2", ws.local.id, missing)), refused)
        const sources = { skills: [{ type: "inline" as const, name: "demo", description: "A demo skill." }], directories: ["/workspace/tools"] }
        same(yield* run(core, finalizeBegin("f-3", ws.local.id, sources)), { outcome: "completed" })
        same(JSON.parse(Fs.readFileSync(ws.at(".agentwire/capabilities.json"), "utf8")), { skills: sources.skills, plugins: [], directories: ["/workspace/tools"] })
        yield* core.toRuntime(skillBegin("f-4", ws.local.id, "demo", "A demo skill.", zip))
        same(yield* result(core), ["f-4", refused])
      }).pipe(Effect.provide(processLayer({ environment: ws.binding })))
    }))
})
