/**
 * The race of issue #13: while another process keeps swapping a workspace directory for a symlink to a
 * directory outside the root (and back), reads, listings and directory opens through that path never reach
 * the outside: every successful open is verified on the opened descriptor. The same holds for the other
 * families: a write (staging, chunk, fsync, rename, directory fsync) through that path never creates or changes
 * anything outside, and an export of the workspace never carries an outside file. Real processes, real time
 * (live).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { spawn } from "node:child_process"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { ExportStream } from "../../../src/runtime/workspace/internal/exportStream.js"
import {
  createStaging,
  DestinationRefused,
  discardStaging,
  renameStaging,
  openDirectoryChain,
  openDirectoryForList,
  openFileForRead,
  readPrefix,
  SafeFsError
} from "../../../src/runtime/workspace/internal/safeFs.js"
import { listDirectory } from "../../../src/runtime/workspace/internal/safeListing.js"
import { readTar } from "../../support/tarReader.js"
import { workspaceAndOutside } from "../../support/workspaceDaemon.js"
import type { TempWorkspace } from "../../support/workspaceDir.js"

const SECRET = "SECRET-OUTSIDE-THE-ROOT"

const swapper = `
const fs = require("node:fs")
const [root] = process.argv.slice(1)
for (let i = 0; i < 2000000; i++) {
  fs.renameSync(root + "/a", root + "/tmp")
  fs.renameSync(root + "/link", root + "/a")
  fs.renameSync(root + "/a", root + "/link")
  fs.renameSync(root + "/tmp", root + "/a")
}
`

/**
 * The same swap, tolerant of a write recreating `a` while it is away (a write creates missing parents): a stray
 * `a` is removed and the swap goes on. Each state (directory, outside link) is held for about 1 ms, so the
 * slower writes meet the link often.
 */
const tolerantSwapper = `
const fs = require("node:fs")
const [root] = process.argv.slice(1)
const pause = new Int32Array(new SharedArrayBuffer(4))
const mv = (from, to) => { try { fs.renameSync(root + from, root + to); return true } catch { return false } }
const force = (from, to) => { if (!mv(from, to)) { fs.rmSync(root + to, { recursive: true, force: true }); mv(from, to) } }
for (let i = 0; i < 2000000; i++) {
  if (!mv("/a", "/tmp")) continue
  force("/link", "/a")
  Atomics.wait(pause, 0, 0, 1)
  mv("/a", "/link")
  force("/tmp", "/a")
  Atomics.wait(pause, 0, 0, 1)
}
`

/** `a` (a directory with `a/f`) inside, an outside directory holding the secret, `link` → outside; the swapper runs. */
const raceSetup = (swapperSource: string) =>
  Effect.gen(function* () {
    const { ws, out } = yield* workspaceAndOutside
    Fs.mkdirSync(ws.at("a"))
    Fs.writeFileSync(ws.at("a/f"), "inside")
    Fs.writeFileSync(Path.join(out.root, "f"), SECRET)
    Fs.writeFileSync(Path.join(out.root, "only-outside"), SECRET)
    Fs.symlinkSync(out.root, ws.at("link"))
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => spawn(process.execPath, ["-e", swapperSource, ws.root], { stdio: "ignore" })),
      (c) => Effect.sync(() => void c.kill("SIGKILL"))
    )
    assert.isDefined(child.pid)
    return { ws, out }
  })

/** The outside directory is exactly as created: the two secret files, unchanged, nothing added. */
const outsideUntouched = (out: TempWorkspace) => {
  assert.deepStrictEqual(Fs.readdirSync(out.root).sort(), ["f", "only-outside"])
  for (const name of ["f", "only-outside"]) assert.strictEqual(Fs.readFileSync(Path.join(out.root, name), "utf8"), SECRET)
}

describe("safeFs under a directory/symlink swap race", () => {
  it.effect("never reads, lists or opens outside the root while `a` flips between a directory and an outside link", () =>
    Effect.gen(function* () {
      const { ws, out } = yield* raceSetup(swapper)
      const tally = new Map<string, number>()
      const count = (k: string) => tally.set(k, (tally.get(k) ?? 0) + 1)
      yield* Effect.promise(async () => {
        for (let i = 0; i < 3000; i++) {
          try {
            const { handle } = await openFileForRead(ws.root, "a/f")
            try {
              const text = Buffer.from((await readPrefix(handle, 64)).bytes).toString("utf8")
              assert.strictEqual(text, "inside")
              count("read_ok")
            } finally {
              await handle.close()
            }
          } catch (e) {
            if (!(e instanceof SafeFsError)) throw e
            count(`read_${e.reason}`)
          }
          try {
            const dir = await openDirectoryForList(ws.root, "a")
            try {
              const { entries } = await listDirectory(dir, 16)
              assert.notInclude(entries.map((x) => x.name), "only-outside")
              count("list_ok")
            } finally {
              await dir.close()
            }
          } catch (e) {
            if (!(e instanceof SafeFsError)) throw e
            count(`list_${e.reason}`)
          }
          try {
            const dir = await openDirectoryChain(ws.root, ["a"], { create: false, followLast: true })
            const real = await Fs.promises.readlink(`/proc/self/fd/${dir.fd}`)
            await dir.close()
            assert.isTrue(real.startsWith(ws.root), real)
            count("chain_ok")
          } catch (e) {
            if (!(e instanceof SafeFsError)) throw e
            count(`chain_${e.reason}`)
          }
        }
      })
      outsideUntouched(out)
      // The race really happened: both the in-root outcome and refusals were observed.
      assert.isAbove(tally.get("read_ok") ?? 0, 0, JSON.stringify([...tally]))
      assert.isAbove([...tally.keys()].filter((k) => !k.endsWith("_ok")).length, 0, JSON.stringify([...tally]))
    }))

  it.effect("a write through the flipping `a` never creates or changes anything outside the root", () =>
    Effect.gen(function* () {
      const { ws, out } = yield* raceSetup(tolerantSwapper)
      const tally = new Map<string, number>()
      const count = (k: string) => tally.set(k, (tally.get(k) ?? 0) + 1)
      yield* Effect.promise(async () => {
        // The install's steps that resolve names (the fsyncs act on open descriptors and only slow the loop down).
        for (let i = 0; i < 3000; i++) {
          const path = i % 2 === 0 ? "a/new.txt" : "a/f"
          let staging: Awaited<ReturnType<typeof createStaging>> | undefined
          try {
            staging = await createStaging(ws.root, path, `.race-${i}.tmp`)
            await staging.file.write(Buffer.from(`written ${i}`))
            await staging.file.close()
            await renameStaging(staging)
            count("write_ok")
          } catch (e) {
            if (e instanceof DestinationRefused) count(`write_${e.issue}`)
            else if (e instanceof SafeFsError) count(`write_${e.reason}`)
            else throw e
          } finally {
            if (staging !== undefined) await discardStaging(staging).catch(() => undefined)
          }
        }
      })
      outsideUntouched(out)
      assert.isAbove(tally.get("write_ok") ?? 0, 0, JSON.stringify([...tally]))
      assert.isAbove([...tally.keys()].filter((k) => !k.endsWith("_ok")).length, 0, JSON.stringify([...tally]))
    }))

  it.effect("an export of the workspace never carries an outside file while `a` flips", () =>
    Effect.gen(function* () {
      const { ws, out } = yield* raceSetup(swapper)
      const tally = new Map<string, number>()
      const count = (k: string) => tally.set(k, (tally.get(k) ?? 0) + 1)
      yield* Effect.promise(async () => {
        for (let i = 0; i < 400; i++) {
          const stream = new ExportStream(ws.root)
          const parts: Array<Uint8Array> = []
          try {
            for (let part = await stream.read(65536); part !== null; part = await stream.read(65536)) parts.push(Buffer.from(part))
          } catch (e) {
            if (!(e instanceof SafeFsError)) throw e
            count(`export_${e.reason}`)
            continue
          } finally {
            await stream.close()
          }
          const archive = Buffer.concat(parts)
          assert.isFalse(archive.includes(SECRET), "an outside file's content is in the archive")
          const paths = readTar(archive).map((e) => e.path)
          assert.notInclude(paths, "a/only-outside")
          assert.notInclude(paths, "link/f")
          count(paths.includes("a/f") ? "export_ok_with_a" : "export_ok_without_a")
        }
      })
      outsideUntouched(out)
      // The race really happened: exports both with and without `a`'s file were observed.
      assert.isAbove((tally.get("export_ok_with_a") ?? 0) + (tally.get("export_ok_without_a") ?? 0), 0, JSON.stringify([...tally]))
      assert.isAbove(tally.size, 1, JSON.stringify([...tally]))
    }))
})
