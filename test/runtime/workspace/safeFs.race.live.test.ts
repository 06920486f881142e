/**
 * The race of issue #13: while another process keeps swapping a workspace directory for a symlink to a
 * directory outside the root (and back), reads, listings and directory opens through that path never reach
 * the outside: every successful open is verified on the opened descriptor. Real processes, real time (live).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { spawn } from "node:child_process"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import {
  listDirectory,
  openDirectoryChain,
  openDirectoryForList,
  openFileForRead,
  readPrefix,
  SafeFsError
} from "../../../src/runtime/workspace/internal/safeFs.js"
import { tempWorkspace } from "../../support/workspaceDir.js"

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

describe("safeFs under a directory/symlink swap race", () => {
  it.effect("never reads, lists or opens outside the root while `a` flips between a directory and an outside link", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      const out = yield* tempWorkspace
      Fs.mkdirSync(ws.at("a"))
      Fs.writeFileSync(ws.at("a/f"), "inside")
      Fs.writeFileSync(Path.join(out.root, "f"), SECRET)
      Fs.writeFileSync(Path.join(out.root, "only-outside"), SECRET)
      Fs.symlinkSync(out.root, ws.at("link"))
      const child = yield* Effect.acquireRelease(
        Effect.sync(() => spawn(process.execPath, ["-e", swapper, ws.root], { stdio: "ignore" })),
        (c) => Effect.sync(() => void c.kill("SIGKILL"))
      )
      assert.isDefined(child.pid)
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
      // The race really happened: both the in-root outcome and refusals were observed.
      assert.isAbove(tally.get("read_ok") ?? 0, 0, JSON.stringify([...tally]))
      assert.isAbove([...tally.keys()].filter((k) => !k.endsWith("_ok")).length, 0, JSON.stringify([...tally]))
    }))
})
