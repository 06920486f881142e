/**
 * The export's tar stream (`internal/exportStream.ts`) read directly over a real temporary workspace: file data
 * is read in 256 KiB blocks and cut into chunks, so these check the block edges — files larger than a block and
 * not aligned to it, every chunk but the last exactly the size asked for, chunks that do not alias one another,
 * and a file that shrinks between two blocks failing the export instead of padding it. The walk's listing takes
 * kinds from the directory entries' own types: the same kinds `lstat` gives.
 */
import * as Fs from "node:fs"
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { ExportStream, ReadBlockBytes } from "../../../src/runtime/workspace/internal/exportStream.js"
import { openDirectoryForList, SafeFsError } from "../../../src/runtime/workspace/internal/safeFs.js"
import { listDirectory } from "../../../src/runtime/workspace/internal/safeListing.js"
import { readTar } from "../../support/tarReader.js"
import { tempWorkspace } from "../../support/workspaceDir.js"

const body = (n: number, seed: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed) % 251))
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex")

/**
 * Reads the whole stream in chunks of `max` (with `ready`, each chunk `readReady` has is taken from it, as the
 * daemon does); each chunk is copied, then the returned bytes are overwritten.
 */
const readAll = async (stream: ExportStream, max: number, ready = false) => {
  const chunks: Array<Buffer> = []
  let readyCount = 0
  const next = async () => {
    const now = ready ? stream.readReady(max) : undefined
    if (now !== undefined) readyCount++
    return now ?? (await stream.read(max))
  }
  try {
    for (let chunk = await next(); chunk !== null; chunk = await next()) {
      chunks.push(Buffer.from(chunk))
      chunk.fill(0xee) // a chunk that aliased a later one would corrupt it
    }
  } finally {
    await stream.close()
  }
  return Object.assign(chunks, { readyCount })
}

describe("export tar stream", () => {
  it.effect("files larger than a read block, at unaligned offsets, come out intact in exact chunks", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      const files = new Map<string, Buffer>([
        ["a.bin", body(ReadBlockBytes * 2 + 12_345, 1)],
        ["b.bin", body(3, 2)],
        ["c/d.bin", body(ReadBlockBytes - 1, 3)],
        ["c/e.bin", body(ReadBlockBytes + 1, 4)]
      ])
      Fs.mkdirSync(ws.at("c"))
      for (const [path, data] of files) Fs.writeFileSync(ws.at(path), data)
      for (const max of [65536, 65536 - 7, 1000]) {
        const chunks = yield* Effect.promise(() => readAll(new ExportStream(ws.root), max))
        for (const [i, chunk] of chunks.entries()) {
          if (i < chunks.length - 1) assert.strictEqual(chunk.length, max, `chunk ${i} of ${chunks.length} (max ${max})`)
          else assert.isTrue(chunk.length >= 1 && chunk.length <= max)
        }
        const entries = readTar(Buffer.concat(chunks))
        assert.deepStrictEqual(
          new Map(entries.filter((e) => e.type === "file").map((e) => [e.path, e.sha256])),
          new Map([...files].map(([p, b]) => [p, sha(b)]))
        )
        // Taking the chunks `readReady` has gives the same chunks, byte for byte (and it has some).
        const mixed = yield* Effect.promise(() => readAll(new ExportStream(ws.root), max, true))
        assert.isAbove(mixed.readyCount, 0)
        assert.deepStrictEqual(mixed.map((c) => c.length), chunks.map((c) => c.length))
        assert.isTrue(Buffer.concat(mixed).equals(Buffer.concat(chunks)))
      }
    }))

  it.effect("a file that shrinks after its header was written fails the export (never padded or cut silently)", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      Fs.writeFileSync(ws.at("big.bin"), body(ReadBlockBytes * 3, 5))
      const outcome = yield* Effect.promise(async () => {
        const stream = new ExportStream(ws.root)
        try {
          // The header and the first block are out; then the file loses its last two blocks.
          const first = await stream.read(65536)
          assert.isNotNull(first)
          Fs.truncateSync(ws.at("big.bin"), ReadBlockBytes)
          for (let chunk = await stream.read(65536); chunk !== null; chunk = await stream.read(65536));
          return "completed"
        } catch (e) {
          return e instanceof SafeFsError ? e.reason : String(e)
        } finally {
          await stream.close()
        }
      })
      assert.strictEqual(outcome, "io")
    }))

  it.effect("a listing with kinds from the entries' types reports what lstat reports (file, directory, symlink, FIFO)", () =>
    Effect.gen(function* () {
      const ws = yield* tempWorkspace
      Fs.writeFileSync(ws.at("file"), "x")
      Fs.mkdirSync(ws.at("dir"))
      Fs.symlinkSync("file", ws.at("link"))
      execFileSync("mkfifo", [ws.at("fifo")])
      const [typed, statted] = yield* Effect.promise(async () => {
        const dir = await openDirectoryForList(ws.root, "")
        try {
          return [
            (await listDirectory(dir, 100, { kindsFromDirents: true })).entries.map((e) => [e.name, e.kind]),
            (await listDirectory(dir, 100)).entries.map((e) => [e.name, e.kind])
          ]
        } finally {
          await dir.close()
        }
      })
      assert.deepStrictEqual(typed, [["dir", "directory"], ["fifo", "other"], ["file", "file"], ["link", "symlink"]])
      assert.deepStrictEqual(typed, statted)
    }))
})
