/**
 * `workspace_export`, Runtime side (issue #13), over a real temporary workspace: a generated tree exported in
 * pulled 64 KiB chunks at exact offsets, parsed back (test/support/tarReader.ts) and compared entry by entry
 * with SHA-256 digests; the output rules (symlinks kept only when they stay inside, special and hard-linked files
 * and escaping links skipped); a wrong offset ends the export; cancel without a reply; capacity 1 and the
 * exclusion of writes; a failed close keeps ownership; the 180 s budget (TestClock, just before and at it).
 */
import * as Fs from "node:fs"
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { StatusBoard } from "../../../src/runtime/StatusBoard.js"
import type { WorkspaceFsShape } from "../../../src/runtime/workspace/WorkspaceFs.js"
import { adjust, connect, next, processLayer, releaseFrame, same, silent } from "../../support/runtimeTestWire.js"
import { readTar, type TarEntryRead } from "../../support/tarReader.js"
import { boundTo, type Core, exportResult, readyReadOnly, workspaceAndOutside } from "../../support/workspaceDaemon.js"
import { tempWorkspace, type TempWorkspace } from "../../support/workspaceDir.js"
import { exportBegin, exportCancel, exportNext, readOnlyPrepare, writeBegin } from "../../support/workspaceFrames.js"

const result = exportResult

const body = (n: number, seed: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed) % 251))
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex")

const longDir = "d".repeat(90)
const longName = `${"n".repeat(60)}.txt`

/** A generated tree: sizes around the block and chunk boundaries, deep and long paths, non-ASCII names. */
const generate = (ws: TempWorkspace): Map<string, Buffer> => {
  const files = new Map<string, Buffer>()
  const sizes = [0, 1, 511, 512, 513, 65535, 65536, 65537, 200_003]
  for (const [i, size] of sizes.entries()) files.set(`f${i}.bin`, body(size, i))
  files.set("src/a/b/c/deep.ts", body(3000, 7))
  files.set(`${longDir}/${longName}`, body(100, 8))
  files.set("naïve/héllo.txt", body(10, 9))
  for (const [path, data] of files) {
    Fs.mkdirSync(ws.at(path.split("/").slice(0, -1).join("/") || "."), { recursive: true })
    Fs.writeFileSync(ws.at(path), data)
  }
  Fs.mkdirSync(ws.at("empty-dir"))
  return files
}

/** Pulls a whole export: begin, then `next` at each total, until `completed`; checks every offset. */
const pull = (core: Core, id: string, env: string) =>
  Effect.gen(function* () {
    yield* core.toRuntime(exportBegin(id, env))
    const parts: Array<Buffer> = []
    let total = 0
    for (;;) {
      const [rid, p] = yield* result(core)
      same(rid, id)
      same(p.offset, total)
      if (p.outcome === "completed") {
        same(p.data, undefined)
        return Buffer.concat(parts)
      }
      same(p.outcome, "chunk")
      const data = Buffer.from(p.data ?? "", "base64")
      assert.isTrue(data.length >= 1 && data.length <= 65536)
      parts.push(data)
      total += data.length
      yield* core.toRuntime(exportNext(id, total))
    }
  })

const summary = (entries: ReadonlyArray<TarEntryRead>) =>
  entries.map((e) => [e.path, e.type, e.type === "file" ? e.sha256 : e.type === "symlink" ? e.linkTarget : ""])

describe("workspace_export", () => {
  it.effect("exports a generated tree as a tar, pulled in ≤ 64 KiB chunks at exact offsets; digests match", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      const files = generate(ws)
      yield* Effect.gen(function* () {
        const { core } = yield* readyReadOnly(ws)
        const archive = yield* pull(core, "e-1", ws.local.id)
        const entries = readTar(archive)
        const expectedDirs = ["empty-dir", longDir, "naïve", "src", "src/a", "src/a/b", "src/a/b/c"]
        same(entries.filter((e) => e.type === "directory").map((e) => e.path).sort(), expectedDirs.sort())
        same(
          new Map(entries.filter((e) => e.type === "file").map((e) => [e.path, e.sha256])),
          new Map([...files].map(([p, b]) => [p, sha(b)]))
        )
        // Depth-first, sorted by name: every directory precedes its contents.
        const order = entries.map((e) => e.path)
        for (const [i, e] of entries.entries()) {
          const parent = e.path.split("/").slice(0, -1).join("/")
          if (parent !== "") assert.isTrue(order.indexOf(parent) < i, e.path)
        }
        same(entries.find((e) => e.path === "f0.bin")?.mode, Fs.statSync(ws.at("f0.bin")).mode & 0o777)
        // Deterministic: the same tree exports the same bytes; a second export after the first completed is admitted.
        same(sha(yield* pull(core, "e-2", ws.local.id)), sha(archive))
        assert.isTrue(yield* silent(core))
      }).pipe(boundTo(ws))
    }))

  it.effect("symlinks are kept only when relative and inside; special, hard-linked and escaping entries are skipped", () =>
    Effect.gen(function* () {
      const { ws, out } = yield* workspaceAndOutside
      Fs.writeFileSync(out.at("secret.txt"), "outside")
      Fs.mkdirSync(ws.at("dir"))
      Fs.writeFileSync(ws.at("dir/file.txt"), "inside")
      Fs.symlinkSync("file.txt", ws.at("dir/ok-link"))
      Fs.symlinkSync("../dir", ws.at("dir-link"))
      Fs.symlinkSync(out.root, ws.at("abs-out"))
      Fs.symlinkSync("../../../../../../etc/passwd", ws.at("dir/escape"))
      Fs.symlinkSync(ws.at("dir/file.txt"), ws.at("abs-in"))
      execFileSync("mkfifo", [ws.at("pipe")])
      Fs.writeFileSync(ws.at("linked-a"), "hard")
      Fs.linkSync(ws.at("linked-a"), ws.at("linked-b"))
      Fs.symlinkSync("dir", ws.at("root-link"))
      yield* Effect.gen(function* () {
        const { core } = yield* readyReadOnly(ws)
        same(summary(readTar(yield* pull(core, "s-1", ws.local.id))), [
          ["dir", "directory", ""],
          ["dir/file.txt", "file", sha(Buffer.from("inside"))],
          ["dir/ok-link", "symlink", "file.txt"],
          ["root-link", "symlink", "dir"]
        ])
        same(Fs.readdirSync(out.root), ["secret.txt"])
      }).pipe(boundTo(ws))
    }))

  it.effect("a wrong offset ends the export with failed / invalid_request; next for an unknown id is resource_unavailable", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      generate(ws)
      yield* Effect.gen(function* () {
        const { core } = yield* readyReadOnly(ws)
        yield* core.toRuntime(exportBegin("o-1", ws.local.id))
        const [, first] = yield* result(core)
        same([first.outcome, first.offset, Buffer.from(first.data ?? "", "base64").length], ["chunk", 0, 65536])
        // Out of order: asks for a chunk it has not reached (and then one it already has).
        yield* core.toRuntime(exportNext("o-1", 131072))
        same(yield* result(core), ["o-1", { outcome: "failed", offset: 65536, error_code: "invalid_request" }])
        yield* core.toRuntime(exportNext("o-1", 65536))
        same(yield* result(core), ["o-1", { outcome: "rejected", offset: 65536, error_code: "resource_unavailable" }])
        yield* core.toRuntime(exportBegin("o-2", ws.local.id))
        same((yield* result(core))[1].offset, 0)
        yield* core.toRuntime(exportNext("o-2", 0))
        same(yield* result(core), ["o-2", { outcome: "failed", offset: 65536, error_code: "invalid_request" }])
        yield* core.toRuntime(exportNext("nope", 7))
        same(yield* result(core), ["nope", { outcome: "rejected", offset: 7, error_code: "resource_unavailable" }])
        yield* core.toRuntime(exportCancel("nope"))
        assert.isTrue(yield* silent(core))
      }).pipe(boundTo(ws))
    }))

  it.effect("cancel ends the export without a reply and frees its capacity; one export at a time; writes excluded", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      generate(ws)
      yield* Effect.gen(function* () {
        const { core } = yield* readyReadOnly(ws)
        yield* core.toRuntime(exportBegin("c-1", ws.local.id))
        same((yield* result(core))[1].outcome, "chunk")
        yield* core.toRuntime(exportBegin("c-1", ws.local.id)) // duplicate of the active id: no reply
        yield* core.toRuntime(exportBegin("c-2", ws.local.id))
        same(yield* result(core), ["c-2", { outcome: "rejected", offset: 0, error_code: "resource_unavailable" }])
        yield* core.toRuntime(writeBegin("w-1", ws.local.id, "x.txt", "x"))
        same((yield* next(core, "workspace_write_result")).payload, { outcome: "rejected", error_code: "resource_unavailable" })
        yield* core.toRuntime(exportCancel("c-1"))
        yield* core.toRuntime(exportNext("c-1", 65536))
        same(yield* result(core), ["c-1", { outcome: "rejected", offset: 65536, error_code: "resource_unavailable" }])
        // The handle's released is published only after the export's close was confirmed; then the capacity is free.
        yield* core.toRuntime(releaseFrame("prep-ro", "handle-1"))
        same((yield* next(core, "preparation_status")).payload.state, "released")
        const board = yield* StatusBoard
        same((yield* board.snapshot).unconfirmed, [])
        yield* core.toRuntime(readOnlyPrepare("prep-ro-2", ws.local))
        same((yield* next(core, "preparation_status")).payload.state, "preparing")
        same((yield* next(core, "preparation_status")).payload.state, "ready")
        yield* core.toRuntime(exportBegin("c-3", ws.local.id, "handle-2"))
        same((yield* result(core))[1].offset, 0)
        yield* core.toRuntime(exportCancel("c-3"))
      }).pipe(boundTo(ws))
    }))

  it.effect("refused: another Environment, an unknown handle, a released handle (resource_unavailable); an unbound daemon (read_unsupported)", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      generate(ws)
      const unavailable = (id: string) => [id, { outcome: "rejected", offset: 0, error_code: "resource_unavailable" }]
      yield* Effect.gen(function* () {
        const { core } = yield* readyReadOnly(ws)
        yield* core.toRuntime(exportBegin("r-1", "f4b2c1d0-9f8e-4a7b-b6c5-d4e3f2a1b0c9"))
        same(yield* result(core), unavailable("r-1"))
        yield* core.toRuntime(exportBegin("r-2", ws.local.id, "handle-9"))
        same(yield* result(core), unavailable("r-2"))
        yield* core.toRuntime(releaseFrame("prep-ro", "handle-1"))
        same((yield* next(core, "preparation_status")).payload.state, "released")
        yield* core.toRuntime(exportBegin("r-3", ws.local.id))
        same(yield* result(core), unavailable("r-3"))
      }).pipe(boundTo(ws))
      yield* Effect.gen(function* () {
        const { core } = yield* connect()
        yield* core.toRuntime(exportBegin("r-4", ws.local.id))
        same(yield* result(core), ["r-4", { outcome: "rejected", offset: 0, error_code: "read_unsupported" }])
      }).pipe(Effect.provide(processLayer()))
    }))

  it.effect("180 s budget: nothing at 179.999 s; at 180 s failed / export_failed at the current offset and the capacity is free", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      generate(ws)
      yield* Effect.gen(function* () {
        const { core } = yield* readyReadOnly(ws)
        yield* core.toRuntime(exportBegin("b-1", ws.local.id))
        same((yield* result(core))[1].offset, 0)
        yield* adjust("179999 millis")
        assert.isTrue(yield* silent(core))
        yield* adjust("1 millis")
        same(yield* result(core), ["b-1", { outcome: "failed", offset: 65536, error_code: "export_failed" }])
        yield* core.toRuntime(exportBegin("b-2", ws.local.id))
        const [, again] = yield* result(core)
        same([again.outcome, again.offset], ["chunk", 0])
      }).pipe(boundTo(ws))
    }))

  it.effect("a failed close keeps ownership (cleanup unconfirmed) and the handle's released waits for the confirmed close", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      generate(ws)
      let failures = 2
      const failingClose = (fs: WorkspaceFsShape): WorkspaceFsShape => ({
        ...fs,
        openExport: Effect.map(fs.openExport, (e) => ({ ...e, close: Effect.suspend(() => (failures-- > 0 ? Effect.fail("io" as const) : e.close)) }))
      })
      yield* Effect.gen(function* () {
        const { core } = yield* readyReadOnly(ws)
        yield* core.toRuntime(exportBegin("f-1", ws.local.id))
        same((yield* result(core))[1].offset, 0)
        yield* core.toRuntime(exportCancel("f-1"))
        yield* adjust(0)
        const board = yield* StatusBoard
        same((yield* board.snapshot).unconfirmed.map((u) => [u.resource, u.kind]), [["export:f-1", "workspace"]])
        // Still owned: no second export yet.
        yield* core.toRuntime(exportBegin("f-2", ws.local.id))
        same(yield* result(core), ["f-2", { outcome: "rejected", offset: 0, error_code: "resource_unavailable" }])
        yield* core.toRuntime(releaseFrame("prep-ro", "handle-1"))
        assert.isTrue(yield* silent(core))
        yield* adjust("1 minute")
        same((yield* next(core, "preparation_status")).payload.state, "released")
        same((yield* board.snapshot).unconfirmed, [])
      }).pipe(boundTo(ws, failingClose))
    }))
})
